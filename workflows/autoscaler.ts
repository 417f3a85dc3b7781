// autoscaler (DESIGN.md §4.6): one long-lived workflow per tier, id `autoscale:<tier>`, driven by
// `observe` signals (load observations) and `policy` signals (a new policy revision). It keeps a
// bounded window of observations and decides on the newest one: desired per signal, the largest
// wins, tolerance, stabilization, change windows, cooldown and max step (domain/autoscale.ts, pure).
// A change runs as a scaleOut / scaleIn CHILD under the workload's `scale:<name>` id, so the gates,
// drains and compensation are the operator's, and Temporal itself refuses a second operation on a
// busy workload (the autoscaler then waits and says so). Every decision is an `autoscale` ledger
// row; identical "no change" rows are written at most once per max(cooldown, 60 s). Signals that
// arrive during an operation are kept and the next decision takes the newest. A policy may also
// have the workflow pull a workload's Kafka lag every interval (policy.observe.kafkaLag): each
// reading is an observation like a signal's, as queueDepth. The workflow
// continues as new after `decisionsPerRun` decisions or `maxHistoryEvents` events, once every
// handler has finished.
import {
  allHandlersFinished, ApplicationFailure, condition, continueAsNew, defineQuery, defineSignal, defineUpdate, isCancellation, log, ParentClosePolicy, proxyActivities,
  setHandler, startChild, workflowInfo, WorkflowIdReusePolicy, type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import {
  decideScale, desiredFromSignals, initialAutoscaleState, nextEvaluationAt, noteRecommendation,
  type AutoscaleObservation, type AutoscalePolicy, type AutoscaleState, type ChangeInterval, type DecisionCode, type SignalEstimate,
} from '../domain/autoscale';
import type { LedgerOutcome } from '../protocol/ledger';
import { TierName, TierPolicySchema, TierSignalSchema, type TierPolicy } from '../protocol/tiers';
import { failureMessage, parseInput, profiles, quickStore, trackOperation } from './operation';
import { rescaleOperator, type RescaleStatus } from './rescale-operator';
import { scaleIn } from './scale-in';
import { scaleOut } from './scale-out';
import { chooseScale, isRefusal } from '../domain/scale-choice';
import type { ScaleStatus } from './scale-operation';

const observations = proxyActivities<Activities>(profiles.observation);

/** Observations kept (newest last); older ones only live on as recommendations in the domain state. */
export const OBSERVATION_WINDOW = 50;
/** An identical "no change" row is written again only after this long (or the cooldown, if longer). */
export const REPEAT_NO_CHANGE_MS = 60_000;
const CHANGE_WINDOW_HORIZON_MS = 3_600_000;
const OPERATION_RETRY_MS = { first: 1_000, max: 15_000 };
const REFUSAL_BACKOFF_MS = { first: 5_000, max: 300_000 };

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

interface WorkloadState {
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

export const AutoscalerInputSchema = z.object({
  tier: TierName,
  policy: TierPolicySchema,
  revision: z.int().min(0).default(0),
  /** continue-as-new after this many history events (well below Temporal's 51,200) */
  maxHistoryEvents: z.int().min(200).max(40_000).default(1_000),
  /** … or after this many decision rounds */
  decisionsPerRun: z.int().min(1).max(10_000).default(100),
  /** state carried across continue-as-new (internal) */
  carried: z.custom<AutoscalerCarried>((v) => v === undefined || (typeof v === 'object' && v !== null)).optional(),
});
export type AutoscalerInput = z.input<typeof AutoscalerInputSchema>;

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

export interface PolicyUpdate {
  policy: unknown;
  revision: number;
}

export const observeSignal = defineSignal<[unknown]>('observe');
export const policySignal = defineSignal<[PolicyUpdate]>('policy');
/**
 * The same two as Updates, for a sender that wants to know: a validator refuses a bad observation
 * or policy to its sender (the signals can only count and log it), and an accepted one answers
 * what the autoscaler now holds. Signals stay for fire-and-forget pushes (the API's, an agent's):
 * they need no worker to be up to be taken.
 */
export const observeUpdate = defineUpdate<ObserveAnswer, [unknown]>('observe');
export const policyUpdate = defineUpdate<PolicyAnswer, [PolicyUpdate]>('policy');
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
export const autoscalerStatusQuery = defineQuery<AutoscalerStatus>('status');

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

const toDomain = (o: Observation, currentReplicas: number): AutoscaleObservation => ({
  currentReplicas,
  ...(o.qps !== undefined ? { qps: o.qps } : {}),
  ...(o.activeUsers !== undefined ? { activeUsers: o.activeUsers } : {}),
  ...(o.cpuUtilization !== undefined ? { cpuPercent: o.cpuUtilization * 100 } : {}),
  ...(o.queueDepth !== undefined ? { queueDepth: o.queueDepth } : {}),
});

const LABEL_OF_CODE: Record<DecisionCode, string> = {
  'scale-out': 'scale-out',
  'scale-in': 'scale-in',
  'within-tolerance': 'no-change: within tolerance',
  'at-desired': 'no-change: at desired size',
  stabilizing: 'no-change: stabilizing',
  'change-window': 'no-change: change window',
  cooldown: 'no-change: cooldown',
  'no-observation': 'no-change: no observation',
};

const newer = (a: Observation, b: Observation) => a.atMs - b.atMs || a.seq - b.seq;

/** An Update validator's check: `raw` parsed by `schema`, or an error naming the first problem (the sender sees it; nothing is recorded). */
function validated(schema: z.ZodType, raw: unknown, what: string): void {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `invalid ${what}: ${issue ? `${issue.path.join('.') || '(body)'}: ${issue.message}` : 'does not match its schema'}` });
  }
}

export async function autoscaler(rawInput: unknown): Promise<never> {
  const input = parseInput(AutoscalerInputSchema, rawInput, 'autoscaler');
  const { tier } = input;
  let policy: TierPolicy = input.policy;
  let revision = input.revision;
  const carried: AutoscalerCarried = input.carried ?? {
    observations: [], seq: 0, workloads: {}, decisions: 0, suppressedRows: 0, rejectedSignals: 0, runs: 0, windowCache: null,
  };
  carried.runs += 1;
  const op = trackOperation('autoscale', null, `autoscale ${tier}`);
  const running: RunningOperation[] = [];
  let dirty = carried.observations.length > 0; // re-decide at once after continue-as-new
  let decisionsThisRun = 0;

  const enter = (phase: string) => {
    if (op.phase !== phase) op.enter(phase);
  };
  const stateOf = (workload: string): WorkloadState =>
    (carried.workloads[workload] ??= { autoscale: initialAutoscaleState(), notedSeq: 0, lastRow: null, backoff: null, waiting: null, lastDecision: null });
  const latest = (): Observation | null => carried.observations[carried.observations.length - 1] ?? null;

  /** Keeps an observation (a signal's or a pulled one) in the window, newest last, and asks for a decision. */
  const addObservation = (figures: Omit<Observation, 'seq' | 'atMs' | 'receivedAtMs'>, at?: string) => {
    const now = Date.now();
    const observation: Observation = { seq: ++carried.seq, atMs: at ? Math.min(Date.parse(at), now + 60_000) : now, receivedAtMs: now, ...figures };
    carried.observations.push(observation);
    carried.observations.sort(newer);
    if (carried.observations.length > OBSERVATION_WINDOW) carried.observations.splice(0, carried.observations.length - OBSERVATION_WINDOW);
    dirty = true;
  };

  setHandler(observeSignal, (raw: unknown) => {
    const parsed = TierSignalSchema.safeParse(raw);
    if (!parsed.success) {
      carried.rejectedSignals += 1;
      log.warn('autoscaler: ignoring an invalid observation', { tier, problem: parsed.error.issues[0]?.message });
      return;
    }
    const { at, ...figures } = parsed.data;
    addObservation(figures, at);
  });
  setHandler(observeUpdate, (raw: unknown): ObserveAnswer => {
    const { at, ...figures } = TierSignalSchema.parse(raw);
    addObservation(figures, at);
    return { seq: carried.seq, window: carried.observations.length };
  }, { validator: (raw: unknown) => validated(TierSignalSchema, raw, 'observation') });
  const applyPolicy = (update: PolicyUpdate): boolean => {
    const parsed = TierPolicySchema.safeParse(update?.policy);
    if (!parsed.success || typeof update.revision !== 'number') {
      carried.rejectedSignals += 1;
      log.warn('autoscaler: ignoring an invalid policy', { tier });
      return false;
    }
    if (update.revision <= revision) return false; // an older revision arriving late
    policy = parsed.data;
    revision = update.revision;
    carried.windowCache = null;
    carried.pull = null; // a new pull (or none): read at once
    for (const workload of Object.keys(carried.workloads)) if (!policy.workloads.includes(workload)) delete carried.workloads[workload];
    for (const ws of Object.values(carried.workloads)) ws.backoff = null; // new inputs: a refused change may be tried again
    dirty = true;
    return true;
  };
  setHandler(policySignal, (update: PolicyUpdate) => {
    applyPolicy(update);
  });
  setHandler(policyUpdate, (update: PolicyUpdate): PolicyAnswer => ({ applied: applyPolicy(update), revision }), {
    validator: (update: PolicyUpdate) => {
      validated(TierPolicySchema, update?.policy, 'policy');
      if (!Number.isInteger(update?.revision) || update.revision < 1) throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: 'invalid policy: revision must be a positive integer' });
    },
  });
  setHandler(autoscalerStatusQuery, (): AutoscalerStatus => {
    const decisions = Object.fromEntries(policy.workloads.map((w) => [w, carried.workloads[w]?.lastDecision ?? null]));
    const lastDecision = Object.values(decisions).filter((d): d is DecisionRecord => d !== null).sort((a, b) => b.atMs - a.atMs)[0] ?? null;
    return {
      tier, revision, policy, phase: op.phase, observations: carried.observations.slice(-10), latest: latest(), lastDecision, decisions,
      runningOperations: [...running],
      waiting: Object.entries(carried.workloads).flatMap(([workload, ws]) => [
        ...(ws.waiting ? [{ workload, reason: `operation running: ${ws.waiting.workflowId}`, untilMs: ws.waiting.untilMs }] : []),
        ...(ws.backoff ? [{ workload, reason: `backing off after a refusal of ${ws.backoff.key}`, untilMs: ws.backoff.untilMs }] : []),
      ]),
      counts: { signals: carried.seq, decisions: carried.decisions, suppressedRows: carried.suppressedRows, rejectedSignals: carried.rejectedSignals },
      run: { runs: carried.runs, historyLength: workflowInfo().historyLength },
      pull: policy.observe && carried.pull ? { workload: policy.observe.kafkaLag.workload, intervalMs: policy.observe.kafkaLag.intervalMs, ...carried.pull } : null,
    };
  });

  /**
   * Reads the workload's Kafka lag when it is due (policy.observe.kafkaLag) and keeps it as an
   * observation; a failed reading is shown in the status and tried again at the next interval.
   * Policies without observe never get here, so their histories have no such activity.
   */
  const pullIfDue = async () => {
    const pull = policy.observe?.kafkaLag;
    if (!pull) return;
    const state = (carried.pull ??= { nextAtMs: 0, lastAtMs: null, lastLag: null, error: null });
    if (Date.now() < state.nextAtMs) return;
    state.nextAtMs = Date.now() + pull.intervalMs;
    try {
      const reading = await observations.observeKafkaLag.executeWithOptions({ summary: `kafka lag of ${pull.workload}` }, [{ workload: pull.workload }]);
      Object.assign(state, { lastAtMs: Date.now(), lastLag: reading.lag, error: null });
      addObservation({ queueDepth: reading.lag, pulled: `kafka lag of ${reading.workload} on topic ${reading.topic} (${reading.against})` });
    } catch (error) {
      if (isCancellation(error)) throw error; // a cancellation of the autoscaler is not a failed reading
      state.error = failureMessage(error);
      log.warn('autoscaler: the Kafka lag could not be read', { tier, workload: pull.workload, error: state.error });
    }
  };

  /** One ledger row per decision, except an identical "no change" repeated within the repeat interval. */
  const record = async (ws: WorkloadState, decision: DecisionRecord, extra: { recommended: number | null; stabilized: number | null }) => {
    ws.lastDecision = decision;
    const isChange = !decision.label.startsWith('no-change');
    const key = `${decision.label}|${decision.from}|${decision.to}|${extra.stabilized}|${decision.desiredPerSignal.map((e) => `${e.signal}=${e.desired}`).join(',')}|r${revision}`;
    const repeatMs = Math.max(policy.cooldownMs, REPEAT_NO_CHANGE_MS);
    if (!isChange && ws.lastRow?.key === key && decision.atMs - ws.lastRow.atMs < repeatMs) {
      carried.suppressedRows += 1;
      return;
    }
    ws.lastRow = { key, atMs: decision.atMs };
    const { workflowId, runId } = workflowInfo();
    await quickStore().appendLedger.executeWithOptions({ summary: `ledger: autoscale ${decision.workload} ${decision.label}` }, [{
      kind: 'autoscale', tier, workload: decision.workload, fromReplicas: decision.from, toReplicas: decision.to,
      reason: `${decision.label} — ${decision.reason}`, outcome: decision.outcome, workflowId, runId,
      inputs: {
        tier, policyRevision: revision, decision: decision.label, observation: decision.observation,
        observations: carried.observations.slice(-10), targets: policy.targets, desiredPerSignal: decision.desiredPerSignal,
        recommended: extra.recommended, stabilized: extra.stabilized, operation: decision.operation,
        suppressedSinceLastRow: carried.suppressedRows,
      },
    }]);
  };

  const changeIntervals = async (now: number): Promise<ChangeInterval[]> => {
    if (policy.changeWindows.length === 0) return [];
    const cache = carried.windowCache;
    if (!cache || cache.revision !== revision || now < cache.fromMs || now >= cache.toMs) {
      const toMs = now + CHANGE_WINDOW_HORIZON_MS;
      const intervals = await quickStore().changeWindowIntervals.executeWithOptions(
        { summary: `expand ${policy.changeWindows.length} change window(s)` }, [{ windows: policy.changeWindows, fromMs: now, toMs }],
      );
      carried.windowCache = { revision, fromMs: now, toMs, intervals };
    }
    return carried.windowCache!.intervals;
  };

  /** One decision per workload of the tier on the newest observation; changes run as children, awaited together. */
  const decideRound = async () => {
    const newest = latest();
    if (!newest) return;
    enter('deciding');
    const sizes = await quickStore().tierSnapshot.executeWithOptions({ summary: `sizes of ${policy.workloads.join(', ')}` }, [{ workloads: policy.workloads }]);
    const now = Date.now();
    const intervals = await changeIntervals(now);
    const domain = domainPolicy(tier, policy);
    const children: Promise<void>[] = [];
    for (const size of sizes) {
      const ws = stateOf(size.workload);
      const base = { atMs: now, workload: size.workload, from: size.replicas, observationSeq: newest.seq, observation: newest, operation: null };
      if (!size.active) {
        await record(ws, { ...base, to: size.replicas, label: 'no-change: workload not active', reason: `${size.workload} is not defined or retired`, desiredPerSignal: [], outcome: 'no-change' }, { recommended: null, stabilized: null });
        continue;
      }
      for (const o of carried.observations) {
        if (o.seq > ws.notedSeq && o.seq !== newest.seq) ws.autoscale = noteRecommendation(domain, ws.autoscale, toDomain(o, size.replicas), o.receivedAtMs);
      }
      ws.notedSeq = Math.max(ws.notedSeq, ...carried.observations.map((o) => o.seq));
      const previous = ws.autoscale;
      const { decision, state } = decideScale(domain, previous, toDomain(newest, size.replicas), now, { changeIntervals: intervals });
      const perSignal = desiredFromSignals(domain, toDomain(newest, size.replicas)).perSignal;
      const extra = { recommended: decision.recommended, stabilized: decision.stabilized };
      // The cooldown runs from the end of a completed change (set below), not from a start attempt.
      ws.autoscale = { ...state, lastChangeAtMs: previous.lastChangeAtMs };
      if (decision.action === 'none') {
        ws.waiting = null;
        await record(ws, { ...base, to: decision.to, label: LABEL_OF_CODE[decision.code], reason: decision.reason, desiredPerSignal: perSignal, outcome: 'no-change' }, extra);
        continue;
      }
      const key = `${decision.action} ${decision.from} → ${decision.to}`;
      if (ws.backoff && ws.backoff.key === key && now < ws.backoff.untilMs) {
        await record(ws, {
          ...base, to: decision.from, label: 'no-change: backing off after a refusal',
          reason: `${key} was refused; not retried before ${new Date(ws.backoff.untilMs).toISOString()} unless the inputs change (${decision.reason})`,
          desiredPerSignal: perSignal, outcome: 'no-change',
        }, extra);
        continue;
      }
      // A stream job's count is bounded by maxParallelism and its source partitions.
      const to = size.stream ? Math.min(decision.to, size.stream.bound) : decision.to;
      if (to === decision.from) {
        await record(ws, {
          ...base, to, label: 'no-change: bounded', reason: `${decision.reason}; ${size.workload} runs at most ${size.stream!.bound} ${size.stream!.operator} subtasks (${size.stream!.boundBy})`,
          desiredPerSignal: perSignal, outcome: 'no-change',
        }, extra);
        continue;
      }
      // Every tier workload is sized by its replicas but a stream job, by its keyed aggregate (size.stream).
      const choice = chooseScale({ door: 'autoscaler', workload: size.workload, kind: size.stream ? 'stream' : 'service', current: decision.from, target: to });
      if (isRefusal(choice)) {
        await record(ws, { ...base, to: decision.from, label: 'no-change: bounded', reason: choice.message, desiredPerSignal: perSignal, outcome: 'no-change' }, extra);
        continue;
      }
      const { workflowId } = choice;
      const kind = choice.workflow as RunningOperation['kind'];
      const reason = `autoscale ${tier}: ${decision.reason}`.slice(0, 500);
      let handle: ChildWorkflowHandle<typeof scaleOut> | ChildWorkflowHandle<typeof rescaleOperator>;
      try {
        const options = {
          workflowId, parentClosePolicy: ParentClosePolicy.ABANDON, workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
          staticSummary: size.stream
            ? `autoscale ${tier}: rescale ${size.workload}/${size.stream.operator} ${decision.from} → ${to}`
            : `autoscale ${tier}: scale ${size.workload} ${decision.from} → ${to}`,
        };
        // A stream job through rescaleOperator: hot for an integer factor, the replan once otherwise.
        handle = size.stream
          ? await startChild(rescaleOperator, { ...options, args: [{ job: size.workload, operator: size.stream.operator, parallelism: to, reason }] })
          : kind === 'scaleOut'
            ? await startChild(scaleOut, { ...options, args: [{ workload: size.workload, replicas: to, reason, soakMs: policy.soakMs, ...(policy.steps ? { steps: policy.steps } : {}) }] })
            : await startChild(scaleIn, { ...options, args: [{ workload: size.workload, replicas: to, reason, drainTimeoutMs: policy.drainTimeoutMs, minReplicas: policy.minReplicas }] });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
        // Someone else's operation (an operator's, a plan, the reconcile loop) holds the workload: wait for it.
        const attempts = ws.waiting?.attempts ?? 0;
        ws.waiting = { attempts: attempts + 1, untilMs: now + Math.min(OPERATION_RETRY_MS.first * 2 ** attempts, OPERATION_RETRY_MS.max), workflowId };
        await record(ws, {
          ...base, to: decision.from, label: 'no-change: operation running',
          reason: `${workflowId} is running; ${key} waits for it (${decision.reason})`, desiredPerSignal: perSignal, outcome: 'waiting',
        }, extra);
        continue;
      }
      ws.waiting = null;
      const operation: RunningOperation = { workload: size.workload, workflowId, kind, from: decision.from, to, startedAtMs: now };
      running.push(operation);
      await record(ws, { ...base, to, label: decision.action, reason: decision.reason, desiredPerSignal: perSignal, operation: workflowId, outcome: 'started' }, extra);
      children.push((async () => {
        let status: { outcome: ScaleStatus['outcome'] | RescaleStatus['outcome']; error: string | null; evidenceGap?: string | null } | null = null;
        let failure: string | null = null;
        try {
          status = await handle.result();
        } catch (error) {
          failure = failureMessage(error);
        }
        running.splice(running.indexOf(operation), 1);
        const ended = Date.now();
        if (status && (status.outcome === 'completed' || status.outcome === 'compensated' || status.outcome === 'replanned')) {
          ws.autoscale = { ...ws.autoscale, lastChangeAtMs: ended };
          ws.backoff = null;
          return;
        }
        const attempts = ws.backoff?.key === key ? ws.backoff.attempts : 0;
        ws.backoff = { key, attempts: attempts + 1, untilMs: ended + Math.min(REFUSAL_BACKOFF_MS.first * 2 ** attempts, REFUSAL_BACKOFF_MS.max) };
        const detail = failure ?? status?.evidenceGap ?? status?.error ?? `ended ${status?.outcome}`;
        await record(ws, {
          atMs: ended, workload: size.workload, from: decision.from, to: decision.from, label: `refused: ${detail}`.slice(0, 300),
          reason: `${key} ended ${status?.outcome ?? 'failed'}: ${detail}; retried after ${new Date(ws.backoff.untilMs).toISOString()} or when the inputs change`,
          observationSeq: newest.seq, observation: newest, desiredPerSignal: perSignal, operation: workflowId, outcome: status?.outcome ?? 'failed',
        }, extra);
      })());
    }
    if (children.length) {
      enter(`operation running: ${running.map((r) => `${r.workflowId} ${r.from} → ${r.to}`).join(', ')}`);
      await Promise.all(children);
      dirty = true; // the sizes changed: decide again on the newest observation
    }
    carried.decisions += 1;
    decisionsThisRun += 1;
  };

  /** The next time a decision could come out differently without a new signal. */
  const nextWakeAt = (): number | null => {
    if (!latest()) return null;
    const domain = domainPolicy(tier, policy);
    const now = Date.now();
    const times: number[] = [];
    for (const workload of policy.workloads) {
      const ws = carried.workloads[workload];
      if (!ws) continue;
      const t = nextEvaluationAt(domain, ws.autoscale, now);
      if (t !== null) times.push(t);
      if (ws.waiting) times.push(ws.waiting.untilMs);
      if (ws.backoff && ws.backoff.untilMs > now) times.push(ws.backoff.untilMs);
    }
    if (carried.windowCache && policy.changeWindows.length) {
      for (const i of carried.windowCache.intervals) if (i.endMs > now) times.push(i.endMs, ...(i.startMs > now ? [i.startMs] : []));
    }
    return times.length ? Math.max(now + 1, Math.min(...times)) : null;
  };

  for (;;) {
    const info = workflowInfo();
    if (decisionsThisRun >= input.decisionsPerRun || info.historyLength >= input.maxHistoryEvents || info.continueAsNewSuggested) {
      enter('continuing as new');
      await condition(allHandlersFinished);
      return continueAsNew<typeof autoscaler>({
        tier, policy, revision, maxHistoryEvents: input.maxHistoryEvents, decisionsPerRun: input.decisionsPerRun, carried,
      });
    }
    await pullIfDue();
    const waiting = Object.values(carried.workloads).find((ws) => ws.waiting);
    enter(waiting?.waiting ? `waiting: ${waiting.waiting.workflowId} is running` : 'idle');
    const decisionAt = nextWakeAt();
    const pullAt = policy.observe && carried.pull ? carried.pull.nextAtMs : null;
    const wakeAt = pullAt === null ? decisionAt : decisionAt === null ? pullAt : Math.min(decisionAt, pullAt);
    if (wakeAt === null) await condition(() => dirty);
    else await condition(() => dirty, Math.max(1, wakeAt - Date.now()));
    if (!dirty && pullAt !== null && Date.now() >= pullAt) continue; // only a pull was due
    dirty = false;
    await decideRound();
  }
}
