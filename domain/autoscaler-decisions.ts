// A tier workload's decision on the autoscaler's newest observation (DESIGN.md §4.6), and the life
// of the child that makes a change, pure: workflows/autoscaler.ts starts the children and writes the
// rows; domain/autoscaler-state.ts holds the state decided on. Per workload: the observations since
// its last decision count for stabilization (noteRecommendation), the newest is decided on
// (decideScale), then a refused change backs off, a stream job is bounded by its partitions, the
// scale choice names the child, and a busy workload is waited for. The cooldown runs from the end
// of a completed change, not from a start attempt.
// A decision's ledger word (`label`) is the workflow's to write (api/metrics.ts maps the words back
// to codes): a Verdict carries its `code` and a record whose `label` is empty.
import type { LedgerOutcome } from '../protocol/ledger';
import { decideScale, desiredFromSignals, noteRecommendation, type AutoscaleObservation, type AutoscalePolicy, type ChangeInterval, type DecisionCode, type SignalEstimate } from './autoscale';
import { domainPolicy, type AutoscalerState, type DecisionRecord, type Observation, type RowFigures, type RunningOperation, type WorkloadState } from './autoscaler-state';
import { chooseScale, isRefusal } from './scale-choice';

const OPERATION_RETRY_MS = { first: 1_000, max: 15_000 };
const REFUSAL_BACKOFF_MS = { first: 5_000, max: 300_000 };

/** A tier workload's size as the tierSnapshot activity reads it (activities/autoscaler.ts TierWorkloadSize). */
export interface WorkloadSize {
  workload: string;
  active: boolean;
  replicas: number;
  stream?: { operator: string; bound: number; boundBy: string };
}

/** What a decision is, beyond the policy maths' codes: the ledger word of each is the workflow's. */
export type AutoscalerCode = DecisionCode | 'not-active' | 'backing-off' | 'bounded' | 'operation-running' | 'refused';
/** A decision to record (its `label` empty: the workflow words `code`; a refusal's `detail` says why). */
export interface Verdict {
  ws: WorkloadState;
  code: AutoscalerCode;
  detail?: string;
  decision: DecisionRecord;
  extra: RowFigures;
}
/** A change to start as a child: `workflow` with `args` under `workflowId`. */
export interface StartPlan {
  ws: WorkloadState;
  action: 'scale-out' | 'scale-in';
  /** e.g. "scale-out 2 → 4": what a refusal backs off */
  key: string;
  workflowId: string;
  workflow: RunningOperation['kind'];
  args: Record<string, unknown>;
  summary: string;
  to: number;
  reason: string;
  base: Omit<DecisionRecord, 'to' | 'label' | 'reason' | 'desiredPerSignal' | 'outcome'>;
  desiredPerSignal: SignalEstimate[];
  extra: RowFigures;
  /** set once started */
  operation?: RunningOperation;
}
/** How a child ended: its status, or the failure it ended with. */
export interface ChildEnd {
  status: { outcome: LedgerOutcome; error: string | null; evidenceGap?: string | null } | null;
  failure: string | null;
}
/** One decision round: the newest observation, the time, the change windows and the policy it was begun with. */
export interface Round {
  newest: Observation;
  now: number;
  intervals: readonly ChangeInterval[];
  policy: AutoscalePolicy;
}

const toDomain = (o: Observation, currentReplicas: number): AutoscaleObservation => ({
  currentReplicas,
  ...(o.qps !== undefined ? { qps: o.qps } : {}),
  ...(o.activeUsers !== undefined ? { activeUsers: o.activeUsers } : {}),
  ...(o.cpuUtilization !== undefined ? { cpuPercent: o.cpuUtilization * 100 } : {}),
  ...(o.queueDepth !== undefined ? { queueDepth: o.queueDepth } : {}),
});

const backoffMs = (attempts: number, { first, max }: { first: number; max: number }) => Math.min(first * 2 ** attempts, max);

/** A decision round on the newest observation: the policy it begins with decides every workload of it. */
export function beginRound(state: AutoscalerState, newest: Observation, now: number, intervals: readonly ChangeInterval[]): Round {
  return { newest, now, intervals, policy: domainPolicy(state.tier, state.policy) };
}

/** One workload's decision on the round's newest observation: a record to write, or a change to start. */
export function decide(state: AutoscalerState, size: WorkloadSize, { newest, now, intervals, policy: domain }: Round): Verdict | StartPlan {
  const ws = state.workload(size.workload);
  const base = { atMs: now, workload: size.workload, from: size.replicas, observationSeq: newest.seq, observation: newest, operation: null };
  if (!size.active) {
    const decision = { ...base, to: size.replicas, label: '', reason: `${size.workload} is not defined or retired`, desiredPerSignal: [], outcome: 'no-change' as const };
    return { ws, code: 'not-active', decision, extra: { recommended: null, stabilized: null } };
  }
  for (const o of state.carried.observations) {
    if (o.seq > ws.notedSeq && o.seq !== newest.seq) ws.autoscale = noteRecommendation(domain, ws.autoscale, toDomain(o, size.replicas), o.receivedAtMs);
  }
  ws.notedSeq = Math.max(ws.notedSeq, ...state.carried.observations.map((o) => o.seq));
  const previous = ws.autoscale;
  const { decision, state: next } = decideScale(domain, previous, toDomain(newest, size.replicas), now, { changeIntervals: intervals });
  const perSignal = desiredFromSignals(domain, toDomain(newest, size.replicas)).perSignal;
  const extra = { recommended: decision.recommended, stabilized: decision.stabilized };
  // The cooldown runs from the end of a completed change (operationEnded), not from a start attempt.
  ws.autoscale = { ...next, lastChangeAtMs: previous.lastChangeAtMs };
  const noChange = (code: AutoscalerCode, to: number, reason: string): Verdict =>
    ({ ws, code, decision: { ...base, to, label: '', reason, desiredPerSignal: perSignal, outcome: 'no-change' }, extra });
  if (decision.action === 'none') {
    ws.waiting = null;
    return noChange(decision.code, decision.to, decision.reason);
  }
  const key = `${decision.action} ${decision.from} → ${decision.to}`;
  if (ws.backoff && ws.backoff.key === key && now < ws.backoff.untilMs) {
    return noChange('backing-off', decision.from, `${key} was refused; not retried before ${new Date(ws.backoff.untilMs).toISOString()} unless the inputs change (${decision.reason})`);
  }
  // A stream job's count is bounded by maxParallelism and its source partitions.
  const to = size.stream ? Math.min(decision.to, size.stream.bound) : decision.to;
  if (to === decision.from) {
    return noChange('bounded', to, `${decision.reason}; ${size.workload} runs at most ${size.stream!.bound} ${size.stream!.operator} subtasks (${size.stream!.boundBy})`);
  }
  // Every tier workload is sized by its replicas but a stream job, by its keyed aggregate (size.stream).
  const choice = chooseScale({ door: 'autoscaler', workload: size.workload, kind: size.stream ? 'stream' : 'service', current: decision.from, target: to });
  if (isRefusal(choice)) return noChange('bounded', decision.from, choice.message);
  const reason = `autoscale ${state.tier}: ${decision.reason}`.slice(0, 500);
  const p = state.policy;
  // A stream job through rescaleOperator: hot for an integer factor, the replan once otherwise.
  const [workflow, args]: [RunningOperation['kind'], Record<string, unknown>] = size.stream
    ? ['rescaleOperator', { job: size.workload, operator: size.stream.operator, parallelism: to, reason }]
    : choice.workflow === 'scaleOut'
      ? ['scaleOut', { workload: size.workload, replicas: to, reason, soakMs: p.soakMs, ...(p.steps ? { steps: p.steps } : {}) }]
      : ['scaleIn', { workload: size.workload, replicas: to, reason, drainTimeoutMs: p.drainTimeoutMs, minReplicas: p.minReplicas }];
  const summary = size.stream
    ? `autoscale ${state.tier}: rescale ${size.workload}/${size.stream.operator} ${decision.from} → ${to}`
    : `autoscale ${state.tier}: scale ${size.workload} ${decision.from} → ${to}`;
  return { ws, action: decision.action, key, workflowId: choice.workflowId, workflow, args, summary, to, reason: decision.reason, base, desiredPerSignal: perSignal, extra };
}

/** The child could not start: another operation holds the workload; wait for it (backing off). */
export function waitFor(plan: StartPlan, now: number): Verdict {
  const { ws, base, key, workflowId } = plan;
  const attempts = ws.waiting?.attempts ?? 0;
  ws.waiting = { attempts: attempts + 1, untilMs: now + backoffMs(attempts, OPERATION_RETRY_MS), workflowId };
  const reason = `${workflowId} is running; ${key} waits for it (${plan.reason})`;
  return { ws, code: 'operation-running', decision: { ...base, to: base.from, label: '', reason, desiredPerSignal: plan.desiredPerSignal, outcome: 'waiting' }, extra: plan.extra };
}

/** The child started: it runs until operationEnded. */
export function started(state: AutoscalerState, plan: StartPlan, now: number): Verdict {
  const { ws, base, workflowId, to } = plan;
  ws.waiting = null;
  plan.operation = { workload: base.workload, workflowId, kind: plan.workflow, from: base.from, to, startedAtMs: now };
  state.running.push(plan.operation);
  const decision: DecisionRecord = { ...base, to, label: '', reason: plan.reason, desiredPerSignal: plan.desiredPerSignal, operation: workflowId, outcome: 'started' };
  return { ws, code: plan.action, decision, extra: plan.extra };
}

/** A child's end: a change made starts the cooldown; anything else backs the same change off (the refusal to record). */
export function operationEnded(state: AutoscalerState, plan: StartPlan, { status, failure }: ChildEnd, ended: number): Verdict | null {
  const { ws, key, base } = plan;
  state.running.splice(state.running.indexOf(plan.operation!), 1);
  if (status && (status.outcome === 'completed' || status.outcome === 'compensated' || status.outcome === 'replanned')) {
    ws.autoscale = { ...ws.autoscale, lastChangeAtMs: ended };
    ws.backoff = null;
    return null;
  }
  const attempts = ws.backoff?.key === key ? ws.backoff.attempts : 0;
  ws.backoff = { key, attempts: attempts + 1, untilMs: ended + backoffMs(attempts, REFUSAL_BACKOFF_MS) };
  const detail = failure ?? status?.evidenceGap ?? status?.error ?? `ended ${status?.outcome}`;
  const decision: DecisionRecord = {
    atMs: ended, workload: base.workload, from: base.from, to: base.from, label: '',
    reason: `${key} ended ${status?.outcome ?? 'failed'}: ${detail}; retried after ${new Date(ws.backoff.untilMs).toISOString()} or when the inputs change`,
    observationSeq: base.observationSeq, observation: base.observation, desiredPerSignal: plan.desiredPerSignal, operation: plan.workflowId, outcome: status?.outcome ?? 'failed',
  };
  return { ws, code: 'refused', detail, decision, extra: plan.extra };
}
