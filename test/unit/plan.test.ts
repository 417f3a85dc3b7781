// domain/plan on a decided target: scaleIn plans through the same buildPlan as everything else,
// with the survivors domain/scale-in chose. A victim is a stop and nothing else; a survivor that
// keeps its task id (even re-indexed, with more partitions) is neither started nor stopped.
import { buildPlan, DecisionStaleError } from '../../domain/plan';
import { planScaleIn } from '../../domain/scale-in';
import { UNKNOWN_CONTRACT, type Assignment, type Placement, type Runtime, type Workload } from '../../protocol';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const runtimes: Runtime[] = [0, 1, 2, 3].map((i) => ({
  id: `rt-${i}`, endpoint: `http://127.0.0.1:7400/${i}`, labels: {}, slots: 4, status: 'READY',
  leaseExpiresAt: new Date(NOW + 30_000).toISOString(), fence: 1,
}));
const orders = {
  name: 'orders', kind: 'consumer', replicas: 4, selector: {}, revision: 9, retired: false,
  contract: { ...UNKNOWN_CONTRACT, ownership: 'partitioned', partitions: 8 },
  spec: { partitions: 8, source: 'orders_in', sink: 'orders_out', workMs: 1 },
} as Workload;
const current: Assignment[] = [0, 1, 2, 3].map((i) => ({ runtimeId: `rt-${i}`, index: i, taskId: `orders-${i}-g1`, partitions: [i, i + 4] }));
const placement: Placement = { workload: 'orders', fence: 5, generation: 1, assignments: current };

// replicas 1 and 3 are the least loaded: they go, 2 survives re-indexed as 1
const decision = planScaleIn({
  current, target: 2,
  loads: current.map((a) => ({ taskId: a.taskId, runtimeId: a.runtimeId, index: a.index, ownedPartitions: 2, inFlight: 0, load: [40, 10, 30, 20][a.index] })),
});

describe('buildPlan on a decided target', () => {
  it('stops exactly the victims, starts and moves nothing, and keeps the generation and basis', () => {
    const plan = buildPlan({
      workload: orders, replicas: 2, runtimes, placements: [placement], nowMs: NOW,
      decided: { assignments: decision.survivors, onFence: 5, warnings: ['stopping above target: example'] },
    });
    expect(decision.survivors.map((a) => [a.taskId, a.index])).toEqual([['orders-0-g1', 0], ['orders-2-g1', 1]]);
    expect(plan.target).toEqual(decision.survivors);
    expect(plan.stops.map((a) => a.taskId).sort()).toEqual(decision.victims.map((a) => a.taskId).sort());
    expect(plan.starts).toEqual([]);
    expect(plan.moves).toEqual([]);
    expect(plan).toMatchObject({ fromReplicas: 4, replicas: 2, generation: 1, unplaced: null, basis: { registryRevision: 9, placementFence: 5 } });
    expect(plan.evidenceRequired).toEqual(['drain receipts', 'removed runtimes own no assignment']);
    expect(plan.warnings).toContain('stopping above target: example');
  });

  it('refuses a target decided on a placement that has moved since', () => {
    const moved = { ...placement, fence: 6 };
    expect(() => buildPlan({ workload: orders, replicas: 2, runtimes, placements: [moved], nowMs: NOW, decided: { assignments: decision.survivors, onFence: 5 } }))
      .toThrow(DecisionStaleError);
  });

  it('without a decided target, a task kept on its runtime is still not restarted by a plan', () => {
    const plan = buildPlan({ workload: orders, replicas: 4, runtimes, placements: [placement], nowMs: NOW });
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(plan.moves).toEqual([]);
  });
});
