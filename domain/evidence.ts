// Evidence: snapshots of a workload's tasks and the comparison after a change, with a verdict.
// Counting is the proof: conservation (in = out), duplicates, ordering, then backlog/latency/error deltas.

export interface TaskEvidence {
  taskId: string;
  runtimeId: string;
  incarnation: string | null;
  state: string;
  processed: number;
  /** since the task started */
  errors: number;
  /** within the agent's error window; absent from agents (and recorded histories) before it existed */
  recentErrors?: number;
  backlog: number;
  /** what victim choice reads: partitions owned, work in flight, recent rate */
  ownedPartitions: number;
  inFlight: number;
  ratePerSec: number;
  /** a task that is a process of its own (a service): its CPU (100 = one core) and resident memory */
  cpuPercent?: number;
  rssBytes?: number;
}

export interface EvidenceSnapshot {
  atMs: number;
  tasks: TaskEvidence[];
  ready: number;
  processed: number;
  ratePerSec: number;
  latencyP50Ms: number | null;
  latencyP95Ms: number | null;
  backlog: number;
  errors: number;
  /** the tasks' errors within their agents' error window: the current error rate */
  recentErrors?: number;
  /** the busiest task's CPU (100 = one core) and the largest task's resident memory; null: no task reports them */
  cpuPercentPerTask?: number | null;
  rssBytesPerTask?: number | null;
  /** a service in its own Kafka consumer group: the broker's view of it (its lag is the backlog), or why it could not be read */
  group?: { group: string; topic: string; state: string; members: number; partitions: number; unassigned: number[]; lag: number } | { group: string; topic: string; error: string };
  /** consumer workloads: what the sink audit counted */
  sink?: { sourceCount: number; sinkCount: number; missing: number; duplicates: number; extra: number; orderViolations: number };
}

export interface EvidenceComparison {
  verdict: 'pass' | 'regression';
  reasons: string[];
  deltas: {
    processed: number;
    errors: number;
    backlog: number;
    latencyP95Ms: number | null;
    ratePerSec: number;
  };
  conservation: { duplicates: number; extra: number; orderViolations: number } | null;
}

/**
 * Is the baseline healthy enough to scale from? Errors now (within the agents' error window) say
 * no; an old transient error does not. A workload with no replica has nothing to judge. Snapshots
 * without a recent count (recorded before it existed) are judged by every error, as they were then.
 */
export function baselineHealth(baseline: EvidenceSnapshot, fromReplicas: number): { ok: boolean; detail: string } {
  const current = baseline.recentErrors ?? baseline.errors;
  if (current === 0 || fromReplicas === 0) return { ok: true, detail: `baseline captured: ${baseline.ready} ready task(s)` };
  if (baseline.recentErrors === undefined) return { ok: false, detail: `baseline has ${baseline.errors} task error(s)` };
  return { ok: false, detail: `baseline has ${current} task error(s) within the agents' error window (${baseline.errors} since the tasks started)` };
}

/**
 * The rate the downstream should expect at `to` replicas: the measured rate grown with the replicas
 * (the most the new ones can add). Only consumers and streams count their records; a service's
 * rate, and a workload with no replica yet, are unknown.
 */
export function expectedRateAt(kind: string, baseline: EvidenceSnapshot, from: number, to: number): number | undefined {
  if (kind === 'service' || from === 0) return undefined;
  return (baseline.ratePerSec * to) / from;
}

/**
 * How much latency may grow before a change is a regression: both more than `growth` times the
 * baseline and more than the slack in milliseconds (the slack keeps a few ms of noise on a fast
 * endpoint, or an agent's own event-loop lag on a loaded node (66 ms seen), from reading as a
 * doubling). p95 gets the larger slack: it rests on the fewest samples.
 */
export interface LatencyTolerance {
  growth: number;
  p50SlackMs: number;
  p95SlackMs: number;
}

export const DEFAULT_LATENCY_TOLERANCE: LatencyTolerance = { growth: 1.5, p50SlackMs: 100, p95SlackMs: 300 };

/** The latency rows that regressed, each naming both figures; a side not measured is not judged. */
export function latencyRegressions(baseline: EvidenceSnapshot, after: EvidenceSnapshot, tolerance: LatencyTolerance): string[] {
  const rows: [string, number | null, number | null, number][] = [
    ['p50', baseline.latencyP50Ms, after.latencyP50Ms, tolerance.p50SlackMs],
    ['p95', baseline.latencyP95Ms, after.latencyP95Ms, tolerance.p95SlackMs],
  ];
  return rows
    .filter(([, before, now, slack]) => before !== null && now !== null && now > before * tolerance.growth && now - before > slack)
    .map(([name, before, now]) => `${name} latency grew from ${before} to ${now} ms (more than ×${tolerance.growth} and +${name === 'p50' ? tolerance.p50SlackMs : tolerance.p95SlackMs} ms)`);
}

/**
 * After vs baseline. A regression is something counted, never a guess: new errors, duplicate or
 * extra sink rows, ordering violations, a task not ready, or latency grown past the tolerance.
 */
export function compareEvidence(
  baseline: EvidenceSnapshot,
  after: EvidenceSnapshot,
  options: { expectedTasks: number; latency?: LatencyTolerance },
): EvidenceComparison {
  const reasons: string[] = [];
  const errors = after.errors - baseline.errors;
  if (errors > 0) reasons.push(`${errors} new task error(s)`);
  if (after.ready < options.expectedTasks) reasons.push(`${after.ready}/${options.expectedTasks} tasks ready`);
  let conservation: EvidenceComparison['conservation'] = null;
  if (after.sink) {
    conservation = { duplicates: after.sink.duplicates, extra: after.sink.extra, orderViolations: after.sink.orderViolations };
    if (after.sink.duplicates > 0) reasons.push(`${after.sink.duplicates} duplicate sink row(s)`);
    if (after.sink.extra > 0) reasons.push(`${after.sink.extra} sink row(s) with no input record`);
    if (after.sink.orderViolations > 0) reasons.push(`${after.sink.orderViolations} per-partition ordering violation(s)`);
  }
  const latencyP95Ms = after.latencyP95Ms !== null && baseline.latencyP95Ms !== null ? after.latencyP95Ms - baseline.latencyP95Ms : null;
  if (options.latency) reasons.push(...latencyRegressions(baseline, after, options.latency));
  return {
    verdict: reasons.length ? 'regression' : 'pass',
    reasons,
    deltas: {
      processed: after.processed - baseline.processed,
      errors,
      backlog: after.backlog - baseline.backlog,
      latencyP95Ms,
      ratePerSec: after.ratePerSec - baseline.ratePerSec,
    },
    conservation,
  };
}
