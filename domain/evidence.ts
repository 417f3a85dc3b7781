// Evidence: snapshots of a workload's tasks and the comparison after a change, with a verdict.
// Counting is the proof: conservation (in = out), duplicates, ordering, then backlog/latency/error deltas.
import { judgeErrorRate, judgeNonInferior, type Guardrail } from './mann-whitney';

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
  /** why this task could not be measured (its agent did not answer, or does not host it): its zeros are no figures */
  unmeasured?: string;
  /** supervision (DESIGN.md §3): restarted too often within its agent's window, and its restarts */
  crashLooping?: boolean;
  restarts?: number;
}

/**
 * A consumer partition at one instant (one database snapshot): its source records, its committed
 * offset (the last processed one; -1 none) and the source records at or below it, the sink rows at
 * or below it and above it, and its stored owner.
 */
export interface PartitionReceipt {
  partition: number;
  source: number;
  committedOffset: number;
  /** source records at or below the committed offset: what left the source for good */
  committedRecords: number;
  /** sink rows at or below the committed offset */
  received: number;
  /** sink rows above the committed offset: received but not committed (a later owner reads them again) */
  aboveCommit: number;
  /** the task its offsets row names as owner (null: released, or never acquired) */
  owner: string | null;
}

/** What conservation is judged from: every partition's receipts and who may own them. */
export interface Receipts {
  partitions: PartitionReceipt[];
  /** partitions 0 … declared − 1 must each have an owner among `placedTasks` (null: the count is not known here) */
  declared: number | null;
  /** the tasks of the placement when the receipts were read */
  placedTasks: string[];
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
  /** consumer workloads with a source table: per-partition receipts against the committed offsets */
  receipts?: Receipts;
  /** stream jobs: the sink against the source records the last completed checkpoint covers, at one instant */
  checkpointAudit?: { coveredSourceRows: number; sinkTotal: number; rowsAboveCheckpoint: number; checkpoint: number | null };
  /** the tasks' latency samples within their agents' window (ms; absent from agents before they reported them) */
  latencySamplesMs?: number[];
  /**
   * the workload's records per second in each whole sample interval of the window, every reporting
   * task's counts summed (absent: no task reported throughput samples, e.g. a service)
   */
  throughputSamples?: number[];
}

/** One judged comparison: what was compared, both figures, the verdict and the rule it was judged by. */
export interface ComparisonRow {
  check: string;
  /**
   * `not measured`: a side could not be measured (an agent did not answer, a task was absent);
   * `not judged`: the check does not apply to this kind of workload, or a tolerance was not asked
   * for; `not enough samples`: too few samples on a side for the statistical test. None is a pass.
   */
  verdict: RowVerdict;
  baseline: number | null;
  after: number | null;
  detail: string;
}

export type RowVerdict = 'pass' | 'regression' | 'not measured' | 'not judged' | 'not enough samples';

export interface EvidenceComparison {
  /**
   * `regression`: some row failed; `not measured`: none failed but a row that must be judged (errors,
   * tasks ready, destination receipts) could not be, so this is no pass; `pass`: every such row passed.
   */
  verdict: 'pass' | 'regression' | 'not measured';
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
 * Is the baseline healthy enough to scale from? Every task placed must be measured and ready: one
 * its agent did not answer for, one absent from its agent, or one not ready says no, naming it.
 * Errors now (within the agents' error window) say no; an old transient error does not. A workload
 * with no replica has nothing to judge. Snapshots without a recent count (recorded before it
 * existed) are judged by every error, as they were then. `tasksJudged` false: the judgment before
 * tasks were (runs recorded before patch evidence-judged).
 */
export function baselineHealth(baseline: EvidenceSnapshot, fromReplicas: number, tasksJudged = true): { ok: boolean; detail: string } {
  if (fromReplicas === 0) return { ok: true, detail: `baseline captured: ${baseline.ready} ready task(s)` };
  const unhealthy = tasksJudged ? baseline.tasks.filter((t) => t.unmeasured !== undefined || t.state !== 'ready') : [];
  if (unhealthy.length) {
    return { ok: false, detail: `baseline not healthy: ${unhealthy.length} of ${baseline.tasks.length} task(s) not ready or not measured: ${unhealthy.map(describeTask).join('; ')}` };
  }
  const current = baseline.recentErrors ?? baseline.errors;
  if (current === 0) return { ok: true, detail: `baseline captured: ${baseline.ready} ready task(s)` };
  if (baseline.recentErrors === undefined) return { ok: false, detail: `baseline has ${baseline.errors} task error(s)` };
  return { ok: false, detail: `baseline has ${current} task error(s) within the agents' error window (${baseline.errors} since the tasks started)` };
}

/** A task as a judgment names it: its id, runtime and state, or why it was not measured. */
const describeTask = (t: TaskEvidence): string => `${t.taskId} on ${t.runtimeId} ${t.unmeasured ?? t.state}`;

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
  /** the workload's kind: which rows apply (a service has no destination the control plane counts) */
  kind?: 'service' | 'consumer' | 'stream';
  latency?: LatencyTolerance;
  /** judged when given (patch resources-and-backlog-judged); otherwise shown, not judged */
  backlog?: GrowthTolerance;
  rss?: GrowthTolerance;
  cpu?: GrowthTolerance;
  /**
   * false: the judgment of runs recorded before patch evidence-judged (receipts always pass, latency
   * by its fixed multipliers even where samples exist, unmeasured tasks read as zeros, and the
   * verdict only pass or regression). Default true.
   */
  evidenceJudged?: boolean;
  /**
   * false: the judgment of runs recorded before patch error-rate-tested (any new error fails).
   * Default true: where both windows processed records, errors per record are compared by an exact
   * test at the error-rate guardrail's margin.
   */
  errorRateTested?: boolean;
  /**
   * false: the judgment of runs recorded before patch throughput-tested (no throughput row); true
   * (the default): throughput is tested over both windows' samples while the workload is behind.
   */
  throughputTested?: boolean;
}

/** Latency may not rise by more than 10 % (non-inferiority margin of the Mann-Whitney test). */
export const LATENCY_GUARDRAIL: Guardrail = { margin: 0.1, worse: 'higher' };

const MIB = 1024 * 1024;

type JudgedRow = ComparisonRow & { reason?: string };

/** A row judged by a growth tolerance; no tolerance: not judged (its figures shown); a side not measured: not measured. */
function growthRow(check: string, before: number | null | undefined, now: number | null | undefined, tolerance: GrowthTolerance | undefined, unit: (n: number) => string, extra = ''): JudgedRow {
  if (before === null || before === undefined || now === null || now === undefined) {
    return { check, verdict: 'not measured', baseline: before ?? null, after: now ?? null, detail: `${check} not measured at the baseline or after` };
  }
  const figures = `${unit(before)} → ${unit(now)}${extra}`;
  if (!tolerance) return { check, verdict: 'not judged', baseline: before, after: now, detail: `${figures} (shown, not judged here)` };
  const rule = `more than ×${tolerance.growth} and +${unit(tolerance.slack)}`;
  if (now > before * tolerance.growth && now - before > tolerance.slack) {
    return { check, verdict: 'regression', baseline: before, after: now, detail: `${figures}: grew ${rule}`, reason: `${check} grew from ${unit(before)} to ${unit(now)} (${rule})` };
  }
  return { check, verdict: 'pass', baseline: before, after: now, detail: `${figures}: no regression (that is growth of ${rule})` };
}

/**
 * The errors row as a rate: each window's errors per record it processed. The baseline window is the
 * baseline's tasks since they started; the after window is what each task of the after snapshot
 * added since the baseline (a task new since, or restarted as a new incarnation, adds all of its
 * figures). null where a window processed nothing: then any new error fails, as before.
 */
export function errorRateRow(baseline: EvidenceSnapshot, after: EvidenceSnapshot): JudgedRow | null {
  const before = { errors: sumOf(baseline.tasks, (t) => t.errors), exposure: sumOf(baseline.tasks, (t) => t.processed) };
  const added = { errors: 0, exposure: 0 };
  for (const task of after.tasks) {
    const was = baseline.tasks.find((t) => t.taskId === task.taskId && t.incarnation !== null && t.incarnation === task.incarnation);
    added.errors += Math.max(0, task.errors - (was?.errors ?? 0));
    added.exposure += Math.max(0, task.processed - (was?.processed ?? 0));
  }
  if (before.exposure === 0 || added.exposure === 0) return null;
  const test = judgeErrorRate(before, added);
  return {
    check: 'errors', verdict: test.verdict, baseline: baseline.errors, after: after.errors, detail: `${added.errors} new task error(s); ${test.detail}`,
    reason: `${added.errors} new task error(s): ${test.detail}`,
  };
}

const sumOf = <T>(list: readonly T[], figure: (item: T) => number) => list.reduce((n, item) => n + figure(item), 0);

const unmeasuredTasks = (snapshot: EvidenceSnapshot) => snapshot.tasks.filter((t) => t.unmeasured !== undefined);

/**
 * Destination receipts (conservation): per partition, the sink rows equal the source records up to
 * the committed offset, none is received above it, and every declared partition has an owner among
 * the placed tasks; the window's figures (what left the source, what reached the sink, what is in
 * flight) are stated. A stream job: the sink equals what its last completed checkpoint covers.
 * A service has no destination the control plane counts: not judged. A consumer or stream whose
 * sink could not be audited: not measured.
 */
export function receiptsRow(before: EvidenceSnapshot, after: EvidenceSnapshot, kind?: ComparisonOptions['kind']): JudgedRow {
  const check = 'destination receipts';
  const receipts = after.receipts;
  if (receipts) {
    const problems: string[] = [];
    for (const p of receipts.partitions) {
      if (p.received !== p.committedRecords) problems.push(`partition ${p.partition}: ${p.received} sink row(s) for the ${p.committedRecords} source record(s) up to its committed offset ${p.committedOffset} (${p.committedRecords - p.received > 0 ? `${p.committedRecords - p.received} lost` : `${p.received - p.committedRecords} extra`})`);
      if (p.aboveCommit > 0) problems.push(`partition ${p.partition}: ${p.aboveCommit} sink row(s) above its committed offset ${p.committedOffset} (received, never committed: the next owner reads them again)`);
    }
    if (receipts.declared !== null) {
      const placed = new Set(receipts.placedTasks);
      const byPartition = new Map(receipts.partitions.map((p) => [p.partition, p]));
      const unowned: string[] = [];
      for (let partition = 0; partition < receipts.declared; partition++) {
        const owner = byPartition.get(partition)?.owner ?? null;
        if (owner === null || !placed.has(owner)) unowned.push(owner === null ? `partition ${partition} has no owner` : `partition ${partition} has no owner among the placed tasks (still ${owner}'s)`);
      }
      problems.push(...unowned);
    }
    const sum = (list: PartitionReceipt[] | undefined, figure: (p: PartitionReceipt) => number) => (list ?? []).reduce((n, p) => n + figure(p), 0);
    const received = sum(receipts.partitions, (p) => p.received + p.aboveCommit);
    const committed = sum(receipts.partitions, (p) => p.committedRecords);
    const inFlight = sum(receipts.partitions, (p) => p.source - p.committedRecords);
    const window = before.receipts
      ? `over the window ${committed - sum(before.receipts.partitions, (p) => p.committedRecords)} record(s) left the source (committed offsets) and ${received - sum(before.receipts.partitions, (p) => p.received + p.aboveCommit)} reached the sink`
      : 'no receipts at the baseline';
    const figures = `${window}; ${inFlight} in flight above the committed offsets`;
    if (problems.length) {
      return { check, verdict: 'regression', baseline: before.receipts ? sum(before.receipts.partitions, (p) => p.received + p.aboveCommit) : null, after: received, detail: `${problems.join('; ')} (${figures})`, reason: `destination receipts do not balance: ${problems.join('; ')}` };
    }
    return { check, verdict: 'pass', baseline: before.receipts ? sum(before.receipts.partitions, (p) => p.received + p.aboveCommit) : null, after: received, detail: `every one of ${receipts.partitions.length} partition(s) balances and is owned: ${figures}` };
  }
  const audit = after.checkpointAudit;
  if (audit) {
    const balanced = audit.sinkTotal === audit.coveredSourceRows && audit.rowsAboveCheckpoint === 0;
    const figures = `the sink holds ${audit.sinkTotal} of the ${audit.coveredSourceRows} source record(s) checkpoint ${audit.checkpoint ?? 'none'} covers, ${audit.rowsAboveCheckpoint} row(s) above it`;
    return balanced
      ? { check, verdict: 'pass', baseline: before.checkpointAudit?.sinkTotal ?? null, after: audit.sinkTotal, detail: figures }
      : { check, verdict: 'regression', baseline: before.checkpointAudit?.sinkTotal ?? null, after: audit.sinkTotal, detail: `does not balance: ${figures}`, reason: `destination receipts do not balance: ${figures}` };
  }
  if (kind === 'service') return { check, verdict: 'not judged', baseline: null, after: null, detail: 'a service has no destination the control plane counts' };
  return { check, verdict: 'not measured', baseline: null, after: null, detail: after.sink ? `${after.sink.sinkCount} of ${after.sink.sourceCount} source records in the sink, but no committed offsets to balance them against` : 'no sink audit (a Kafka source, or no tables yet)' };
}

/**
 * After vs baseline. A regression is something counted or tested, never a guess: new errors, a task
 * not ready, duplicate or extra sink rows, ordering violations, receipts that do not balance or a
 * partition with no owner, latency worse beyond its margin (Mann-Whitney U over both windows'
 * samples; the fixed multipliers only where no samples exist, saying so), backlog, memory or CPU
 * grown past their tolerance. Every comparison is a row with its verdict and both figures. What
 * could not be measured is `not measured`, and a row that does not apply is `not judged`: neither is
 * a pass.
 */
export function compareEvidence(baseline: EvidenceSnapshot, after: EvidenceSnapshot, options: ComparisonOptions): EvidenceComparison {
  const judged = options.evidenceJudged ?? true;
  const reasons: string[] = [];
  const rows: ComparisonRow[] = [];
  /** rows a pass needs: without them measured, the verdict is `not measured` */
  let unknown = false;
  const add = (row: JudgedRow, required = false) => {
    const { reason, ...shown } = row;
    rows.push(shown);
    if (row.verdict === 'regression') reasons.push(reason ?? row.detail);
    if (required && row.verdict === 'not measured') unknown = true;
  };
  const errors = after.errors - baseline.errors;
  const unmeasured = judged ? [...unmeasuredTasks(baseline).map((t) => `at the baseline ${describeTask(t)}`), ...unmeasuredTasks(after).map((t) => `after ${describeTask(t)}`)] : [];
  const rate = (options.errorRateTested ?? true) ? errorRateRow(baseline, after) : null;
  if (rate && !unmeasured.length) {
    add(rate);
  } else if (errors > 0 || !unmeasured.length) {
    add({ check: 'errors', verdict: errors > 0 ? 'regression' : 'pass', baseline: baseline.errors, after: after.errors, detail: `${errors > 0 ? errors : 0} new task error(s)${unmeasured.length ? `; not measured: ${unmeasured.join('; ')}` : ''}`, reason: `${errors} new task error(s)` });
  } else {
    add({ check: 'errors', verdict: 'not measured', baseline: baseline.errors, after: after.errors, detail: `errors not measured: ${unmeasured.join('; ')}` }, true);
  }
  const notReady = after.ready < options.expectedTasks;
  const unready = judged ? after.tasks.filter((t) => t.state !== 'ready').map(describeTask) : [];
  add({ check: 'tasks ready', verdict: notReady ? 'regression' : 'pass', baseline: baseline.ready, after: after.ready, detail: `${after.ready}/${options.expectedTasks} tasks ready${notReady && unready.length ? `: ${unready.join('; ')}` : ''}` });
  let conservation: EvidenceComparison['conservation'] = null;
  if (after.sink) {
    const sink = after.sink;
    conservation = { duplicates: sink.duplicates, extra: sink.extra, orderViolations: sink.orderViolations };
    add({ check: 'duplicates', verdict: sink.duplicates > 0 ? 'regression' : 'pass', baseline: baseline.sink?.duplicates ?? null, after: sink.duplicates, detail: `${sink.duplicates} duplicate sink row(s)` });
    add({ check: 'extra sink rows', verdict: sink.extra > 0 ? 'regression' : 'pass', baseline: baseline.sink?.extra ?? null, after: sink.extra, detail: `${sink.extra} sink row(s) with no input record` });
    add({ check: 'ordering', verdict: sink.orderViolations > 0 ? 'regression' : 'pass', baseline: baseline.sink?.orderViolations ?? null, after: sink.orderViolations, detail: `${sink.orderViolations} per-partition ordering violation(s)` });
  }
  if (judged) add(receiptsRow(baseline, after, options.kind), options.kind === 'consumer' || options.kind === 'stream');
  else if (after.sink) rows.push({ check: 'destination receipts', verdict: 'not judged', baseline: baseline.sink?.sinkCount ?? null, after: after.sink.sinkCount, detail: `${after.sink.sinkCount} of ${after.sink.sourceCount} source records received (not judged before patch evidence-judged)` });
  else rows.push({ check: 'destination receipts', verdict: 'not measured', baseline: null, after: null, detail: 'no sink audit for this kind of workload' });
  for (const row of latencyRows(baseline, after, options.latency, judged)) add(row);
  const throughput = (options.throughputTested ?? true) ? throughputRow(baseline, after) : null;
  if (throughput) add(throughput);
  const seconds = (after.atMs - baseline.atMs) / 1000;
  const drainRate = seconds > 0 ? (baseline.backlog - after.backlog) / seconds : 0;
  const drained = seconds > 0 ? `, ${drainRate >= 0 ? 'drained' : 'grew'} ${formatRate(Math.abs(drainRate))}/s over ${Math.round(seconds)} s` : '';
  add(growthRow('backlog', baseline.backlog, after.backlog, options.backlog, (n) => `${Math.round(n)} records`, drained));
  add(growthRow('memory per task', baseline.rssBytesPerTask, after.rssBytesPerTask, options.rss, (n) => `${Math.round(n / MIB)} MiB`));
  add(growthRow('CPU per task', baseline.cpuPercentPerTask, after.cpuPercentPerTask, options.cpu, (n) => `${Math.round(n)} %`));
  const latencyP95Ms = after.latencyP95Ms !== null && baseline.latencyP95Ms !== null ? after.latencyP95Ms - baseline.latencyP95Ms : null;
  return {
    verdict: reasons.length ? 'regression' : unknown ? 'not measured' : 'pass',
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

/**
 * Latency: where both windows hold samples (and the kind's latency is judged), one `latency` row by
 * the Mann-Whitney test at its margin, p50 and p95 shown beside it; without samples, or too few for
 * the test (its row says `not enough samples`), p50 and p95 by the fixed multipliers, saying so. A
 * kind whose latency is not judged: its figures, not judged.
 */
function latencyRows(baseline: EvidenceSnapshot, after: EvidenceSnapshot, tolerance: LatencyTolerance | undefined, judged: boolean): JudgedRow[] {
  const rows: JudgedRow[] = [];
  const before = baseline.latencySamplesMs;
  const now = after.latencySamplesMs;
  const tested = judged && tolerance !== undefined && before !== undefined && now !== undefined && before.length > 0 && now.length > 0;
  let judgedByTest = false;
  let fixedRule = ' (fixed multiplier: no samples to test)';
  if (tested) {
    const test = judgeNonInferior(before, now, LATENCY_GUARDRAIL);
    rows.push({
      check: 'latency', verdict: test.verdict, baseline: median(before), after: median(now), detail: `medians ${median(before)} → ${median(now)} ms; ${test.detail}`,
      reason: `latency ${test.detail}`,
    });
    judgedByTest = test.verdict !== 'not enough samples';
    fixedRule = ` (fixed multiplier: too few samples for the test, n = ${before.length} before, ${now.length} after)`;
  }
  const fixed = tolerance && !judgedByTest ? latencyRegressions(baseline, after, tolerance) : [];
  for (const [name, first, second] of [['p50', baseline.latencyP50Ms, after.latencyP50Ms], ['p95', baseline.latencyP95Ms, after.latencyP95Ms]] as const) {
    const check = `latency ${name}`;
    if (first === null || second === null) {
      rows.push({ check, verdict: 'not measured', baseline: first, after: second, detail: `${name} latency not measured at the baseline or after` });
      continue;
    }
    const figures = `${first} → ${second} ms`;
    if (!tolerance) {
      rows.push({ check, verdict: judged ? 'not judged' : 'pass', baseline: first, after: second, detail: `${figures} (shown, not judged for this kind)` });
    } else if (judgedByTest) {
      rows.push({ check, verdict: 'not judged', baseline: first, after: second, detail: `${figures} (shown: the latency row's test judges the samples)` });
    } else {
      const reason = fixed.find((r) => r.startsWith(name));
      const rule = judged ? fixedRule : '';
      rows.push(reason
        ? { check, verdict: 'regression', baseline: first, after: second, detail: `${reason}${rule}`, reason }
        : { check, verdict: 'pass', baseline: first, after: second, detail: `${figures}${rule}` });
    }
  }
  return rows;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const formatRate = (perSecond: number): string => String(Math.round(perSecond * 10) / 10);

/** A throughput guardrail: the after window's records per second may fall below the baseline's by at most 10 %. */
export const THROUGHPUT_GUARDRAIL: Guardrail = { margin: 0.1, worse: 'lower' };
/**
 * A workload at least this many seconds of work behind (backlog ÷ rate) is saturated: its rate is
 * its capacity, not the offered load. Throughput is judged only where both windows end saturated.
 */
export const SATURATED_BACKLOG_SECONDS = 1;

/**
 * The workload's throughput samples over a window: records per second in each whole interval that
 * lies within the last `windowMs` and that every reporting task covers (a task reports only
 * intervals since it started), each task's counts summed. `perTask` holds each task's
 * [age in ms of the interval's end, records] pairs; ages, not times: no agent clock is trusted.
 */
export function throughputSamplesOf(perTask: readonly (readonly (readonly [number, number])[])[], windowMs: number, intervalMs: number): number[] {
  if (perTask.length === 0) return [];
  const sums = new Map<number, { records: number; tasks: number }>();
  for (const samples of perTask) {
    for (const [ageMs, records] of samples) {
      if (ageMs + intervalMs > windowMs) continue; // began before the window
      const slot = Math.round(ageMs / intervalMs);
      const sum = sums.get(slot) ?? { records: 0, tasks: 0 };
      sums.set(slot, { records: sum.records + records, tasks: sum.tasks + 1 });
    }
  }
  return [...sums.entries()].filter(([, sum]) => sum.tasks === perTask.length).sort(([a], [b]) => b - a)
    .map(([, sum]) => Math.round((sum.records * 1000 / intervalMs) * 10) / 10);
}

/**
 * The throughput row: where both windows hold samples, the after window's records per second must
 * not fall below the baseline's beyond the margin (Mann-Whitney U, non-inferiority). Judged only
 * where both windows end saturated (SATURATED_BACKLOG_SECONDS of work behind): otherwise the rate is
 * the offered load's, and the backlog row judges keeping up. No row where nothing was sampled.
 */
export function throughputRow(baseline: EvidenceSnapshot, after: EvidenceSnapshot): JudgedRow | null {
  const before = baseline.throughputSamples;
  const now = after.throughputSamples;
  if (!before || !now) return null;
  const beforeMedian = before.length ? median(before) : null;
  const afterMedian = now.length ? median(now) : null;
  const figures = `medians ${beforeMedian ?? 'none'} → ${afterMedian ?? 'none'} records/s`;
  const behind = (s: EvidenceSnapshot) => s.backlog > 0 && s.backlog >= SATURATED_BACKLOG_SECONDS * Math.max(1, s.ratePerSec);
  if (!behind(baseline) || !behind(after)) {
    return {
      check: 'throughput', verdict: 'not judged', baseline: beforeMedian, after: afterMedian,
      detail: `${figures} (not judged: the rate follows the offered load unless both windows end ${SATURATED_BACKLOG_SECONDS} s of work behind; backlog ${baseline.backlog} → ${after.backlog})`,
    };
  }
  const test = judgeNonInferior(before, now, THROUGHPUT_GUARDRAIL);
  return { check: 'throughput', verdict: test.verdict, baseline: beforeMedian, after: afterMedian, detail: `${figures}; ${test.detail}`, reason: `throughput ${test.detail}` };
}
