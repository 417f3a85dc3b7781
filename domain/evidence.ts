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
  /** supervision (DESIGN.md §3): restarted too often within its agent's window, and its restarts */
  crashLooping?: boolean;
  restarts?: number;
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

/** One judged comparison: what was compared, both figures, the verdict and the rule it was judged by. */
export interface ComparisonRow {
  check: string;
  verdict: 'pass' | 'regression' | 'not measured';
  baseline: number | null;
  after: number | null;
  detail: string;
}

export interface EvidenceComparison {
  verdict: 'pass' | 'regression';
  reasons: string[];
  /** every comparison with its verdict and figures (absent in comparisons recorded before it) */
  rows?: ComparisonRow[];
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

/** How much a figure may grow before it is a regression: more than `growth` times and more than `slack`. */
export interface GrowthTolerance {
  growth: number;
  slack: number;
}

/** A backlog that more than doubles by over 1,000 records after a scale-out: the new size does not keep up. */
export const DEFAULT_BACKLOG_TOLERANCE: GrowthTolerance = { growth: 2, slack: 1_000 };
/** The largest task's resident memory grown by half and by over 64 MiB. */
export const DEFAULT_RSS_TOLERANCE: GrowthTolerance = { growth: 1.5, slack: 64 * 1024 * 1024 };
/** The busiest task's CPU doubled and up by over half a core (percent of one core). */
export const DEFAULT_CPU_TOLERANCE: GrowthTolerance = { growth: 2, slack: 50 };
/**
 * CPU is judged only after a soak this long: a task's CPU is measured over the interval between two
 * of its agent's samples, and a shorter soak may still hold a new process's start.
 */
export const CPU_JUDGED_AFTER_SOAK_MS = 2_000;

export interface ComparisonOptions {
  expectedTasks: number;
  latency?: LatencyTolerance;
  /** judged when given (patch resources-and-backlog-judged); otherwise measured and shown only */
  backlog?: GrowthTolerance;
  rss?: GrowthTolerance;
  cpu?: GrowthTolerance;
}

const MIB = 1024 * 1024;

/** A row judged by a growth tolerance; not judged (no tolerance): a pass that says so; a side not measured: not measured. */
function growthRow(check: string, before: number | null | undefined, now: number | null | undefined, tolerance: GrowthTolerance | undefined, unit: (n: number) => string, extra = ''): ComparisonRow & { reason?: string } {
  if (before === null || before === undefined || now === null || now === undefined) {
    return { check, verdict: 'not measured', baseline: before ?? null, after: now ?? null, detail: `${check} not measured at the baseline or after` };
  }
  const figures = `${unit(before)} → ${unit(now)}${extra}`;
  if (!tolerance) return { check, verdict: 'pass', baseline: before, after: now, detail: `${figures} (shown, not judged here)` };
  const rule = `more than ×${tolerance.growth} and +${unit(tolerance.slack)}`;
  if (now > before * tolerance.growth && now - before > tolerance.slack) {
    return { check, verdict: 'regression', baseline: before, after: now, detail: `${figures}: grew ${rule}`, reason: `${check} grew from ${unit(before)} to ${unit(now)} (${rule})` };
  }
  return { check, verdict: 'pass', baseline: before, after: now, detail: `${figures}: no regression (that is growth of ${rule})` };
}

/**
 * After vs baseline. A regression is something counted, never a guess: new errors, duplicate or
 * extra sink rows, ordering violations, a task not ready, or latency, backlog, memory or CPU grown
 * past their tolerance. Every comparison is a row with its verdict and both figures.
 */
export function compareEvidence(baseline: EvidenceSnapshot, after: EvidenceSnapshot, options: ComparisonOptions): EvidenceComparison {
  const reasons: string[] = [];
  const rows: ComparisonRow[] = [];
  const add = (row: ComparisonRow & { reason?: string }) => {
    const { reason, ...shown } = row;
    rows.push(shown);
    if (row.verdict === 'regression') reasons.push(reason ?? row.detail);
  };
  const errors = after.errors - baseline.errors;
  add({ check: 'errors', verdict: errors > 0 ? 'regression' : 'pass', baseline: baseline.errors, after: after.errors, detail: `${errors > 0 ? errors : 0} new task error(s)`, reason: `${errors} new task error(s)` });
  const notReady = after.ready < options.expectedTasks;
  add({ check: 'tasks ready', verdict: notReady ? 'regression' : 'pass', baseline: baseline.ready, after: after.ready, detail: `${after.ready}/${options.expectedTasks} tasks ready` });
  let conservation: EvidenceComparison['conservation'] = null;
  if (after.sink) {
    const sink = after.sink;
    conservation = { duplicates: sink.duplicates, extra: sink.extra, orderViolations: sink.orderViolations };
    add({ check: 'duplicates', verdict: sink.duplicates > 0 ? 'regression' : 'pass', baseline: baseline.sink?.duplicates ?? null, after: sink.duplicates, detail: `${sink.duplicates} duplicate sink row(s)` });
    add({ check: 'extra sink rows', verdict: sink.extra > 0 ? 'regression' : 'pass', baseline: baseline.sink?.extra ?? null, after: sink.extra, detail: `${sink.extra} sink row(s) with no input record` });
    add({ check: 'ordering', verdict: sink.orderViolations > 0 ? 'regression' : 'pass', baseline: baseline.sink?.orderViolations ?? null, after: sink.orderViolations, detail: `${sink.orderViolations} per-partition ordering violation(s)` });
    // Destination receipts: what the sink received of the source's records (the rest is still in flight, not lost).
    add({ check: 'destination receipts', verdict: 'pass', baseline: baseline.sink?.sinkCount ?? null, after: sink.sinkCount, detail: `${sink.sinkCount} of ${sink.sourceCount} source records received (${sink.missing} not yet)` });
  } else {
    rows.push({ check: 'destination receipts', verdict: 'not measured', baseline: null, after: null, detail: 'no sink audit for this kind of workload' });
  }
  const latencyReasons = options.latency ? latencyRegressions(baseline, after, options.latency) : [];
  for (const [name, before, now] of [['p50', baseline.latencyP50Ms, after.latencyP50Ms], ['p95', baseline.latencyP95Ms, after.latencyP95Ms]] as const) {
    const reason = latencyReasons.find((r) => r.startsWith(name));
    const verdict = before === null || now === null ? 'not measured' : reason ? 'regression' : 'pass';
    add({ check: `latency ${name}`, verdict, baseline: before, after: now, detail: reason ?? (verdict === 'not measured' ? `${name} latency not measured at the baseline or after` : `${before} → ${now} ms${options.latency ? '' : ' (shown, not judged for this kind)'}`), ...(reason ? { reason } : {}) });
  }
  const seconds = (after.atMs - baseline.atMs) / 1000;
  const drainRate = seconds > 0 ? (baseline.backlog - after.backlog) / seconds : 0;
  const drained = seconds > 0 ? `, ${drainRate >= 0 ? 'drained' : 'grew'} ${formatRate(Math.abs(drainRate))}/s over ${Math.round(seconds)} s` : '';
  add(growthRow('backlog', baseline.backlog, after.backlog, options.backlog, (n) => `${Math.round(n)} records`, drained));
  add(growthRow('memory per task', baseline.rssBytesPerTask, after.rssBytesPerTask, options.rss, (n) => `${Math.round(n / MIB)} MiB`));
  add(growthRow('CPU per task', baseline.cpuPercentPerTask, after.cpuPercentPerTask, options.cpu, (n) => `${Math.round(n)} %`));
  const latencyP95Ms = after.latencyP95Ms !== null && baseline.latencyP95Ms !== null ? after.latencyP95Ms - baseline.latencyP95Ms : null;
  return {
    verdict: reasons.length ? 'regression' : 'pass',
    reasons,
    rows,
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

const formatRate = (perSecond: number): string => String(Math.round(perSecond * 10) / 10);
