// Lease sweeping and runtime recovery (domain/recovery.ts), pure: the sweeper's guards after a
// control-plane outage, mass expiry per zone, and recoverRuntime's decision per workload (service
// replaced by rendezvous among survivors, consumer moved or handed over from the committed offsets,
// unplaced when nothing is eligible, stream jobs left to their replan), touching only the lost runtime's work.
import { buildPlan } from '../../domain/plan';
import { decideForWorkload } from '../../domain/reconcile';
import {
  apiOutageAfterMs, controlPlaneGuard, decideRecovery, decideSweep, planRecovery, replacementTaskId, type SweptRuntime, type WorkloadRecovery,
} from '../../domain/recovery';
import { beginPlacementPass, matchesSelector, rendezvousOrder } from '../../domain/placement';
import { RendezvousKeyCache } from '../../domain/rendezvous';
import { placeAll } from '../support/placement-fleet';
import type { Assignment, Placement, Runtime, Workload } from '../../protocol';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const LEASE = 3000;

// ---------------------------------------------------------------------------------------------
// the lease sweeper

describe('the control-plane guard', () => {
  const healthy = { api: { atMs: NOW - 500, resumedAtMs: NOW - 60_000 }, sweeper: { resumedAtMs: NOW - 60_000 } };

  it('lets the sweeper judge leases when the API and the sweeper have been up for more than a lease', () => {
    expect(controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy })).toBeNull();
  });

  it('holds while no API ever recorded its liveness', () => {
    expect(controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, api: null, sweeper: healthy.sweeper })?.code).toBe('api-never-seen');
  });

  it('holds while the API is away (its liveness older than half a lease)', () => {
    const guard = controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy, api: { atMs: NOW - apiOutageAfterMs(LEASE) - 1, resumedAtMs: NOW - 60_000 } });
    expect(guard?.code).toBe('api-unavailable');
    expect(controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy, api: { atMs: NOW - apiOutageAfterMs(LEASE), resumedAtMs: NOW - 60_000 } })).toBeNull();
  });

  it('waits one lease after the API came back, for heartbeats', () => {
    expect(controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy, api: { atMs: NOW, resumedAtMs: NOW - LEASE + 1 } })?.code).toBe('api-resumed');
    expect(controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy, api: { atMs: NOW, resumedAtMs: NOW - LEASE } })).toBeNull();
  });

  it('waits one lease after the sweeper itself came back (its first pass, or a gap longer than the lease)', () => {
    const guard = controlPlaneGuard({ nowMs: NOW, leaseTtlMs: LEASE, ...healthy, sweeper: { resumedAtMs: NOW - 10 } });
    expect(guard?.code).toBe('sweeper-resumed');
    expect(guard?.detail).toMatch(/waiting one lease/);
  });
});

describe('a sweep', () => {
  const swept = (id: string, zone: string | null, leaseLeftMs: number, extra: Partial<SweptRuntime> = {}): SweptRuntime => ({
    id, labels: zone === null ? {} : { zone }, status: 'READY', fence: 4, leaseExpiresAtMs: NOW + leaseLeftMs, held: false, ...extra,
  });
  const sweep = (runtimes: SweptRuntime[], guard: Parameters<typeof decideSweep>[0]['guard'] = null) =>
    decideSweep({ nowMs: NOW, leaseTtlMs: LEASE, runtimes, guard });

  it('declares a lone expired runtime LOST, with the fence it was seen at', () => {
    const decision = sweep([swept('a-1', 'a', -1), swept('a-2', 'a', 2500), swept('a-3', 'a', 2900)]);
    expect(decision).toEqual({ guard: null, declare: [{ id: 'a-1', fence: 4 }], massExpiry: [], waiting: [] });
  });

  it('declares nothing under a guard, and says which expired runtimes wait', () => {
    const decision = sweep([swept('a-1', 'a', -1), swept('b-1', 'b', -500)], { code: 'api-resumed', detail: 'back' });
    expect(decision.declare).toEqual([]);
    expect(decision.waiting).toEqual(['a-1', 'b-1']);
  });

  it('holds more than half of a zone expiring at once as a mass expiry, suspects that stopped a beat later included', () => {
    // a-2 stopped with a-1 but heartbeat a beat later: its lease has not run out, but less than a third of it is left
    const decision = sweep([swept('a-1', 'a', -10), swept('a-2', 'a', LEASE / 3 - 50), swept('a-3', 'a', 2800), swept('b-1', 'b', 2800)]);
    expect(decision.declare).toEqual([]);
    expect(decision.massExpiry).toEqual([{ zone: 'a', population: 3, expired: ['a-1'], suspects: ['a-1', 'a-2'] }]);
  });

  it('is no mass expiry when only one runtime expires, even alone in its zone, nor when exactly half do', () => {
    expect(sweep([swept('c-1', 'c', -1), swept('a-1', 'a', 2800)]).declare.map((d) => d.id)).toEqual(['c-1']);
    const half = sweep([swept('b-1', 'b', -1), swept('b-2', 'b', -1), swept('b-3', 'b', 2800), swept('b-4', 'b', 2900)]);
    expect(half.massExpiry).toEqual([]);
    expect(half.declare.map((d) => d.id)).toEqual(['b-1', 'b-2']);
  });

  it('judges each zone on its own; runtimes without a zone label share one', () => {
    const decision = sweep([
      swept('a-1', 'a', -1), swept('a-2', 'a', -1), swept('a-3', 'a', 2800),
      swept('b-1', 'b', -1), swept('b-2', 'b', 2800), swept('b-3', 'b', 2800),
      swept('x-1', null, -1), swept('x-2', null, 2900),
    ]);
    expect(decision.massExpiry.map((m) => m.zone)).toEqual(['a']);
    expect(decision.declare.map((d) => d.id)).toEqual(['b-1', 'x-1']);
  });

  it('leaves held and LOST runtimes out: neither declared nor counted in their zone', () => {
    const decision = sweep([
      swept('a-1', 'a', -5000, { held: true }), swept('a-2', 'a', -5000, { held: true }),
      swept('a-3', 'a', -1), swept('a-4', 'a', 2800), swept('a-5', 'a', 2800, { status: 'LOST' }),
    ]);
    expect(decision.declare.map((d) => d.id)).toEqual(['a-3']);
    expect(decision.massExpiry).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// recoverRuntime's decision

const runtime = (id: string, labels: Record<string, string> = { zone: 'a' }, overrides: Partial<Runtime> = {}): Runtime => ({
  id, endpoint: `http://127.0.0.1:7400/${id}`, labels, slots: 4, status: 'READY', leaseExpiresAt: new Date(NOW + 30_000).toISOString(), fence: 1, ...overrides,
});
const lostRuntime = (id: string, labels: Record<string, string> = { zone: 'a' }) => runtime(id, labels, { status: 'LOST', leaseExpiresAt: new Date(NOW - 1).toISOString() });

const CONSUMER_CONTRACT = { ownership: 'partitioned', partitions: 8, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign' } as const;
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart' } as const;

const service = (name: string, replicas: number | 'all', overrides: Partial<Workload> = {}): Workload => ({
  name, kind: 'service', replicas, selector: {}, contract: SERVICE_CONTRACT, revision: 3, retired: false,
  spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 }, ...overrides,
} as Workload);
const consumer = (name: string, replicas: number | 'all', overrides: Partial<Workload> = {}): Workload => ({
  name, kind: 'consumer', replicas, selector: {}, contract: CONSUMER_CONTRACT, revision: 3, retired: false,
  spec: { partitions: 8, source: `${name}_in`, sink: `${name}_out`, workMs: 1 }, ...overrides,
} as Workload);

const a = (runtimeId: string, workload: string, index: number, partitions?: number[]): Assignment => ({
  runtimeId, index, taskId: `${workload}-${index}-g1`, ports: { public: 20000 + index, internal: 21000 + index }, ...(partitions ? { partitions } : {}),
});
const placed = (workload: string, assignments: Assignment[], fence = 5): Placement => ({ workload, fence, generation: 1, assignments });

function decide(input: { lost: string; runtimes: Runtime[]; placements: Placement[]; workloads: Workload[]; storedOwners?: Record<string, number[]> }): WorkloadRecovery[] {
  return decideRecovery({ runtimeId: input.lost, runtimes: input.runtimes, placements: input.placements, workloads: input.workloads, nowMs: NOW, storedOwners: input.storedOwners });
}
describe('recovering a service', () => {
  const fleet = [lostRuntime('rt-a'), runtime('rt-b'), runtime('rt-c'), runtime('rt-d'), runtime('rt-e')];
  const web = service('web', 2);
  const webPlacement = placed('web', [a('rt-a', 'web', 0), a('rt-b', 'web', 1)]);

  it('replaces the lost replica on the rendezvous winner among the survivors that do not host it, under a new task id', () => {
    const [decision] = decide({ lost: 'rt-a', runtimes: fleet, placements: [webPlacement], workloads: [web] });
    const winner = rendezvousOrder('web', [runtime('rt-c'), runtime('rt-d'), runtime('rt-e')])[0];
    expect(decision.decisions).toEqual([expect.objectContaining({ index: 0, lostTaskId: 'web-0-g1', action: 'replaced', to: { runtimeId: winner, taskId: 'web-0-g1-r6' } })]);
    expect(replacementTaskId('web', 0, 1, 6)).toBe('web-0-g1-r6');
    // the survivor keeps its runtime, task id and ports; nothing else moves
    expect(decision.target).toEqual([{ runtimeId: winner, index: 0, taskId: 'web-0-g1-r6' }, a('rt-b', 'web', 1)]);
    expect(decision.converge).toEqual([{ runtimeId: winner, taskId: 'web-0-g1-r6' }]);
    expect(decision).toMatchObject({ onFence: 5, fromReplicas: 2, toReplicas: 2, unplaced: null, storedOwner: { runtimeId: 'rt-a', tasks: ['web-0-g1'] } });
    expect(decision.summary).toBe(`web: replica 0 replaced to ${winner} (web-0-g1-r6)`);
  });

  it('recomputes only the lost runtime\'s assignments: every other workload and replica stays where it is', () => {
    const others = Array.from({ length: 4 }, (_, i) => service(`other-${i}`, 2));
    const otherPlacements = others.map((w, i) => placed(w.name, [a(['rt-b', 'rt-c', 'rt-d', 'rt-e'][i % 4], w.name, 0), a(['rt-c', 'rt-d', 'rt-e', 'rt-b'][i % 4], w.name, 1)]));
    const decisions = decide({ lost: 'rt-a', runtimes: fleet, placements: [webPlacement, ...otherPlacements], workloads: [web, ...others] });
    expect(decisions.map((d) => d.workload)).toEqual(['web']);
    // the plan built on the decided target stops and starts only the lost replica
    const plan = buildPlan({ workload: web, replicas: 2, runtimes: fleet, placements: [webPlacement, ...otherPlacements], nowMs: NOW, decided: { assignments: decisions[0].target!, onFence: 5 } });
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(plan.moves).toEqual([{ from: a('rt-a', 'web', 0), to: decisions[0].target![0] }]);
  });

  it('skips runtimes without a free slot, outside the selector, cordoned or with a lapsed lease', () => {
    const runtimes = [
      lostRuntime('rt-a'), runtime('rt-b'),
      runtime('rt-full', { zone: 'a' }, { slots: 1 }),
      runtime('rt-other', { zone: 'b' }),
      runtime('rt-cordoned', { zone: 'a' }, { status: 'CORDONED' }),
      runtime('rt-lapsed', { zone: 'a' }, { leaseExpiresAt: new Date(NOW - 1).toISOString() }),
      runtime('rt-ok', { zone: 'a' }),
    ];
    const holder = service('holder', 1);
    const zoned = service('web', 2, { selector: { zone: 'a' } });
    const [decision] = decide({ lost: 'rt-a', runtimes, placements: [webPlacement, placed('holder', [a('rt-full', 'holder', 0)])], workloads: [zoned, holder] });
    expect(decision.decisions[0].to?.runtimeId).toBe('rt-ok');
  });

  it('records the replica unplaced (placement-unavailable) when no runtime is eligible', () => {
    const solo = service('solo', 1, { selector: { node: 'solo' } });
    const [decision] = decide({
      lost: 'rt-a', runtimes: [lostRuntime('rt-a', { node: 'solo' }), runtime('rt-b')], placements: [placed('solo', [a('rt-a', 'solo', 0)])], workloads: [solo],
    });
    expect(decision.decisions[0]).toMatchObject({ action: 'unplaced', to: null });
    expect(decision.decisions[0].reason).toMatch(/placement-unavailable/);
    expect(decision.target).toEqual([]);
    expect(decision.unplaced).toEqual({ workload: 'solo', reason: 'placement-unavailable', missing: 1 });
    expect(decision.converge).toEqual([]);
  });

  it('drops the lost replica of an `all` workload: one per eligible runtime, and the lost one is not eligible', () => {
    const everywhere = service('everywhere', 'all');
    const [decision] = decide({
      lost: 'rt-a', runtimes: fleet, placements: [placed('everywhere', fleet.map((r, i) => a(r.id, 'everywhere', i)))], workloads: [everywhere],
    });
    expect(decision.decisions[0].action).toBe('dropped');
    expect(decision.target!.map((t) => t.runtimeId)).toEqual(['rt-b', 'rt-c', 'rt-d', 'rt-e']);
    expect(decision.unplaced).toBeNull();
  });

  it('warns when the contract leaves recovery unknown or the state was local', () => {
    const [decision] = decide({
      lost: 'rt-a', runtimes: fleet, placements: [webPlacement],
      workloads: [service('web', 2, { contract: { ...SERVICE_CONTRACT, state: 'local', recovery: 'unknown' } })],
    });
    expect(decision.decisions[0].action).toBe('replaced');
    expect(decision.warnings.join(' ')).toMatch(/recovery is unknown.*never scales/);
    expect(decision.warnings.join(' ')).toMatch(/state is local/);
  });
});

describe('recovering a consumer', () => {
  const orders = consumer('orders', 2);
  const ordersPlacement = placed('orders', [a('rt-a', 'orders', 0, [0, 2, 4, 6]), a('rt-b', 'orders', 1, [1, 3, 5, 7])]);

  it('moves the lost replica to an eligible runtime that does not host the workload, with its partitions, from the committed offsets', () => {
    const [decision] = decide({ lost: 'rt-a', runtimes: [lostRuntime('rt-a'), runtime('rt-b'), runtime('rt-c')], placements: [ordersPlacement], workloads: [orders], storedOwners: { orders: [0, 4] } });
    expect(decision.decisions[0]).toMatchObject({ action: 'moved', to: { runtimeId: 'rt-c', taskId: 'orders-0-g1-r6' }, partitions: [0, 2, 4, 6] });
    expect(decision.decisions[0].reason).toMatch(/committed offsets under placement fence 6.*late commit by the lost owner is refused/);
    expect(decision.decisions[0].reason).toMatch(/still names the lost task owner of \[0,4\]/);
    expect(decision.target).toEqual([{ runtimeId: 'rt-c', index: 0, taskId: 'orders-0-g1-r6', partitions: [0, 2, 4, 6] }, a('rt-b', 'orders', 1, [1, 3, 5, 7])]);
    expect(decision.storedOwner.ownedPartitions).toEqual([0, 4]);
  });

  it('hands the partitions to the surviving replicas when no runtime is free, evenly, and records the missing replica unplaced', () => {
    const three = consumer('events', 3);
    const placement = placed('events', [a('rt-a', 'events', 0, [0, 3, 6]), a('rt-b', 'events', 1, [1, 4, 7]), a('rt-c', 'events', 2, [2, 5])]);
    const [decision] = decide({ lost: 'rt-a', runtimes: [lostRuntime('rt-a'), runtime('rt-b'), runtime('rt-c')], placements: [placement], workloads: [three] });
    expect(decision.decisions[0]).toMatchObject({
      action: 'handed-over', to: null, partitions: [0, 3, 6],
      handedTo: [{ taskId: 'events-1-g1', runtimeId: 'rt-b', partitions: [3] }, { taskId: 'events-2-g1', runtimeId: 'rt-c', partitions: [0, 6] }],
    });
    // survivors keep their task ids (no restart) and own every partition between them, each once
    expect(decision.target!.map((t) => [t.taskId, t.partitions])).toEqual([['events-1-g1', [1, 3, 4, 7]], ['events-2-g1', [0, 2, 5, 6]]]);
    expect(decision.target!.flatMap((t) => t.partitions!).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(decision.converge).toEqual([{ runtimeId: 'rt-b', taskId: 'events-1-g1' }, { runtimeId: 'rt-c', taskId: 'events-2-g1' }]);
    expect(decision.unplaced).toEqual({ workload: 'events', reason: 'placement-unavailable', missing: 1 });
  });

  it('hands nothing to a survivor whose own runtime is not live, and leaves the partitions unowned when none is', () => {
    const placement = placed('orders', [a('rt-a', 'orders', 0, [0, 2, 4, 6]), a('rt-b', 'orders', 1, [1, 3, 5, 7])]);
    const lapsed = runtime('rt-b', { zone: 'a' }, { leaseExpiresAt: new Date(NOW - 1).toISOString() });
    const [decision] = decide({ lost: 'rt-a', runtimes: [lostRuntime('rt-a'), lapsed], placements: [placement], workloads: [orders] });
    expect(decision.decisions[0].action).toBe('unplaced');
    expect(decision.decisions[0].reason).toMatch(/no surviving replica/);
    expect(decision.target).toEqual([a('rt-b', 'orders', 1, [1, 3, 5, 7])]); // the lapsed runtime's replica is not moved: that is its own recovery
  });
});

describe('what recovery leaves alone', () => {
  it('leaves a stream job to the stop-the-world replan and writes no placement for it', () => {
    const stream = {
      name: 'clicks', kind: 'stream', replicas: 1, selector: {}, contract: CONSUMER_CONTRACT, revision: 1, retired: false,
      spec: { source: 's', sink: 'k', partitions: 2, checkpointIntervalMs: 1000, maxParallelism: 128, operators: [{ id: 'src', kind: 'source', parallelism: 1 }] },
    } as Workload;
    const [decision] = decide({ lost: 'rt-a', runtimes: [lostRuntime('rt-a'), runtime('rt-b')], placements: [placed('clicks', [a('rt-a', 'clicks', 0)])], workloads: [stream] });
    expect(decision.target).toBeNull();
    expect(decision.decisions[0].action).toBe('replanned');
    expect(decision.summary).toMatch(/replanned from its last completed checkpoint \(replan:clicks\)/);
  });

  it('decides nothing for a runtime that held nothing', () => {
    expect(decide({ lost: 'rt-z', runtimes: [lostRuntime('rt-z'), runtime('rt-b')], placements: [placed('web', [a('rt-b', 'web', 0)])], workloads: [service('web', 1)] })).toEqual([]);
  });
});

describe('an unplaced shortfall after a recovery', () => {
  it('is placed by the reconcile loop once a matching runtime joins, starting only what is missing', () => {
    const events = consumer('events', 3);
    const before = placed('events', [a('rt-a', 'events', 0, [0, 3, 6]), a('rt-b', 'events', 1, [1, 4, 7]), a('rt-c', 'events', 2, [2, 5])]);
    const [decision] = decide({ lost: 'rt-a', runtimes: [lostRuntime('rt-a'), runtime('rt-b'), runtime('rt-c')], placements: [before], workloads: [events] });
    const after = placed('events', decision.target!, 6);
    const joined = [lostRuntime('rt-a'), runtime('rt-b'), runtime('rt-c'), runtime('rt-new')];
    const reconcile = decideForWorkload({ workload: events, placement: after, unplaced: true, runtimes: joined, placements: [after], workloads: [events], nowMs: NOW });
    expect(reconcile.action).toBe('plan');
    const plan = reconcile.action === 'plan' ? reconcile.plan : null;
    expect(plan!.starts.map((s) => [s.runtimeId, s.index])).toEqual([['rt-new', 0]]);
    expect(plan!.stops).toEqual([]);
    expect(plan!.moves).toEqual([]);
    expect(plan!.unplaced).toBeNull();
    // while nothing matches, the retry changes nothing
    const still = decideForWorkload({ workload: events, placement: after, unplaced: true, runtimes: joined.slice(0, 3), placements: [after], workloads: [events], nowMs: NOW });
    expect(still).toEqual({ workload: 'events', action: 'skip', reason: 'nothing-to-change' });
  });

  it('is never retried by moving a task off a runtime whose lease merely ran out (that is a recovery\'s decision)', () => {
    const web = service('web', 3);
    const placement = placed('web', [a('rt-b', 'web', 0), a('rt-c', 'web', 1)]);
    const lapsed = [runtime('rt-b'), runtime('rt-c', { zone: 'a' }, { leaseExpiresAt: new Date(NOW - 1).toISOString() }), runtime('rt-d'), runtime('rt-e')];
    expect(decideForWorkload({ workload: web, placement, unplaced: true, runtimes: lapsed, placements: [placement], workloads: [web], nowMs: NOW }))
      .toEqual({ workload: 'web', action: 'skip', reason: 'shortfall-only-adds' });
  });
});

describe('the cost of a recovery', () => {
  // 30 runtimes over three zones; services of replicas 2 on one zone or on all.
  const fleet = Array.from({ length: 30 }, (_, i) => runtime(`rt-${String(i).padStart(2, '0')}`, { zone: 'abc'[i % 3] }, { slots: 64 }));
  const services = (count: number) => Array.from({ length: count }, (_, i) => service(`web-${String(i).padStart(3, '0')}`, 2, { selector: i % 4 ? { zone: 'abc'[i % 3] } : {} }));
  const snapshotOf = (workloads: Workload[], keys?: RendezvousKeyCache) => {
    const placements = placeAll(fleet, workloads, { keys }).results.map((r, i) => placed(workloads[i].name, r.assignments));
    return { runtimes: fleet.map((r) => (r.id === 'rt-07' ? lostRuntime('rt-07', r.labels) : r)), placements, workloads };
  };

  it('hashes only for the workloads the lost runtime held, however many others there are', () => {
    for (const count of [60, 240]) {
      const snapshot = snapshotOf(services(count));
      const pass = beginPlacementPass(snapshot.runtimes, NOW);
      const decisions = decideRecovery({ runtimeId: 'rt-07', ...snapshot, nowMs: NOW, pass });
      const held = snapshot.placements.filter((p) => p.assignments.some((x) => x.runtimeId === 'rt-07')).map((p) => p.workload);
      expect(decisions.map((d) => d.workload)).toEqual(held);
      const survivorsEligible = (w: Workload) => snapshot.runtimes.filter((r) => r.id !== 'rt-07' && matchesSelector(r.labels, w.selector)).length;
      expect(pass.digestsComputed).toBe(snapshot.workloads.filter((w) => held.includes(w.name)).reduce((sum, w) => sum + survivorsEligible(w), 0));
    }
  });

  it('decides and plans as decideRecovery and buildPlan do, and hashes nothing with the keys of the placement pass before it', () => {
    const keys = new RendezvousKeyCache();
    const snapshot = snapshotOf(services(120), keys);
    const decisions = decideRecovery({ runtimeId: 'rt-07', ...snapshot, nowMs: NOW });
    const plans = decisions.map((d) => {
      const workload = snapshot.workloads.find((w) => w.name === d.workload)!;
      const plan = buildPlan({ workload, replicas: 2, ...snapshot, nowMs: NOW, decided: { assignments: d.target!, onFence: d.onFence, warnings: d.warnings } });
      return { ...plan, unplaced: d.unplaced };
    });
    const pass = beginPlacementPass(snapshot.runtimes, NOW, { keys });
    expect(planRecovery({ runtimeId: 'rt-07', ...snapshot, nowMs: NOW, pass })).toEqual({ decisions, plans });
    expect(pass.digestsComputed).toBe(0);
  });
});
