// Autoscaler policy math (DESIGN.md §4.6, reference/fleet-reconcile-loop.txt). One policy per tier.
// desired = clamp(ceil(load / per-instance), min, max) per signal, the largest wins; then, as in
// Kubernetes' HPA, the recommendation is stabilized over time windows, ignored inside a tolerance
// band, held back by a cooldown and by change windows that forbid scale-in, and limited to a max
// step. Pure and clock-free: its caller passes `nowMs` in and keeps the returned plain-JSON state.
// Called by the autoscaler workflow (workflows/autoscaler.ts), which passes workflow time and carries
// the state across signals and continue-as-new. Tolerance is HPA's: a signal whose load per running
// replica is within ±tolerance of its target asks for the current count. Change windows come either
// as minute-of-day windows in the policy or as precomputed intervals (cron windows are expanded by an
// activity, so this module stays free of any clock or calendar library).
import { z } from 'zod';
import { assertNever } from './assert';

export const SIGNAL = {
  activeUsers: 'activeUsers',
  qps: 'qps',
  cpu: 'cpu',
  queueDepth: 'queueDepth',
} as const;
export type SignalName = (typeof SIGNAL)[keyof typeof SIGNAL];
/** Evaluation order; on equal desired counts the earlier signal is reported. */
export const SIGNAL_ORDER: readonly SignalName[] = [SIGNAL.activeUsers, SIGNAL.qps, SIGNAL.cpu, SIGNAL.queueDepth];

export const SCALE_ACTION = { scaleOut: 'scale-out', scaleIn: 'scale-in', none: 'none' } as const;
export type ScaleAction = (typeof SCALE_ACTION)[keyof typeof SCALE_ACTION];

const MINUTES_PER_DAY = 24 * 60;
const MS_PER_MINUTE = 60_000;
const MS_PER_DAY = MINUTES_PER_DAY * MS_PER_MINUTE;
/** 1970-01-01 (epoch day 0) was a Thursday; days are numbered 0 = Sunday … 6 = Saturday. */
const EPOCH_WEEKDAY = 4;
/** Hard bound on the kept recommendations (besides the time windows), so state stays small. */
export const MAX_RECOMMENDATION_HISTORY = 256;

const PerInstanceSchema = z.object({
  /** load one replica should carry (users, requests/s, queued items) */
  perInstance: z.number().positive(),
});

export const ChangeWindowSchema = z
  .object({
    /** UTC minute of day the window opens (inclusive) */
    startMinuteOfDay: z.int().min(0).max(MINUTES_PER_DAY - 1),
    /** UTC minute of day the window closes (exclusive); below start means it wraps past midnight */
    endMinuteOfDay: z.int().min(0).max(MINUTES_PER_DAY),
    /** UTC weekdays (0 = Sunday) on which the window opens; every day when absent */
    days: z.array(z.int().min(0).max(6)).min(1).optional(),
  })
  .refine((w) => w.startMinuteOfDay !== w.endMinuteOfDay, {
    message: 'a change window needs start ≠ end (use 0–1440 for a whole day)',
    path: ['endMinuteOfDay'],
  });
export type ChangeWindow = z.infer<typeof ChangeWindowSchema>;

export const AutoscalePolicySchema = z
  .object({
    /** the workload (tier) this policy scales */
    workload: z.string().min(1),
    /** replicas 0 is refused (retire instead), so the floor is 1 */
    min: z.int().min(1),
    max: z.int().min(1),
    /** relative change ignored as noise: |desired − current| / current ≤ tolerance → no change */
    tolerance: z.number().min(0).max(1).default(0.1),
    scaleUpStabilizationMs: z.int().min(0).default(0),
    scaleDownStabilizationMs: z.int().min(0).default(300_000),
    /** no change within this long after the previous one */
    cooldownMs: z.int().min(0).default(60_000),
    /** most replicas added or removed by one decision */
    maxStep: z.int().min(1).default(4),
    signals: z
      .object({
        activeUsers: PerInstanceSchema.optional(),
        qps: PerInstanceSchema.optional(),
        /** desired = ceil(current × observed CPU% / targetPercent) */
        cpu: z.object({ targetPercent: z.number().positive() }).optional(),
        queueDepth: PerInstanceSchema.optional(),
      })
      .refine((s) => SIGNAL_ORDER.some((name) => s[name] !== undefined), {
        message: 'at least one signal must be configured',
      }),
    /** while one is open, scale-in is refused (scale-out still allowed) */
    changeWindows: z.array(ChangeWindowSchema).default([]),
  })
  .refine((p) => p.min <= p.max, { message: 'min must be ≤ max', path: ['max'] });
export type AutoscalePolicy = z.infer<typeof AutoscalePolicySchema>;

/** One load observation for a tier, as received by the autoscaler workflow's signal. */
export const AutoscaleObservationSchema = z.object({
  /** replicas running now */
  currentReplicas: z.int().min(0),
  activeUsers: z.number().min(0).optional(),
  qps: z.number().min(0).optional(),
  /** average CPU utilisation across replicas, percent */
  cpuPercent: z.number().min(0).optional(),
  queueDepth: z.number().min(0).optional(),
});
export type AutoscaleObservation = z.infer<typeof AutoscaleObservationSchema>;

export const RecommendationSchema = z.object({ atMs: z.number(), desired: z.int() });
export type Recommendation = z.infer<typeof RecommendationSchema>;

export const AutoscaleStateSchema = z.object({
  /** recent raw recommendations, oldest first, bounded by the longest window and the hard cap */
  recommendations: z.array(RecommendationSchema).default([]),
  /** when the last scale decision was taken (workflow time) */
  lastChangeAtMs: z.number().optional(),
});
export type AutoscaleState = z.infer<typeof AutoscaleStateSchema>;

export function initialAutoscaleState(): AutoscaleState {
  return { recommendations: [] };
}

export interface SignalEstimate {
  signal: SignalName;
  /** the observed figure (for cpu: percent) */
  observed: number;
  /** replicas it asks for, already clamped to [min, max] */
  desired: number;
  /** load per running replica within ±tolerance of the target: asks for the current count */
  withinTolerance: boolean;
}

export interface SignalRecommendation {
  /** the largest per-signal desired count; null when no configured signal was observed */
  desired: number | null;
  signal: SignalName | null;
  perSignal: SignalEstimate[];
}

export function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/**
 * ceil(load / perInstance), forgiving binary floating-point noise: 4.2 / 0.6 is
 * 7.000000000000001 and must ask for 7, not 8.
 */
function replicasFor(load: number, perInstance: number): number {
  return Math.max(0, Math.ceil(load / perInstance - 1e-9));
}

function observedFigure(signal: SignalName, observation: AutoscaleObservation): number | undefined {
  switch (signal) {
    case SIGNAL.activeUsers:
      return observation.activeUsers;
    case SIGNAL.qps:
      return observation.qps;
    case SIGNAL.cpu:
      return observation.cpuPercent;
    case SIGNAL.queueDepth:
      return observation.queueDepth;
    default:
      return assertNever(signal, 'signal');
  }
}

function unclampedDesired(
  signal: SignalName,
  observed: number,
  policy: AutoscalePolicy,
  currentReplicas: number,
): number | undefined {
  switch (signal) {
    case SIGNAL.activeUsers:
    case SIGNAL.qps:
    case SIGNAL.queueDepth: {
      const config = policy.signals[signal];
      return config ? replicasFor(observed, config.perInstance) : undefined;
    }
    case SIGNAL.cpu: {
      const config = policy.signals.cpu;
      return config ? replicasFor(currentReplicas * observed, config.targetPercent) : undefined;
    }
    default:
      return assertNever(signal, 'signal');
  }
}

/** Observed load over what the running replicas should carry (1 = exactly on target). */
function loadRatio(signal: SignalName, observed: number, policy: AutoscalePolicy, currentReplicas: number): number | undefined {
  switch (signal) {
    case SIGNAL.activeUsers:
    case SIGNAL.qps:
    case SIGNAL.queueDepth: {
      const config = policy.signals[signal];
      return config ? observed / (currentReplicas * config.perInstance) : undefined;
    }
    case SIGNAL.cpu: {
      const config = policy.signals.cpu;
      return config ? observed / config.targetPercent : undefined;
    }
    default:
      return assertNever(signal, 'signal');
  }
}

/** Per configured and observed signal: clamp(ceil(load / perInstance), min, max); the largest wins. */
export function desiredFromSignals(policy: AutoscalePolicy, observation: AutoscaleObservation): SignalRecommendation {
  const perSignal: SignalEstimate[] = [];
  for (const signal of SIGNAL_ORDER) {
    const observed = observedFigure(signal, observation);
    // A signal that was not observed says nothing: it must not count as zero load.
    if (observed === undefined || !Number.isFinite(observed) || observed < 0) continue;
    const raw = unclampedDesired(signal, observed, policy, observation.currentReplicas);
    if (raw === undefined) continue;
    const current = observation.currentReplicas;
    const ratio = current > 0 ? loadRatio(signal, observed, policy, current) : undefined;
    const withinTolerance = ratio !== undefined && Math.abs(ratio - 1) <= policy.tolerance + 1e-9;
    perSignal.push({ signal, observed, desired: clamp(withinTolerance ? current : raw, policy.min, policy.max), withinTolerance });
  }
  let best: SignalEstimate | undefined;
  for (const estimate of perSignal) if (!best || estimate.desired > best.desired) best = estimate;
  return { desired: best?.desired ?? null, signal: best?.signal ?? null, perSignal };
}

/** Why a decision came out as it did: the stable part of its reason, for the ledger and dedupe. */
export const DECISION_CODE = {
  scaleOut: 'scale-out',
  scaleIn: 'scale-in',
  withinTolerance: 'within-tolerance',
  atDesired: 'at-desired',
  stabilizing: 'stabilizing',
  changeWindow: 'change-window',
  cooldown: 'cooldown',
  noObservation: 'no-observation',
} as const;
export type DecisionCode = (typeof DECISION_CODE)[keyof typeof DECISION_CODE];

/** A change window as an absolute interval [startMs, endMs), e.g. a cron window expanded by an activity. */
export interface ChangeInterval {
  startMs: number;
  endMs: number;
  /** what opened it, for the reason (e.g. the cron expression) */
  label: string;
}

export interface DecideOptions {
  /** precomputed change windows (scale-in is refused while one contains nowMs) */
  changeIntervals?: readonly ChangeInterval[];
}

export interface ScaleDecision {
  action: ScaleAction;
  code: DecisionCode;
  from: number;
  to: number;
  reason: string;
  /** the signal whose recommendation won; null when none was observed */
  signal: SignalName | null;
  /** this observation's raw recommendation (before stabilization), for the ledger */
  recommended: number | null;
  /** the recommendation after the stabilization windows */
  stabilized: number | null;
}

export interface ScaleDecisionResult {
  decision: ScaleDecision;
  state: AutoscaleState;
}

/** Is `nowMs` inside the change window? Pure calendar arithmetic in UTC (no Date). */
export function inChangeWindow(window: ChangeWindow, nowMs: number): boolean {
  const epochDay = Math.floor(nowMs / MS_PER_DAY);
  const minute = Math.floor((nowMs - epochDay * MS_PER_DAY) / MS_PER_MINUTE);
  const weekday = (((epochDay + EPOCH_WEEKDAY) % 7) + 7) % 7;
  const opensOn = (day: number): boolean => window.days === undefined || window.days.includes(day);
  const { startMinuteOfDay: start, endMinuteOfDay: end } = window;
  if (start < end) return opensOn(weekday) && minute >= start && minute < end;
  // Wraps past midnight: the early-morning part belongs to the window opened the day before.
  return (opensOn(weekday) && minute >= start) || (opensOn((weekday + 6) % 7) && minute < end);
}

function formatMinute(minuteOfDay: number): string {
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${pad(Math.floor(minuteOfDay / 60))}:${pad(minuteOfDay % 60)}`;
}

function describeWindow(window: ChangeWindow): string {
  const days = window.days ? ` on days ${window.days.join(',')}` : '';
  return `${formatMinute(window.startMinuteOfDay)}–${formatMinute(window.endMinuteOfDay)} UTC${days}`;
}

/** Keeps the recommendations any window can still look at, newest last, within the hard cap. */
function pruneHistory(history: Recommendation[], policy: AutoscalePolicy, nowMs: number): Recommendation[] {
  const horizonMs = Math.max(policy.scaleUpStabilizationMs, policy.scaleDownStabilizationMs);
  return history.filter((r) => r.atMs > nowMs - horizonMs || r.atMs === nowMs).slice(-MAX_RECOMMENDATION_HISTORY);
}

/**
 * HPA's stabilization: scale up only to the lowest recommendation of the scale-up window and down
 * only to the highest of the scale-down window, so one spike or one dip does not move the fleet.
 */
function stabilize(history: Recommendation[], current: number, policy: AutoscalePolicy, nowMs: number): number {
  const latest = history[history.length - 1].desired;
  let upBound = latest;
  let downBound = latest;
  for (const r of history) {
    if (r.atMs > nowMs - policy.scaleUpStabilizationMs) upBound = Math.min(upBound, r.desired);
    if (r.atMs > nowMs - policy.scaleDownStabilizationMs) downBound = Math.max(downBound, r.desired);
  }
  return clamp(current, upBound, downBound);
}

export function decideScale(
  policy: AutoscalePolicy,
  state: AutoscaleState,
  observation: AutoscaleObservation,
  nowMs: number,
  options: DecideOptions = {},
): ScaleDecisionResult {
  const from = observation.currentReplicas;
  const recommendation = desiredFromSignals(policy, observation);
  const { signal } = recommendation;
  const none = (code: DecisionCode, reason: string, nextState: AutoscaleState, stabilized: number | null): ScaleDecisionResult => ({
    decision: { action: SCALE_ACTION.none, code, from, to: from, reason, signal, recommended: recommendation.desired, stabilized },
    state: nextState,
  });

  if (recommendation.desired === null) {
    // Unknown load is never turned into a scale decision; history is left as it was.
    return none(DECISION_CODE.noObservation, 'no observation for any configured signal', { ...state, recommendations: pruneHistory(state.recommendations, policy, nowMs) }, null);
  }

  const recommendations = pruneHistory([...state.recommendations, { atMs: nowMs, desired: recommendation.desired }], policy, nowMs);
  const nextState: AutoscaleState = { ...state, recommendations };
  const target = stabilize(recommendations, from, policy, nowMs);
  const why = `${signal} asks for ${recommendation.desired}, stabilized ${target}`;

  if (target === from) {
    if (recommendation.desired !== from) return none(DECISION_CODE.stabilizing, `no change: stabilizing: ${why}, running ${from}`, nextState, target);
    const tolerated = recommendation.perSignal.some((e) => e.withinTolerance && e.desired === from);
    return tolerated
      ? none(DECISION_CODE.withinTolerance, `within tolerance ${policy.tolerance}: ${why}, running ${from}`, nextState, target)
      : none(DECISION_CODE.atDesired, `no change: ${why}, running ${from}`, nextState, target);
  }

  const action = target > from ? SCALE_ACTION.scaleOut : SCALE_ACTION.scaleIn;
  if (action === SCALE_ACTION.scaleIn) {
    const open = policy.changeWindows.find((window) => inChangeWindow(window, nowMs));
    if (open) return none(DECISION_CODE.changeWindow, `scale-in refused: change window ${describeWindow(open)} is open (${why})`, nextState, target);
    const interval = options.changeIntervals?.find((i) => i.startMs <= nowMs && nowMs < i.endMs);
    if (interval) {
      return none(DECISION_CODE.changeWindow, `scale-in refused: change window ${interval.label} is open until ${interval.endMs} (${why})`, nextState, target);
    }
  }

  if (state.lastChangeAtMs !== undefined && nowMs - state.lastChangeAtMs < policy.cooldownMs) {
    const leftMs = policy.cooldownMs - (nowMs - state.lastChangeAtMs);
    return none(DECISION_CODE.cooldown, `cooldown: ${leftMs} ms left after the last change (${why})`, nextState, target);
  }

  const step = Math.min(Math.abs(target - from), policy.maxStep);
  const to = action === SCALE_ACTION.scaleOut ? from + step : from - step;
  const limited = step < Math.abs(target - from) ? `, limited to max step ${policy.maxStep}` : '';
  return {
    decision: {
      action,
      code: action === SCALE_ACTION.scaleOut ? DECISION_CODE.scaleOut : DECISION_CODE.scaleIn,
      from,
      to,
      reason: `${action} ${from} → ${to}: ${why}${limited}`,
      signal,
      recommended: recommendation.desired,
      stabilized: target,
    },
    state: { ...nextState, lastChangeAtMs: nowMs },
  };
}

/**
 * Adds an observation's recommendation to the history at `atMs` without deciding: the autoscaler
 * decides on the newest observation only, but every observation that arrived in between still
 * counts for the stabilization windows (a spike during an operation holds the next scale-in).
 */
export function noteRecommendation(policy: AutoscalePolicy, state: AutoscaleState, observation: AutoscaleObservation, atMs: number): AutoscaleState {
  const { desired } = desiredFromSignals(policy, observation);
  if (desired === null) return state;
  const recommendations = [...state.recommendations, { atMs, desired }].sort((a, b) => a.atMs - b.atMs);
  return { ...state, recommendations: pruneHistory(recommendations, policy, Math.max(atMs, recommendations[recommendations.length - 1].atMs)) };
}

/**
 * The next time after `nowMs` at which the same observation could be decided differently: a
 * recommendation leaving a stabilization window, or the cooldown ending. Null when nothing is
 * pending. The workflow sleeps until then (or the next signal) instead of polling.
 */
export function nextEvaluationAt(policy: AutoscalePolicy, state: AutoscaleState, nowMs: number): number | null {
  const candidates: number[] = [];
  if (state.lastChangeAtMs !== undefined) candidates.push(state.lastChangeAtMs + policy.cooldownMs);
  for (const r of state.recommendations) {
    if (policy.scaleUpStabilizationMs > 0) candidates.push(r.atMs + policy.scaleUpStabilizationMs);
    if (policy.scaleDownStabilizationMs > 0) candidates.push(r.atMs + policy.scaleDownStabilizationMs);
  }
  const future = candidates.filter((t) => t > nowMs);
  return future.length ? Math.min(...future) : null;
}
