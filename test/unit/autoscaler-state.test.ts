// The autoscaler's state and decisions (domain/autoscaler-state.ts, domain/autoscaler-decisions.ts),
// driven directly: what the workflow shell would do on each observation, policy, child end and tick.
// Pure: no Temporal, no clock but the numbers given.
import {
  beginRound, decide, operationEnded, started, waitFor, type StartPlan, type Verdict, type WorkloadSize,
} from '../../domain/autoscaler-decisions';
import {
  AutoscalerState, OBSERVATION_WINDOW, observationProblem, policyProblem, type AutoscalerCarried, type AutoscalerRun,
} from '../../domain/autoscaler-state';
import { TierPolicySchema, type TierPolicyInput } from '../../protocol/tiers';

const T0 = Date.UTC(2024, 0, 3, 8, 0); // a Wednesday
const SECOND = 1000;
const MINUTE = 60 * SECOND;

const tierPolicy = (patch: Partial<TierPolicyInput> = {}) => TierPolicySchema.parse({
  workloads: ['web'], minReplicas: 1, maxReplicas: 8, targets: { qpsPerInstance: 100 }, tolerance: 0.1,
  scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, soakMs: 100, drainTimeoutMs: 5000, ...patch,
});
const autoscaler = (patch: Partial<TierPolicyInput> = {}, run: Partial<AutoscalerRun> = {}) =>
  new AutoscalerState({ tier: 'shop', policy: tierPolicy(patch), revision: 1, maxHistoryEvents: 1000, decisionsPerRun: 100, ...run });
const service = (replicas: number, workload = 'web'): WorkloadSize => ({ workload, active: true, replicas });
const stream = (replicas: number, bound: number): WorkloadSize =>
  ({ workload: 'web', active: true, replicas, stream: { operator: 'agg', bound, boundBy: `its ${bound} source partitions` } });

/** One workload's decision on the newest observation, at `now`. */
function decideAt(state: AutoscalerState, size: WorkloadSize, now: number, intervals = []) {
  return decide(state, size, beginRound(state, state.latest()!, now, intervals));
}
const isPlan = (step: Verdict | StartPlan): step is StartPlan => !('code' in step);
function planOf(step: Verdict | StartPlan): StartPlan {
  if (!isPlan(step)) throw new Error(`expected a change, got ${step.code}: ${step.decision.reason}`);
  return step;
}
function verdictOf(step: Verdict | StartPlan): Verdict {
  if (isPlan(step)) throw new Error(`expected no change, got ${step.key}`);
  return step;
}

describe('the observation window', () => {
  it('numbers observations, keeps the newest 50 by their time, caps a future `at` at arrival + 60 s', () => {
    const state = autoscaler();
    expect(state.dirty).toBe(false);
    for (let i = 0; i < OBSERVATION_WINDOW + 2; i++) state.observe({ qps: i }, T0 + i * SECOND);
    expect(state.dirty).toBe(true);
    expect(state.carried.observations).toHaveLength(50);
    expect(state.carried.observations[0]).toEqual({ seq: 3, atMs: T0 + 2 * SECOND, receivedAtMs: T0 + 2 * SECOND, qps: 2 });
    // sent from the future: counts as arrival + 60 s, and so sorts last
    expect(state.observe({ qps: 999, at: new Date(T0 + 3_600_000).toISOString() }, T0 + 100 * SECOND)).toEqual({ seq: 53, window: 50 });
    // sent with an old `at`: sorts by it (after seq 11 of the same time), the oldest leaves the window
    state.observe({ qps: 7, at: new Date(T0 + 10 * SECOND).toISOString() }, T0 + 101 * SECOND);
    expect(state.latest()).toEqual({ seq: 53, atMs: T0 + 160 * SECOND, receivedAtMs: T0 + 100 * SECOND, qps: 999 });
    expect(state.carried.observations.map((o) => o.seq).slice(0, 9)).toEqual([5, 6, 7, 8, 9, 10, 11, 54, 12]);
  });

  it('counts an invalid signal as rejected and keeps nothing of it; an Update is refused with the first problem', () => {
    const state = autoscaler();
    expect(state.signal({ qps: -1 }, T0)).toEqual({ problem: 'qps must be ≥ 0' });
    expect(state.signal({ qps: 5 }, T0)).toBeNull();
    expect(state.carried).toMatchObject({ seq: 1, rejectedSignals: 1 });
    expect(observationProblem({ qps: -1 })).toBe('invalid observation: qps: qps must be ≥ 0');
    expect(observationProblem({})).toBe('invalid observation: (body): a signal carries at least one of qps, activeUsers, cpuUtilization, queueDepth');
    expect(observationProblem({ qps: 1 })).toBeNull();
  });
});

describe('policy revisions', () => {
  it('applies a newer revision only, forgets what the old one held, and refuses an invalid one', () => {
    const state = autoscaler({ workloads: ['web', 'api'] });
    state.workload('web').backoff = { key: 'scale-out 2 → 4', untilMs: T0, attempts: 1 };
    state.workload('api');
    state.carried.windowCache = { revision: 1, fromMs: 0, toMs: 1, intervals: [] };
    expect(state.applyPolicy({ policy: tierPolicy(), revision: 1 })).toBe(false);
    expect(state.applyPolicy({ policy: { nope: true }, revision: 5 })).toBeNull();
    expect(state.carried.rejectedSignals).toBe(1);
    expect(state.dirty).toBe(false);
    expect(state.applyPolicy({ policy: tierPolicy({ maxReplicas: 5 }), revision: 2 })).toBe(true);
    expect(state).toMatchObject({ revision: 2, dirty: true, policy: { maxReplicas: 5 } });
    expect(Object.keys(state.carried.workloads)).toEqual(['web']);
    expect(state.carried.workloads.web.backoff).toBeNull();
    expect(state.carried).toMatchObject({ windowCache: null, pull: null });
  });

  it('refuses an Update with a bad policy or revision, naming the problem', () => {
    expect(policyProblem({ policy: tierPolicy(), revision: 0 })).toBe('invalid policy: revision must be a positive integer');
    expect(policyProblem({ policy: { ...tierPolicy(), maxReplicas: 0 }, revision: 2 })).toMatch(/^invalid policy: maxReplicas: /);
    expect(policyProblem({ policy: tierPolicy(), revision: 2 })).toBeNull();
  });
});

describe('a workload decision', () => {
  it('starts a scaleOut child under scale:<workload> for 400 qps at 2 replicas', () => {
    const state = autoscaler({ steps: [3, 4] } as Partial<TierPolicyInput>);
    state.observe({ qps: 400 }, T0);
    const plan = planOf(decideAt(state, service(2), T0));
    expect(plan).toMatchObject({
      action: 'scale-out', key: 'scale-out 2 → 4', workflowId: 'scale:web', workflow: 'scaleOut', to: 4,
      summary: 'autoscale shop: scale web 2 → 4', reason: 'scale-out 2 → 4: qps asks for 4, stabilized 4',
      args: { workload: 'web', replicas: 4, reason: 'autoscale shop: scale-out 2 → 4: qps asks for 4, stabilized 4', soakMs: 100, steps: [3, 4] },
      extra: { recommended: 4, stabilized: 4 },
    });
    // the cooldown is not started by the decision, only by a completed change
    expect(state.carried.workloads.web.autoscale.lastChangeAtMs).toBeUndefined();
  });

  it('starts a scaleIn child with the policy drain timeout and floor', () => {
    const state = autoscaler();
    state.observe({ qps: 100 }, T0);
    expect(planOf(decideAt(state, service(3), T0))).toMatchObject({
      action: 'scale-in', workflow: 'scaleIn', to: 1,
      args: { workload: 'web', replicas: 1, drainTimeoutMs: 5000, minReplicas: 1 },
    });
  });

  it('rescales a stream job\'s keyed aggregate, bounded by its partitions, and says so when the bound is reached', () => {
    const state = autoscaler();
    state.observe({ qps: 800 }, T0);
    expect(planOf(decideAt(state, stream(2, 4), T0))).toMatchObject({
      workflowId: 'rescale:web', workflow: 'rescaleOperator', to: 4, summary: 'autoscale shop: rescale web/agg 2 → 4',
      args: { job: 'web', operator: 'agg', parallelism: 4 },
    });
    const bounded = verdictOf(decideAt(state, stream(4, 4), T0));
    expect(bounded.code).toBe('bounded');
    expect(bounded.decision).toMatchObject({ from: 4, to: 4, outcome: 'no-change', reason: 'scale-out 4 → 8: qps asks for 8, stabilized 8; web runs at most 4 agg subtasks (its 4 source partitions)' });
  });

  it('leaves an inactive workload alone, and answers the policy maths\' code for no change', () => {
    const state = autoscaler();
    state.observe({ qps: 200 }, T0);
    const gone = verdictOf(decideAt(state, { workload: 'web', active: false, replicas: 0 }, T0));
    expect(gone).toMatchObject({ code: 'not-active', decision: { from: 0, to: 0, reason: 'web is not defined or retired', outcome: 'no-change' }, extra: { recommended: null, stabilized: null } });
    const tolerated = verdictOf(decideAt(state, service(2), T0));
    expect(tolerated).toMatchObject({ code: 'within-tolerance', decision: { from: 2, to: 2, observationSeq: 1, operation: null, label: '' } });
  });

  it('refuses a scale-in while a change window interval is open', () => {
    const state = autoscaler();
    state.observe({ qps: 100 }, T0);
    const inWindow = verdictOf(decideAt(state, service(3), T0, [{ startMs: T0 - MINUTE, endMs: T0 + MINUTE, label: '"0 8 * * *"' }] as never));
    expect(inWindow.code).toBe('change-window');
  });

  it('counts the observations that came in between for stabilization, deciding on the newest', () => {
    const state = autoscaler({ scaleDownStabilizationMs: 5 * MINUTE });
    state.observe({ qps: 800 }, T0);
    state.observe({ qps: 100 }, T0 + MINUTE);
    const held = verdictOf(decideAt(state, service(8), T0 + MINUTE));
    expect(held).toMatchObject({ code: 'stabilizing', decision: { to: 8 }, extra: { recommended: 1, stabilized: 8 } });
    expect(state.carried.workloads.web.notedSeq).toBe(2);
    expect(state.carried.workloads.web.autoscale.recommendations).toEqual([{ atMs: T0, desired: 8 }, { atMs: T0 + MINUTE, desired: 1 }]);
  });
});

describe('a child\'s life', () => {
  it('waits for someone else\'s operation with a doubling retry capped at 15 s', () => {
    const state = autoscaler();
    state.observe({ qps: 400 }, T0);
    const waits = [1, 2, 4, 8, 15, 15].map((seconds, i) => {
      const verdict = waitFor(planOf(decideAt(state, service(2), T0 + i)), T0 + i);
      expect(state.carried.workloads.web.waiting).toEqual({ attempts: i + 1, untilMs: T0 + i + seconds * SECOND, workflowId: 'scale:web' });
      return verdict;
    });
    expect(waits[0]).toMatchObject({
      code: 'operation-running',
      decision: { from: 2, to: 2, outcome: 'waiting', reason: 'scale:web is running; scale-out 2 → 4 waits for it (scale-out 2 → 4: qps asks for 4, stabilized 4)' },
    });
    expect(state.restingPhase()).toBe('waiting: scale:web is running');
    // a decision of no change ends the wait
    state.observe({ qps: 200 }, T0 + MINUTE);
    expect(verdictOf(decideAt(state, service(2), T0 + MINUTE)).code).toBe('within-tolerance');
    expect(state.carried.workloads.web.waiting).toBeNull();
    expect(state.restingPhase()).toBe('idle');
  });

  it('runs the cooldown from the end of a completed change', () => {
    const state = autoscaler({ cooldownMs: MINUTE });
    state.observe({ qps: 400 }, T0);
    const plan = planOf(decideAt(state, service(2), T0));
    expect(started(state, plan, T0)).toMatchObject({ code: 'scale-out', decision: { from: 2, to: 4, operation: 'scale:web', outcome: 'started' } });
    expect(state.runningPhase()).toBe('operation running: scale:web 2 → 4');
    expect(operationEnded(state, plan, { status: { outcome: 'completed', error: null }, failure: null }, T0 + 30 * SECOND)).toBeNull();
    expect(state.running).toEqual([]);
    state.observe({ qps: 800 }, T0 + 40 * SECOND);
    const cooling = verdictOf(decideAt(state, service(4), T0 + 40 * SECOND));
    expect(cooling).toMatchObject({ code: 'cooldown', decision: { reason: 'cooldown: 50000 ms left after the last change (qps asks for 8, stabilized 8)' } });
    expect(state.nextDecisionAt(T0 + 40 * SECOND)).toBe(T0 + 90 * SECOND);
  });

  it('backs a refused change off (5 s, then 10 s) unless the inputs change', () => {
    const state = autoscaler();
    state.observe({ qps: 400 }, T0);
    const first = planOf(decideAt(state, service(2), T0));
    started(state, first, T0);
    const refusal = operationEnded(state, first, { status: { outcome: 'refused', error: 'gates failed', evidenceGap: null }, failure: null }, T0 + SECOND);
    expect(refusal).toMatchObject({
      code: 'refused', detail: 'gates failed',
      decision: { atMs: T0 + SECOND, from: 2, to: 2, outcome: 'refused', operation: 'scale:web', reason: 'scale-out 2 → 4 ended refused: gates failed; retried after 2024-01-03T08:00:06.000Z or when the inputs change' },
    });
    const held = verdictOf(decideAt(state, service(2), T0 + 2 * SECOND));
    expect(held).toMatchObject({ code: 'backing-off', decision: { to: 2, reason: 'scale-out 2 → 4 was refused; not retried before 2024-01-03T08:00:06.000Z unless the inputs change (scale-out 2 → 4: qps asks for 4, stabilized 4)' } });
    expect(state.wake(T0 + 2 * SECOND)).toEqual({ wakeAt: T0 + 6 * SECOND, pullAt: null });
    const again = planOf(decideAt(state, service(2), T0 + 6 * SECOND));
    started(state, again, T0 + 6 * SECOND);
    const second = operationEnded(state, again, { status: null, failure: 'child crashed' }, T0 + 7 * SECOND)!;
    expect(second).toMatchObject({ detail: 'child crashed', decision: { outcome: 'failed' } });
    expect(state.carried.workloads.web.backoff).toEqual({ key: 'scale-out 2 → 4', attempts: 2, untilMs: T0 + 17 * SECOND });
    // other inputs: another change is not held back
    state.observe({ qps: 800 }, T0 + 8 * SECOND);
    expect(planOf(decideAt(state, service(2), T0 + 8 * SECOND)).key).toBe('scale-out 2 → 6');
  });
});

describe('ledger rows', () => {
  const row = (state: AutoscalerState, atMs: number, label = 'no-change: within tolerance') => {
    const verdict = verdictOf(decideAt(state, service(2), atMs));
    return state.keepRow(verdict.ws, { ...verdict.decision, atMs, label }, verdict.extra);
  };

  it('writes an identical "no change" once per max(cooldown, 60 s), a change every time', () => {
    const state = autoscaler();
    state.observe({ qps: 200 }, T0);
    expect([row(state, T0), row(state, T0 + 59 * SECOND), row(state, T0 + 60 * SECOND)]).toEqual([true, false, true]);
    expect(state.carried.suppressedRows).toBe(1);
    expect([row(state, T0 + 61 * SECOND, 'scale-out'), row(state, T0 + 62 * SECOND, 'scale-out')]).toEqual([true, true]);
    expect(row(state, T0 + 63 * SECOND)).toBe(true);
    // a new revision writes the same decision again; its cooldown of 2 min is the repeat interval then
    state.applyPolicy({ policy: tierPolicy({ cooldownMs: 2 * MINUTE }), revision: 2 });
    expect([row(state, T0 + 64 * SECOND), row(state, T0 + 3 * MINUTE), row(state, T0 + 4 * MINUTE + 4 * SECOND)]).toEqual([true, false, true]);
    expect(state.carried.workloads.web.lastDecision).toMatchObject({ atMs: T0 + 4 * MINUTE + 4 * SECOND, label: 'no-change: within tolerance' });
  });

  it('carries the decision, its figures and the recent window', () => {
    const state = autoscaler();
    state.observe({ qps: 200 }, T0);
    const verdict = verdictOf(decideAt(state, service(2), T0));
    const decision = { ...verdict.decision, label: 'no-change: within tolerance' };
    expect(state.ledgerRow(decision, verdict.extra, 'autoscale:shop', 'run-1')).toEqual({
      kind: 'autoscale', tier: 'shop', workload: 'web', fromReplicas: 2, toReplicas: 2, outcome: 'no-change', workflowId: 'autoscale:shop', runId: 'run-1',
      reason: 'no-change: within tolerance — within tolerance 0.1: qps asks for 2, stabilized 2, running 2',
      inputs: {
        tier: 'shop', policyRevision: 1, decision: 'no-change: within tolerance', observation: state.latest(), observations: [state.latest()],
        targets: { qpsPerInstance: 100 }, desiredPerSignal: [{ signal: 'qps', observed: 200, desired: 2, withinTolerance: true }],
        recommended: 2, stabilized: 2, operation: null, suppressedSinceLastRow: 0,
      },
    });
  });
});

describe('timers, pulls and runs', () => {
  it('asks for the change windows once per hour and revision', () => {
    const state = autoscaler({ changeWindows: [{ cron: '0 9 * * 1-5', durationMs: 3_600_000, forbid: 'scale-in' }] } as Partial<TierPolicyInput>);
    const asked = state.changeIntervals(T0);
    expect(asked).toEqual({ windows: state.policy.changeWindows, fromMs: T0, toMs: T0 + 3_600_000 });
    const intervals = [{ startMs: T0 + 3_600_000, endMs: T0 + 7_200_000, label: '0 9 * * 1-5' }];
    state.keepIntervals(asked as { fromMs: number; toMs: number }, intervals);
    expect(state.changeIntervals(T0 + 3_599_999)).toBe(intervals);
    expect(Array.isArray(state.changeIntervals(T0 + 3_600_000))).toBe(false);
    expect(autoscaler().changeIntervals(T0)).toEqual([]);
    state.observe({ qps: 200 }, T0);
    state.workload('web');
    expect(state.nextDecisionAt(T0)).toBe(T0 + 3_600_000); // the window opening
  });

  it('pulls the Kafka lag every interval, as a queueDepth observation', () => {
    const state = autoscaler({ targets: { queueDepthPerInstance: 100 }, observe: { kafkaLag: { workload: 'web', intervalMs: 10 * SECOND } } });
    const due = state.pullDue(T0)!;
    expect(due.workload).toBe('web');
    expect(state.pullDue(T0 + 9 * SECOND)).toBeNull();
    state.pulled(due.state, { workload: 'web', topic: 'orders', lag: 400, against: 'committed offsets' }, T0 + SECOND);
    expect(state.latest()).toEqual({ seq: 1, atMs: T0 + SECOND, receivedAtMs: T0 + SECOND, queueDepth: 400, pulled: 'kafka lag of web on topic orders (committed offsets)' });
    expect(state.carried.pull).toEqual({ nextAtMs: T0 + 10 * SECOND, lastAtMs: T0 + SECOND, lastLag: 400, error: null });
    expect(state.wake(T0 + SECOND)).toEqual({ wakeAt: T0 + 10 * SECOND, pullAt: T0 + 10 * SECOND });
    expect(state.status('idle', 42).pull).toEqual({ workload: 'web', intervalMs: 10 * SECOND, nextAtMs: T0 + 10 * SECOND, lastAtMs: T0 + SECOND, lastLag: 400, error: null });
  });

  it('continues as new after decisionsPerRun rounds or maxHistoryEvents, carrying everything', () => {
    const state = autoscaler({}, { decisionsPerRun: 2, maxHistoryEvents: 500 });
    expect(state.shouldContinue({ historyLength: 499, continueAsNewSuggested: false })).toBe(false);
    expect(state.shouldContinue({ historyLength: 500, continueAsNewSuggested: false })).toBe(true);
    expect(state.shouldContinue({ historyLength: 10, continueAsNewSuggested: true })).toBe(true);
    state.roundDone();
    state.roundDone();
    expect(state.shouldContinue({ historyLength: 10, continueAsNewSuggested: false })).toBe(true);
    state.observe({ qps: 1 }, T0);
    const next = state.nextRun();
    expect(next).toEqual({ tier: 'shop', policy: state.policy, revision: 1, maxHistoryEvents: 500, decisionsPerRun: 2, carried: state.carried });
    const carried: AutoscalerCarried = JSON.parse(JSON.stringify(next.carried));
    const resumed = new AutoscalerState({ ...next, carried });
    expect(resumed).toMatchObject({ dirty: true, decisionsThisRun: 0, carried: { runs: 2, decisions: 2, seq: 1 } });
    expect(autoscaler().carried).toEqual({ observations: [], seq: 0, workloads: {}, decisions: 0, suppressedRows: 0, rejectedSignals: 0, runs: 1, windowCache: null });
  });

  it('answers the status query: the newest decision of the tier\'s workloads, waits and backoffs', () => {
    const state = autoscaler({ workloads: ['web', 'api'] });
    state.observe({ qps: 400 }, T0);
    const web = verdictOf(decideAt(state, { workload: 'web', active: false, replicas: 0 }, T0));
    state.keepRow(web.ws, { ...web.decision, label: 'no-change: workload not active' }, web.extra);
    waitFor(planOf(decideAt(state, service(2, 'api'), T0 + SECOND)), T0 + SECOND);
    state.carried.workloads.web.backoff = { key: 'scale-in 3 → 2', untilMs: T0 + MINUTE, attempts: 1 };
    const status = state.status('idle', 77);
    expect(status).toMatchObject({
      tier: 'shop', revision: 1, phase: 'idle', latest: state.latest(), lastDecision: { workload: 'web' }, runningOperations: [],
      decisions: { web: { label: 'no-change: workload not active' }, api: null },
      waiting: [
        { workload: 'web', reason: 'backing off after a refusal of scale-in 3 → 2', untilMs: T0 + MINUTE },
        { workload: 'api', reason: 'operation running: scale:api', untilMs: T0 + 2 * SECOND },
      ],
      counts: { signals: 1, decisions: 0, suppressedRows: 0, rejectedSignals: 0 }, run: { runs: 1, historyLength: 77 }, pull: null,
    });
  });
});
