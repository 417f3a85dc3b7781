// The autoscaler's state (DESIGN.md §4.6), pure: workflows/autoscaler.ts is the Temporal shell
// around it (handlers, timers, activities, children, continue-as-new) and asks here what each
// event does to it. The state is plain JSON (`AutoscalerCarried`), carried across continue-as-new
// as it is: the observation window, one state per workload, the pulled Kafka lag, the expanded
// change windows, the counts. Here too: which "no change" rows are suppressed, when to wake, when
// to continue as new, the status query's answer. A workload's decision on an observation and the
// life of the child it starts are domain/autoscaler-decisions.ts'; the policy maths (desired per
// signal, tolerance, stabilization, change windows, cooldown, max step) domain/autoscale.ts'.
import type { z } from 'zod';
import type { LedgerOutcome } from '../protocol/ledger';
import { TierPolicySchema, TierSignalSchema, type TierPolicy, type TierSignal } from '../protocol/tiers';
import { initialAutoscaleState, nextEvaluationAt, type AutoscalePolicy, type AutoscaleState, type ChangeInterval, type SignalEstimate } from './autoscale';

/** Observations kept (newest last); older ones only live on as recommendations in the domain state. */
export const OBSERVATION_WINDOW = 50;
/** An identical "no change" row is written again only after this long (or the cooldown, if longer). */
export const REPEAT_NO_CHANGE_MS = 60_000;
const CHANGE_WINDOW_HORIZON_MS = 3_600_000;

export interface Observation {
  /** arrival order, across continue-as-new */
  seq: number;
  /** the sender's `at` (capped at arrival + 60 s), or the arrival time: the newest wins */
  atMs: number;
  /** workflow time of arrival: what the stabilization windows measure */
  receivedAtMs: number;
  qps?: number;
  activeUsers?: number;
  cpuUtilization?: number;
  queueDepth?: number;
  /** a reading the workflow pulled itself (policy.observe), e.g. "kafka lag of orders (committed offsets)"; absent for a signal */
  pulled?: string;
}

/** The pulled Kafka lag: when it is read next, and the last reading or why it failed. */
export interface PullState {
  nextAtMs: number;
  lastAtMs: number | null;
  lastLag: number | null;
  error: string | null;
}

export interface DecisionRecord {
  atMs: number;
  workload: string;
  from: number;
  to: number;
  /** e.g. "no-change: within tolerance", "scale-out", "refused: ..." */
  label: string;
  reason: string;
  observationSeq: number | null;
  observation: Observation | null;
  desiredPerSignal: SignalEstimate[];
  operation: string | null;
  outcome: LedgerOutcome;
}

export interface WorkloadState {
  autoscale: AutoscaleState;
  notedSeq: number;
  lastRow: { key: string; atMs: number } | null;
  backoff: { key: string; untilMs: number; attempts: number } | null;
  /** an operation not ours runs on the workload: retry at untilMs */
  waiting: { untilMs: number; attempts: number; workflowId: string } | null;
  lastDecision: DecisionRecord | null;
}

export interface AutoscalerCarried {
  observations: Observation[];
  seq: number;
  workloads: Record<string, WorkloadState>;
  decisions: number;
  suppressedRows: number;
  rejectedSignals: number;
  runs: number;
  windowCache: { revision: number; fromMs: number; toMs: number; intervals: ChangeInterval[] } | null;
  /** policy.observe's pulled lag (absent in runs carried from before it existed) */
  pull?: PullState | null;
}

/** One run's input (workflows/autoscaler.ts AutoscalerInputSchema, parsed). */
export interface AutoscalerRun {
  tier: string;
  policy: TierPolicy;
  revision: number;
  maxHistoryEvents: number;
  decisionsPerRun: number;
  carried?: AutoscalerCarried;
}

export interface RunningOperation {
  workload: string;
  workflowId: string;
  kind: 'scaleOut' | 'scaleIn' | 'rescaleOperator';
  from: number;
  to: number;
  startedAtMs: number;
}

export interface AutoscalerStatus {
  tier: string;
  revision: number;
  policy: TierPolicy;
  phase: string;
  observations: Observation[];
  latest: Observation | null;
  lastDecision: DecisionRecord | null;
  decisions: Record<string, DecisionRecord | null>;
  runningOperations: RunningOperation[];
  waiting: { workload: string; reason: string; untilMs: number }[];
  counts: { signals: number; decisions: number; suppressedRows: number; rejectedSignals: number };
  run: { runs: number; historyLength: number };
  /** the pulled Kafka lag (policy.observe); null without one */
  pull: ({ workload: string; intervalMs: number } & PullState) | null;
}

/** A ledger row's figures beside its decision: the raw and the stabilized recommendation. */
export interface RowFigures {
  recommended: number | null;
  stabilized: number | null;
}

export interface PolicyUpdate {
  policy: unknown;
  revision: number;
}
export interface ObserveAnswer {
  /** the observation's sequence number in this autoscaler */
  seq: number;
  /** observations in the window after it */
  window: number;
}
export interface PolicyAnswer {
  /** the revision now in force (an older one than held changes nothing) */
  revision: number;
  applied: boolean;
}

/** The tier policy (DESIGN.md §6 shape) as the domain's policy. */
export function domainPolicy(tier: string, policy: TierPolicy): AutoscalePolicy {
  const t = policy.targets;
  return {
    workload: tier, min: policy.minReplicas, max: policy.maxReplicas, tolerance: policy.tolerance,
    scaleUpStabilizationMs: policy.scaleUpStabilizationMs, scaleDownStabilizationMs: policy.scaleDownStabilizationMs,
    cooldownMs: policy.cooldownMs, maxStep: policy.maxStep, changeWindows: [],
    signals: {
      ...(t.qpsPerInstance !== undefined ? { qps: { perInstance: t.qpsPerInstance } } : {}),
      ...(t.activeUsersPerInstance !== undefined ? { activeUsers: { perInstance: t.activeUsersPerInstance } } : {}),
      ...(t.cpuUtilization !== undefined ? { cpu: { targetPercent: t.cpuUtilization * 100 } } : {}),
      ...(t.queueDepthPerInstance !== undefined ? { queueDepth: { perInstance: t.queueDepthPerInstance } } : {}),
    },
  };
}

const newer = (a: Observation, b: Observation) => a.atMs - b.atMs || a.seq - b.seq;

/** Why `raw` does not parse with `schema`, naming the first problem, or null (an Update validator's refusal). */
function problem(schema: z.ZodType, raw: unknown, what: string): string | null {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  return `invalid ${what}: ${issue ? `${issue.path.join('.') || '(body)'}: ${issue.message}` : 'does not match its schema'}`;
}
export const observationProblem = (raw: unknown): string | null => problem(TierSignalSchema, raw, 'observation');
export function policyProblem(update: PolicyUpdate): string | null {
  return problem(TierPolicySchema, update?.policy, 'policy')
    ?? (!Number.isInteger(update?.revision) || update.revision < 1 ? 'invalid policy: revision must be a positive integer' : null);
}

export class AutoscalerState {
  readonly tier: string;
  policy: TierPolicy;
  revision: number;
  readonly carried: AutoscalerCarried;
  /** something to decide on: an observation, a policy, sizes changed by a child */
  dirty: boolean;
  decisionsThisRun = 0;
  readonly running: RunningOperation[] = [];

  constructor(private readonly run: AutoscalerRun) {
    this.tier = run.tier;
    this.policy = run.policy;
    this.revision = run.revision;
    this.carried = run.carried ?? { observations: [], seq: 0, workloads: {}, decisions: 0, suppressedRows: 0, rejectedSignals: 0, runs: 0, windowCache: null };
    this.carried.runs += 1;
    this.dirty = this.carried.observations.length > 0; // re-decide at once after continue-as-new
  }

  latest(): Observation | null {
    return this.carried.observations[this.carried.observations.length - 1] ?? null;
  }

  workload(name: string): WorkloadState {
    return (this.carried.workloads[name] ??= { autoscale: initialAutoscaleState(), notedSeq: 0, lastRow: null, backoff: null, waiting: null, lastDecision: null });
  }

  /** Keeps an observation (a signal's or a pulled one) in the window, newest last, and asks for a decision. */
  add(figures: Omit<Observation, 'seq' | 'atMs' | 'receivedAtMs'>, now: number, at?: string): void {
    const c = this.carried;
    c.observations.push({ seq: ++c.seq, atMs: at ? Math.min(Date.parse(at), now + 60_000) : now, receivedAtMs: now, ...figures });
    c.observations.sort(newer);
    if (c.observations.length > OBSERVATION_WINDOW) c.observations.splice(0, c.observations.length - OBSERVATION_WINDOW);
    this.dirty = true;
  }

  /** The `observe` Update's observation (its validator checked it). */
  observe(raw: unknown, now: number): ObserveAnswer {
    const { at, ...figures } = TierSignalSchema.parse(raw);
    this.add(figures, now, at);
    return { seq: this.carried.seq, window: this.carried.observations.length };
  }

  /** The `observe` signal's observation: kept, or counted as rejected (then its problem, for the log). */
  signal(raw: unknown, now: number): { problem: string | undefined } | null {
    const parsed = TierSignalSchema.safeParse(raw);
    if (!parsed.success) {
      this.carried.rejectedSignals += 1;
      return { problem: parsed.error.issues[0]?.message };
    }
    const { at, ...figures }: TierSignal = parsed.data;
    this.add(figures, now, at);
    return null;
  }

  /** A new policy revision: true when applied, false for an older one, null when invalid (counted as rejected). */
  applyPolicy(update: PolicyUpdate): boolean | null {
    const parsed = TierPolicySchema.safeParse(update?.policy);
    if (!parsed.success || typeof update.revision !== 'number') {
      this.carried.rejectedSignals += 1;
      return null;
    }
    if (update.revision <= this.revision) return false; // an older revision arriving late
    this.policy = parsed.data;
    this.revision = update.revision;
    const c = this.carried;
    c.windowCache = null;
    c.pull = null; // a new pull (or none): read at once
    for (const workload of Object.keys(c.workloads)) if (!this.policy.workloads.includes(workload)) delete c.workloads[workload];
    for (const ws of Object.values(c.workloads)) ws.backoff = null; // new inputs: a refused change may be tried again
    this.dirty = true;
    return true;
  }

  /** The Kafka lag to read now (policy.observe.kafkaLag), its next reading scheduled; null when none is due. */
  pullDue(now: number): { workload: string; state: PullState } | null {
    const pull = this.policy.observe?.kafkaLag;
    if (!pull) return null;
    const state = (this.carried.pull ??= { nextAtMs: 0, lastAtMs: null, lastLag: null, error: null });
    if (now < state.nextAtMs) return null;
    state.nextAtMs = now + pull.intervalMs;
    return { workload: pull.workload, state };
  }

  pulled(state: PullState, reading: { workload: string; topic: string; lag: number; against: string }, now: number): void {
    Object.assign(state, { lastAtMs: now, lastLag: reading.lag, error: null });
    this.add({ queueDepth: reading.lag, pulled: `kafka lag of ${reading.workload} on topic ${reading.topic} (${reading.against})` }, now);
  }

  /** The change windows as intervals around `now`: known ones, or the expansion to ask for (then keepIntervals). */
  changeIntervals(now: number): ChangeInterval[] | { windows: TierPolicy['changeWindows']; fromMs: number; toMs: number } {
    if (this.policy.changeWindows.length === 0) return [];
    const cache = this.carried.windowCache;
    if (cache && cache.revision === this.revision && now >= cache.fromMs && now < cache.toMs) return cache.intervals;
    return { windows: this.policy.changeWindows, fromMs: now, toMs: now + CHANGE_WINDOW_HORIZON_MS };
  }

  keepIntervals(asked: { fromMs: number; toMs: number }, intervals: ChangeInterval[]): ChangeInterval[] {
    this.carried.windowCache = { revision: this.revision, fromMs: asked.fromMs, toMs: asked.toMs, intervals };
    return intervals;
  }

  /** Keeps a worded decision as the workload's last; false when its row is an identical "no change" within the repeat interval. */
  keepRow(ws: WorkloadState, decision: DecisionRecord, extra: RowFigures): boolean {
    ws.lastDecision = decision;
    const isChange = !decision.label.startsWith('no-change');
    const key = `${decision.label}|${decision.from}|${decision.to}|${extra.stabilized}|${decision.desiredPerSignal.map((e) => `${e.signal}=${e.desired}`).join(',')}|r${this.revision}`;
    const repeatMs = Math.max(this.policy.cooldownMs, REPEAT_NO_CHANGE_MS);
    if (!isChange && ws.lastRow?.key === key && decision.atMs - ws.lastRow.atMs < repeatMs) {
      this.carried.suppressedRows += 1;
      return false;
    }
    ws.lastRow = { key, atMs: decision.atMs };
    return true;
  }

  /** The decision's `autoscale` ledger row. */
  ledgerRow(decision: DecisionRecord, extra: RowFigures, workflowId: string, runId: string) {
    const { tier, revision, policy, carried } = this;
    return {
      kind: 'autoscale' as const, tier, workload: decision.workload, fromReplicas: decision.from, toReplicas: decision.to,
      reason: `${decision.label} — ${decision.reason}`, outcome: decision.outcome, workflowId, runId,
      inputs: {
        tier, policyRevision: revision, decision: decision.label, observation: decision.observation,
        observations: carried.observations.slice(-10), targets: policy.targets, desiredPerSignal: decision.desiredPerSignal,
        recommended: extra.recommended, stabilized: extra.stabilized, operation: decision.operation,
        suppressedSinceLastRow: carried.suppressedRows,
      },
    };
  }

  roundDone(): void {
    this.carried.decisions += 1;
    this.decisionsThisRun += 1;
  }

  runningPhase(): string {
    return `operation running: ${this.running.map((r) => `${r.workflowId} ${r.from} → ${r.to}`).join(', ')}`;
  }

  restingPhase(): string {
    const waiting = Object.values(this.carried.workloads).find((ws) => ws.waiting);
    return waiting?.waiting ? `waiting: ${waiting.waiting.workflowId} is running` : 'idle';
  }

  /** The next time a decision could come out differently without a new signal. */
  nextDecisionAt(now: number): number | null {
    if (!this.latest()) return null;
    const domain = domainPolicy(this.tier, this.policy);
    const times: number[] = [];
    for (const workload of this.policy.workloads) {
      const ws = this.carried.workloads[workload];
      if (!ws) continue;
      const t = nextEvaluationAt(domain, ws.autoscale, now);
      if (t !== null) times.push(t);
      if (ws.waiting) times.push(ws.waiting.untilMs);
      if (ws.backoff && ws.backoff.untilMs > now) times.push(ws.backoff.untilMs);
    }
    const cache = this.carried.windowCache;
    if (cache && this.policy.changeWindows.length) {
      for (const i of cache.intervals) if (i.endMs > now) times.push(i.endMs, ...(i.startMs > now ? [i.startMs] : []));
    }
    return times.length ? Math.max(now + 1, Math.min(...times)) : null;
  }

  /** When to wake without a new observation (null: only for one), and when the next pull is due (null: none). */
  wake(now: number): { wakeAt: number | null; pullAt: number | null } {
    const decisionAt = this.nextDecisionAt(now);
    const pullAt = this.policy.observe && this.carried.pull ? this.carried.pull.nextAtMs : null;
    return { wakeAt: pullAt === null ? decisionAt : decisionAt === null ? pullAt : Math.min(decisionAt, pullAt), pullAt };
  }

  /** Continue as new after decisionsPerRun decisions, maxHistoryEvents events, or when Temporal suggests it. */
  shouldContinue(info: { historyLength: number; continueAsNewSuggested: boolean }): boolean {
    return this.decisionsThisRun >= this.run.decisionsPerRun || info.historyLength >= this.run.maxHistoryEvents || info.continueAsNewSuggested;
  }

  /** The next run's input: the policy in force and everything carried. */
  nextRun(): Required<AutoscalerRun> {
    const { tier, policy, revision, carried } = this;
    return { tier, policy, revision, maxHistoryEvents: this.run.maxHistoryEvents, decisionsPerRun: this.run.decisionsPerRun, carried };
  }

  status(phase: string, historyLength: number): AutoscalerStatus {
    const { tier, revision, policy, carried } = this;
    const decisions = Object.fromEntries(policy.workloads.map((w) => [w, carried.workloads[w]?.lastDecision ?? null]));
    const lastDecision = Object.values(decisions).filter((d): d is DecisionRecord => d !== null).sort((a, b) => b.atMs - a.atMs)[0] ?? null;
    return {
      tier, revision, policy, phase, observations: carried.observations.slice(-10), latest: this.latest(), lastDecision, decisions,
      runningOperations: [...this.running],
      waiting: Object.entries(carried.workloads).flatMap(([workload, ws]) => [
        ...(ws.waiting ? [{ workload, reason: `operation running: ${ws.waiting.workflowId}`, untilMs: ws.waiting.untilMs }] : []),
        ...(ws.backoff ? [{ workload, reason: `backing off after a refusal of ${ws.backoff.key}`, untilMs: ws.backoff.untilMs }] : []),
      ]),
      counts: { signals: carried.seq, decisions: carried.decisions, suppressedRows: carried.suppressedRows, rejectedSignals: carried.rejectedSignals },
      run: { runs: carried.runs, historyLength },
      pull: policy.observe && carried.pull ? { workload: policy.observe.kafkaLag.workload, intervalMs: policy.observe.kafkaLag.intervalMs, ...carried.pull } : null,
    };
  }
}
