// The reconcile pass's decisions (domain/reconcile.ts), pure: which workloads it plans and why it
// leaves the others alone — sticky after apply, `all` only grows, nothing to change, retired.
import { buildPlan } from '../../domain/plan';
import { decideForWorkload, decideReconcile, type ReconcileDecision } from '../../domain/reconcile';
import { UNKNOWN_CONTRACT, type Placement, type Runtime, type Workload } from '../../protocol';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');

const runtime = (id: string, overrides: Partial<Runtime> = {}): Runtime => ({
  id, endpoint: `http://127.0.0.1:7400/${id}`, labels: { zone: 'a' }, slots: 4, status: 'READY',
  leaseExpiresAt: new Date(NOW + 30_000).toISOString(), fence: 1, ...overrides,
});

const service = (name: string, replicas: number | 'all', overrides: Partial<Workload> = {}): Workload => ({
  name, kind: 'service', replicas, selector: {}, contract: UNKNOWN_CONTRACT, revision: 1, retired: false,
  spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 },
  ...overrides,
} as Workload);

/** The placement a first apply of the workload on this fleet would have written. */
function applied(workload: Workload, runtimes: Runtime[]): Placement {
  const plan = buildPlan({ workload, replicas: workload.replicas, runtimes, placements: [], nowMs: NOW });
  return { workload: workload.name, fence: 1, generation: plan.generation, assignments: plan.target };
}

function decide(workload: Workload, runtimes: Runtime[], placement: Placement | undefined, unplaced = false): ReconcileDecision {
  return decideForWorkload({ workload, placement, unplaced, runtimes, placements: placement ? [placement] : [], workloads: [workload], nowMs: NOW });
}

const skipped = (decision: ReconcileDecision) => (decision.action === 'skip' ? decision.reason : null);
const planned = (decision: ReconcileDecision) => {
  if (decision.action !== 'plan') throw new Error(`expected a plan, got skip: ${decision.reason}`);
  return decision.plan;
};

const three = [runtime('rt-a'), runtime('rt-b'), runtime('rt-c')];

describe('reconcile decisions', () => {
  it('places a pending workload (no placement record yet)', () => {
    const plan = planned(decide(service('web', 2), three, undefined));
    expect(plan.starts).toHaveLength(2);
    expect(plan.stops).toEqual([]);
    expect(plan.basis).toEqual({ registryRevision: 1, placementFence: 0 });
  });

  it('never places a Kubernetes workload on agents: the cluster places its pods', () => {
    const kube = service('shop-web', 2, { runtime: { kubernetes: { cluster: 'prod', namespace: 'shop', kind: 'Deployment', name: 'web' } }, spec: { env: {}, graceMs: 5000 } } as Partial<Workload>);
    expect(skipped(decide(kube, three, undefined))).toBe('kubernetes');
  });

  it('leaves a placed workload where it is, even when a new runtime would now win (sticky after apply)', () => {
    const web = service('web', 1);
    const placement = applied(web, [runtime('rt-a')]);
    const grown = [...three, ...Array.from({ length: 20 }, (_, i) => runtime(`rt-new-${i}`))];
    expect(skipped(decide(web, grown, placement))).toBe('sticky');
  });

  it('chaos seed 3: places a workload retired and defined again (its emptied placement is pending, not placed)', () => {
    const web = service('web', 2);
    const emptied: Placement = { ...applied(web, three), fence: 4, assignments: [] };
    const plan = planned(decide({ ...web, revision: 5 }, three, emptied));
    expect(plan.starts).toHaveLength(2);
    expect(plan.stops).toEqual([]);
    // A placed workload short of its size (a PUT raised it) stays as placed: it grows through /scale's gates.
    expect(skipped(decide(service('web', 2), three, applied(service('web', 1), three)))).toBe('sticky');
  });

  it('retries a placed workload with an unplaced shortfall once capacity is there', () => {
    const web = service('web', 3);
    const placement = applied(web, [runtime('rt-a')]); // one of three placed
    expect(placement.assignments).toHaveLength(1);
    const plan = planned(decide(web, three, placement, true));
    expect(plan.starts).toHaveLength(2);
    expect(plan.unplaced).toBeNull();
  });

  it('an unplaced shortfall that still cannot be placed changes nothing', () => {
    const web = service('web', 3);
    const placement = applied(web, [runtime('rt-a')]);
    expect(skipped(decide(web, [runtime('rt-a')], placement, true))).toBe('nothing-to-change');
  });

  it('grows an `all` workload onto a new matching runtime, starting only there', () => {
    const agents = service('agents', 'all', { selector: { zone: 'a' } });
    const placement = applied(agents, three);
    const plan = planned(decide(agents, [...three, runtime('rt-d'), runtime('rt-e', { labels: { zone: 'b' } })], placement));
    expect(plan.starts.map((a) => a.runtimeId)).toEqual(['rt-d']);
    expect(plan.stops).toEqual([]);
    expect(plan.moves).toEqual([]);
  });

  it('never shrinks an `all` workload when a runtime is lost: that is recovery\'s decision', () => {
    const agents = service('agents', 'all');
    const placement = applied(agents, three);
    const lost = [runtime('rt-a'), runtime('rt-b', { status: 'LOST' }), runtime('rt-c')];
    expect(skipped(decide(agents, lost, placement))).toBe('all-only-grows');
    const expired = [runtime('rt-a'), runtime('rt-b'), runtime('rt-c', { leaseExpiresAt: new Date(NOW - 1).toISOString() })];
    expect(skipped(decide(agents, expired, placement))).toBe('all-only-grows');
  });

  it('an `all` workload on an unchanged fleet has nothing to change', () => {
    const agents = service('agents', 'all');
    expect(skipped(decide(agents, three, applied(agents, three)))).toBe('nothing-to-change');
  });

  it('skips a retired workload, placed or not', () => {
    expect(skipped(decide(service('old', 2, { retired: true }), three, undefined))).toBe('retired');
  });
});

describe('a whole pass', () => {
  it('decides every workload in the snapshot\'s order; only the pending and the growing get plans', () => {
    const placedWeb = service('a-web', 2);
    const pending = service('b-pending', 1);
    const growing = service('c-all', 'all');
    const retired = service('d-retired', 1, { retired: true });
    const placements = [applied(placedWeb, three), applied(growing, three.slice(0, 2))];
    const decisions = decideReconcile({
      runtimes: three, placements, workloads: [placedWeb, pending, growing, retired], unplaced: [], nowMs: NOW,
    });
    expect(decisions.map((d) => [d.workload, d.action === 'plan' ? 'plan' : d.reason])).toEqual([
      ['a-web', 'sticky'], ['b-pending', 'plan'], ['c-all', 'plan'], ['d-retired', 'retired'],
    ]);
    const grow = decisions[2];
    expect(grow.action === 'plan' && grow.plan.starts.map((a) => a.runtimeId)).toEqual(['rt-c']);
  });

  it('counts slots other workloads hold when it places the pending one', () => {
    const small = [runtime('rt-a', { slots: 1 }), runtime('rt-b', { slots: 1 })];
    const holder = service('a-holder', 1);
    const placements = [applied(holder, [small[0]])];
    const decisions = decideReconcile({ runtimes: small, placements, workloads: [holder, service('b-new', 1)], unplaced: [], nowMs: NOW });
    const plan = decisions[1].action === 'plan' ? decisions[1].plan : null;
    expect(plan?.target.map((a) => a.runtimeId)).toEqual(['rt-b']);
  });
});
