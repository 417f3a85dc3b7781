// Desired, placed and ready replicas (domain/replicas.ts): what /v1/state and the gauges
// scalegate_workload_replicas{state} both report.
import { replicaCounts } from '../../domain/replicas';
import type { Labels, Runtime, TaskReport } from '../../protocol';

const NOW = Date.parse('2030-01-01T00:00:00Z');
const runtime = (id: string, extra: Partial<Runtime> = {}, tasks: Pick<TaskReport, 'taskId' | 'state'>[] = []) => ({
  id, endpoint: `http://${id}`, labels: { zone: id }, slots: 4, status: 'READY' as const, fence: 1,
  leaseExpiresAt: new Date(NOW + 10_000).toISOString(), ...extra,
  tasks: tasks.map((t) => ({ workload: 'web', incarnation: 'i', counts: {}, errors: 0, ...t })),
});

describe('replicaCounts', () => {
  it('counts desired from the registry, placed from the placement, ready from the tasks its runtimes report ready', () => {
    const runtimes = [
      runtime('a', {}, [{ taskId: 'web-0', state: 'ready' }, { taskId: 'old-web-9', state: 'ready' }]),
      runtime('b', {}, [{ taskId: 'web-1', state: 'starting' }]),
      runtime('c', { status: 'LOST' }, [{ taskId: 'web-2', state: 'ready' }]), // a LOST runtime's report is stale
      runtime('d', {}, [{ taskId: 'web-3', state: 'ready' }]), // ready, but not where the placement puts web-3
    ];
    const placement = {
      workload: 'web',
      assignments: [{ runtimeId: 'a', index: 0, taskId: 'web-0' }, { runtimeId: 'b', index: 1, taskId: 'web-1' }, { runtimeId: 'c', index: 2, taskId: 'web-2' }, { runtimeId: 'a', index: 3, taskId: 'web-3' }],
    };
    const counts = replicaCounts([{ name: 'web', replicas: 5, selector: {} }, { name: 'new', replicas: 2, selector: {} }], [placement], runtimes, NOW);
    expect(counts).toEqual({ web: { desired: 5, placed: 4, ready: 1 }, new: { desired: 2, placed: 0, ready: 0 } });
  });

  it('counts an `all` workload\'s desired as the fresh READY runtimes its selector matches', () => {
    const runtimes = [
      runtime('a'), runtime('b'), runtime('c', { status: 'CORDONED' }),
      runtime('d', { leaseExpiresAt: new Date(NOW - 1).toISOString() }), runtime('e', { labels: { zone: 'x', pool: 'p' } }),
    ];
    const workloads: { name: string; replicas: 'all'; selector: Labels }[] = [{ name: 'agent', replicas: 'all', selector: {} }, { name: 'pooled', replicas: 'all', selector: { pool: 'p' } }];
    expect(replicaCounts(workloads, [], runtimes, NOW)).toEqual({ agent: { desired: 3, placed: 0, ready: 0 }, pooled: { desired: 1, placed: 0, ready: 0 } });
  });
});
