// What a scale operation judges from what it recorded, as the run's patches ask: a scale-out's
// gates, the loads a scale-in chooses its victims by, its drain deadline and forced stops, and the
// comparison of the evidence after a scale-out or a scale-in with the baseline. Pure functions of
// recorded results, but for the patch questions (each a marker command), asked in the order the
// steps have always asked them.
import {
  baselineHealth, compareEvidence, CPU_JUDGED_AFTER_SOAK_MS, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_CPU_TOLERANCE, DEFAULT_LATENCY_TOLERANCE, DEFAULT_RSS_TOLERANCE, expectedRateAt,
  type ComparisonOptions, type EvidenceComparison, type EvidenceSnapshot,
} from '../domain/evidence';
import { capacityFrom, evaluateScaleOutGates, type FleetCapacity, type GateFacts, type GateReport, type ScaleOutGateInput } from '../domain/gates';
import type { planScaleIn } from '../domain/scale-in';
import type { Workload } from '../protocol';
import { judgedSinceEvidencePatch, judgedSincePatch, regressionDiffers } from './operation';
import {
  BASELINE_TASKS_READY, ERROR_RATE_TESTED, LATENCY_JUDGED, RESOURCES_AND_BACKLOG_JUDGED, THROUGHPUT_TESTED, UNKNOWN_DOWNSTREAM_REFUSED, askPatch,
} from './patches';

/** A scale-out's gates on the facts gathered for the recipients of its proposal. */
export function judgeScaleOutGates(args: {
  workload: Workload; from: number; to: number; baseline: EvidenceSnapshot; recipients: string[];
  facts: GateFacts; accepted: ScaleOutGateInput['accepted'];
  /** the room the plan's fleet had, when preparePlan counted it */
  planned?: FleetCapacity;
}): GateReport {
  const { workload, from, baseline, facts } = args;
  return evaluateScaleOutGates({
    workload, currentReplicas: from, targetReplicas: args.to, capacity: capacityFrom(facts, args.planned), probes: facts.probes,
    recipientRuntimeIds: args.recipients, broker: facts.broker,
    baseline: judgedSinceEvidencePatch(baselineHealth(baseline, from), () => baselineHealth(baseline, from, false), (a, b) => a.ok !== b.ok),
    // Since BASELINE_TASKS_READY: a crash-looping or unready task of the baseline refuses, named.
    ...(askPatch(BASELINE_TASKS_READY) ? { baselineTasks: baseline.tasks } : {}),
    expectedRatePerSec: expectedRateAt(workload.kind, baseline, from, args.to),
    accepted: args.accepted,
    unknownDownstreamPasses: !askPatch(UNKNOWN_DOWNSTREAM_REFUSED),
  });
}

/** The evidence after (a step of) a scale-out against the baseline: `expectedTasks` is the size applied. */
export function compareAfterScaleOut(baseline: EvidenceSnapshot, after: EvidenceSnapshot, args: { expectedTasks: number; kind: Workload['kind']; soakMs: number }): EvidenceComparison {
  // A service's latency (its agent times the readiness path in steady state) is judged against
  // the baseline since patch latency-judged. A consumer's or stream's record latency is not: the
  // partition handover within the soak raises it by design, and would read as a regression.
  const latency = askPatch(LATENCY_JUDGED) && args.kind === 'service' ? DEFAULT_LATENCY_TOLERANCE : undefined;
  // Since patch resources-and-backlog-judged the backlog and the largest task's memory are judged
  // too, and its CPU after a soak long enough not to hold a new process's start.
  const judged = askPatch(RESOURCES_AND_BACKLOG_JUDGED)
    ? { backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE, ...(args.soakMs >= CPU_JUDGED_AFTER_SOAK_MS ? { cpu: DEFAULT_CPU_TOLERANCE } : {}) }
    : {};
  // Since patch evidence-judged: receipts balanced per partition, tasks not measured, latency tested over its samples.
  const options = { expectedTasks: args.expectedTasks, kind: args.kind, latency, ...judged };
  // Since patch error-rate-tested errors are a rate tested over both windows (any new error before).
  const compare = (judgment: Partial<ComparisonOptions>) => compareEvidence(baseline, after, { ...options, ...judgment });
  // Since patch throughput-tested throughput is tested while the workload is behind (no row before).
  const before = { throughputTested: false };
  return judgedSinceEvidencePatch(
    judgedSincePatch(
      ERROR_RATE_TESTED,
      judgedSincePatch(THROUGHPUT_TESTED, compare({}), () => compare(before), regressionDiffers),
      () => compare({ ...before, errorRateTested: false }), regressionDiffers,
    ),
    () => compare({ ...before, evidenceJudged: false, errorRateTested: false }), regressionDiffers,
  );
}

/** What a scale-in chooses its victims by: each replica's partitions, in-flight records and load, from the baseline. */
export function scaleInLoads(current: Parameters<typeof planScaleIn>[0]['current'], baseline: EvidenceSnapshot): Parameters<typeof planScaleIn>[0]['loads'] {
  const evidenceOf = (taskId: string) => baseline.tasks.find((t) => t.taskId === taskId);
  return current.map((a) => ({
    taskId: a.taskId, runtimeId: a.runtimeId, index: a.index,
    ownedPartitions: a.partitions?.length ?? evidenceOf(a.taskId)?.ownedPartitions ?? 0,
    inFlight: evidenceOf(a.taskId)?.inFlight ?? 0,
    load: evidenceOf(a.taskId)?.ratePerSec ?? 0,
  }));
}

/**
 * The evidence after a scale-in against the baseline, judged like a scale-out's (receipts per
 * partition, every partition owned, tasks, errors, a service's latency, backlog and memory).
 */
export function compareAfterScaleIn(baseline: EvidenceSnapshot, after: EvidenceSnapshot, args: { expectedTasks: number; kind: Workload['kind'] }): EvidenceComparison {
  const latency = args.kind === 'service' ? DEFAULT_LATENCY_TOLERANCE : undefined;
  // Since patch error-rate-tested errors are a rate tested over both windows (any new error before).
  // Since patch throughput-tested throughput is tested while the workload is behind (no row before).
  const compare = (errorRateTested: boolean, throughputTested: boolean) => compareEvidence(baseline, after, {
    expectedTasks: args.expectedTasks, kind: args.kind, latency, backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE, errorRateTested, throughputTested,
  });
  return judgedSincePatch(
    ERROR_RATE_TESTED,
    judgedSincePatch(THROUGHPUT_TESTED, compare(true, true), () => compare(true, false), regressionDiffers),
    () => compare(false, false), regressionDiffers,
  );
}

/** A process task's grace period is honoured: the drain deadline is never shorter than it (plus time to report). */
export function drainDeadlineMs(requestedMs: number, workload: Workload): number {
  const graceMs = workload.kind === 'service' ? (workload.spec as { graceMs?: number }).graceMs ?? 0 : 0;
  return Math.max(requestedMs, graceMs + 5_000);
}

/** The drained tasks that had to be killed: they did not stop within their grace period. */
export function forcedStops(receipts: readonly { taskId: string; receipt?: Record<string, unknown> }[]): string[] {
  return receipts.filter((r) => r.receipt?.forced === true).map((r) => r.taskId);
}
