// Every comparison of a scale-out (domain/evidence.ts compareEvidence) is a row with its verdict and
// both figures: backlog (with its drain rate), memory and CPU per task judged by growth tolerances
// when given, shown otherwise; a side not measured is "not measured", never a pass by default.
// Every row can fail: receipts per partition against the committed offsets, ownership, a task not
// measured, latency tested over both windows' samples; a row not judged is grey in the report.
import {
  compareEvidence, throughputSamplesOf, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_CPU_TOLERANCE, DEFAULT_LATENCY_TOLERANCE, DEFAULT_RSS_TOLERANCE, type EvidenceSnapshot, type PartitionReceipt, type TaskEvidence,
} from '../../domain/evidence';
import { renderOperationReport, verdictRows } from '../../api/report';

const MIB = 1024 * 1024;
const snapshot = (change: Partial<EvidenceSnapshot> = {}): EvidenceSnapshot => ({
  atMs: 0, tasks: [], ready: 3, processed: 100, ratePerSec: 10, latencyP50Ms: null, latencyP95Ms: null, backlog: 0, errors: 0,
  cpuPercentPerTask: 10, rssBytesPerTask: 50 * MIB, ...change,
});
const judged = { expectedTasks: 3, backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE, cpu: DEFAULT_CPU_TOLERANCE };
const row = (comparison: ReturnType<typeof compareEvidence>, check: string) => comparison.rows!.find((r) => r.check === check);

describe('the comparison rows', () => {
  it('judge a backlog that grew past the tolerance, naming both figures; its drain rate is shown', () => {
    const grown = compareEvidence(snapshot({ backlog: 800 }), snapshot({ atMs: 10_000, backlog: 5_000 }), judged);
    expect(grown.verdict).toBe('regression');
    expect(grown.reasons).toEqual(['backlog grew from 800 records to 5000 records (more than ×2 and +1000 records)']);
    expect(row(grown, 'backlog')).toMatchObject({ verdict: 'regression', baseline: 800, after: 5_000, detail: expect.stringContaining('grew 420/s over 10 s') });
    const draining = compareEvidence(snapshot({ backlog: 5_000 }), snapshot({ atMs: 10_000, backlog: 1_000 }), judged);
    expect(row(draining, 'backlog')).toMatchObject({ verdict: 'pass', detail: '5000 records → 1000 records, drained 400/s over 10 s: no regression (that is growth of more than ×2 and +1000 records)' });
    // a few hundred records of noise on an empty backlog is under the slack
    expect(compareEvidence(snapshot({ backlog: 0 }), snapshot({ atMs: 1_000, backlog: 900 }), judged).verdict).toBe('pass');
  });

  it('judge memory and CPU per task by their tolerances; without one they are shown, not judged', () => {
    const heavy = compareEvidence(snapshot(), snapshot({ rssBytesPerTask: 200 * MIB, cpuPercentPerTask: 95 }), judged);
    expect(heavy.reasons).toEqual([
      'memory per task grew from 50 MiB to 200 MiB (more than ×1.5 and +64 MiB)',
      'CPU per task grew from 10 % to 95 % (more than ×2 and +50 %)',
    ]);
    const shown = compareEvidence(snapshot(), snapshot({ rssBytesPerTask: 200 * MIB, cpuPercentPerTask: 95 }), { expectedTasks: 3 });
    expect(shown.verdict).toBe('pass');
    expect(row(shown, 'CPU per task')).toMatchObject({ verdict: 'not judged', detail: '10 % → 95 % (shown, not judged here)' });
  });

  it('say "not measured" where a side was not measured, and cover every check', () => {
    const comparison = compareEvidence(snapshot({ cpuPercentPerTask: null }), snapshot(), judged);
    expect(row(comparison, 'CPU per task')).toMatchObject({ verdict: 'not measured', baseline: null, after: 10 });
    expect(comparison.rows!.map((r) => r.check)).toEqual([
      'errors', 'tasks ready', 'destination receipts', 'latency p50', 'latency p95', 'backlog', 'memory per task', 'CPU per task',
    ]);
    const withSink = compareEvidence(snapshot(), snapshot({ sink: { sourceCount: 10, sinkCount: 9, missing: 1, duplicates: 0, extra: 0, orderViolations: 0 } }), judged);
    // a sink count without the committed offsets to balance it against is no pass
    expect(row(withSink, 'destination receipts')).toMatchObject({ verdict: 'not measured', detail: '9 of 10 source records in the sink, but no committed offsets to balance them against' });
  });

  it('are the report\'s verdict table, one line each', () => {
    const comparison = compareEvidence(snapshot({ backlog: 800 }), snapshot({ atMs: 10_000, backlog: 5_000 }), judged);
    const table = verdictRows({ evidence: { baseline: null, after: null, comparison } } as never);
    expect(table.find((r) => r.check === 'after vs baseline: backlog')).toMatchObject({ verdict: 'regression' });
    expect(table.find((r) => r.check === 'after vs baseline: latency p95')).toMatchObject({ verdict: 'not measured', compared: 'p95 latency not measured at the baseline or after' });
  });
});

describe('destination receipts (conservation)', () => {
  const receipt = (partition: number, change: Partial<PartitionReceipt> = {}): PartitionReceipt => ({
    partition, source: 100, committedOffset: 89, committedRecords: 90, received: 90, aboveCommit: 0, owner: `c-${partition % 2}-g1`, ...change,
  });
  const withReceipts = (partitions: PartitionReceipt[], change: Partial<EvidenceSnapshot> = {}) => snapshot({
    receipts: { partitions, declared: 4, placedTasks: ['c-0-g1', 'c-1-g1'] }, ...change,
  });
  const consumer = { expectedTasks: 3, kind: 'consumer' as const };
  const before = withReceipts([0, 1, 2, 3].map((p) => receipt(p, { committedOffset: 39, committedRecords: 40, received: 40 })));

  it('pass when every partition balances against its committed offset and is owned, with the window\'s figures', () => {
    const comparison = compareEvidence(before, withReceipts([0, 1, 2, 3].map((p) => receipt(p))), consumer);
    expect(comparison.verdict).toBe('pass');
    expect(row(comparison, 'destination receipts')).toMatchObject({
      verdict: 'pass', baseline: 160, after: 360,
      detail: 'every one of 4 partition(s) balances and is owned: over the window 200 record(s) left the source (committed offsets) and 200 reached the sink; 40 in flight above the committed offsets',
    });
  });

  it('fail, naming the partition, when sink rows were received above the committed offset (a drain that skipped its commit)', () => {
    const comparison = compareEvidence(before, withReceipts([receipt(0), receipt(1, { aboveCommit: 7 }), receipt(2), receipt(3)]), consumer);
    expect(comparison.verdict).toBe('regression');
    expect(row(comparison, 'destination receipts')).toMatchObject({ verdict: 'regression', detail: expect.stringContaining('partition 1: 7 sink row(s) above its committed offset 89') });
    expect(comparison.reasons).toEqual([expect.stringMatching(/^destination receipts do not balance: partition 1: 7 sink row\(s\) above/)]);
  });

  it('fail when a record up to the committed offset never reached the sink', () => {
    const comparison = compareEvidence(before, withReceipts([receipt(0), receipt(1), receipt(2, { received: 85 }), receipt(3)]), consumer);
    expect(comparison.reasons).toEqual([expect.stringContaining('partition 2: 85 sink row(s) for the 90 source record(s) up to its committed offset 89 (5 lost)')]);
  });

  it('fail, naming each, for a partition with no owner or whose owner is no longer placed', () => {
    const comparison = compareEvidence(before, withReceipts([receipt(0), receipt(1, { owner: null }), receipt(2, { owner: 'c-2-g1' })]), consumer);
    expect(comparison.verdict).toBe('regression');
    expect(comparison.reasons[0]).toContain('partition 1 has no owner');
    expect(comparison.reasons[0]).toContain('partition 2 has no owner among the placed tasks (still c-2-g1\'s)');
    expect(comparison.reasons[0]).toContain('partition 3 has no owner'); // never acquired: no offsets row at all
  });

  it('judge a stream job by what its last completed checkpoint covers', () => {
    const audit = (sinkTotal: number, rowsAboveCheckpoint = 0) => snapshot({ checkpointAudit: { coveredSourceRows: 500, sinkTotal, rowsAboveCheckpoint, checkpoint: 12 } });
    const stream = { expectedTasks: 3, kind: 'stream' as const };
    expect(row(compareEvidence(snapshot(), audit(500), stream), 'destination receipts')).toMatchObject({ verdict: 'pass', detail: 'the sink holds 500 of the 500 source record(s) checkpoint 12 covers, 0 row(s) above it' });
    expect(compareEvidence(snapshot(), audit(480), stream).reasons).toEqual(['destination receipts do not balance: the sink holds 480 of the 500 source record(s) checkpoint 12 covers, 0 row(s) above it']);
    expect(compareEvidence(snapshot(), audit(500, 3), stream).verdict).toBe('regression');
  });

  it('are not measured for a consumer with no audit (the comparison is then no pass), and not judged for a service', () => {
    const unknown = compareEvidence(snapshot(), snapshot(), consumer);
    expect(row(unknown, 'destination receipts')).toMatchObject({ verdict: 'not measured' });
    expect(unknown.verdict).toBe('not measured');
    const service = compareEvidence(snapshot(), snapshot(), { expectedTasks: 3, kind: 'service' });
    expect(row(service, 'destination receipts')).toMatchObject({ verdict: 'not judged', detail: 'a service has no destination the control plane counts' });
    expect(service.verdict).toBe('pass');
  });

  it('before patch evidence-judged were never judged (the replay of older runs)', () => {
    const broken = withReceipts([receipt(0, { aboveCommit: 7 })], { sink: { sourceCount: 10, sinkCount: 10, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 } });
    const legacy = compareEvidence(before, broken, { ...consumer, evidenceJudged: false });
    expect(legacy.verdict).toBe('pass');
    expect(row(legacy, 'destination receipts')).toMatchObject({ verdict: 'not judged' });
    expect(compareEvidence(before, broken, consumer).verdict).toBe('regression');
  });
});

describe('a task not measured', () => {
  const task = (taskId: string, change: Partial<TaskEvidence> = {}): TaskEvidence => ({
    taskId, runtimeId: `rt-${taskId}`, incarnation: `${taskId}-i`, state: 'ready', processed: 10, errors: 0, backlog: 0, ownedPartitions: 1, inFlight: 0, ratePerSec: 1, ...change,
  });

  it('makes the errors row "not measured", naming the task, and the comparison no pass', () => {
    const silent = task('b', { state: 'absent', incarnation: null, unmeasured: 'not measured: its agent did not answer (agent http://x unreachable: timeout)' });
    const comparison = compareEvidence(snapshot({ tasks: [task('a'), task('b')] }), snapshot({ tasks: [task('a'), silent], ready: 3 }), { expectedTasks: 3 });
    expect(row(comparison, 'errors')).toMatchObject({
      verdict: 'not measured', detail: 'errors not measured: after b on rt-b not measured: its agent did not answer (agent http://x unreachable: timeout)',
    });
    expect(comparison.verdict).toBe('not measured');
    expect(compareEvidence(snapshot({ tasks: [task('a')] }), snapshot({ tasks: [task('a')] }), { expectedTasks: 3 }).verdict).toBe('pass');
  });

  it('still fails the errors row where the measured tasks have new errors', () => {
    const comparison = compareEvidence(snapshot({ tasks: [task('a')] }), snapshot({ tasks: [task('a', { errors: 2 }), task('b', { unmeasured: 'absent from its agent', state: 'absent' })], errors: 2 }), { expectedTasks: 3 });
    expect(row(comparison, 'errors')).toMatchObject({ verdict: 'regression', detail: '2 new task error(s); not measured: after b on rt-b absent from its agent' });
  });
});

describe('errors as a rate (patch error-rate-tested)', () => {
  const task = (taskId: string, change: Partial<TaskEvidence> = {}): TaskEvidence => ({
    taskId, runtimeId: `rt-${taskId}`, incarnation: `${taskId}-i`, state: 'ready', processed: 0, errors: 0, backlog: 0, ownedPartitions: 1, inFlight: 0, ratePerSec: 1, ...change,
  });
  const withTasks = (tasks: TaskEvidence[]) => snapshot({ tasks, errors: tasks.reduce((n, t) => n + t.errors, 0), processed: tasks.reduce((n, t) => n + t.processed, 0) });
  // three consumers at 3,000 records each, no errors; a scale-in to one, whose window adds 1,500 records
  const baseline = withTasks([task('a', { processed: 3_000 }), task('b', { processed: 3_000 }), task('c', { processed: 3_000 })]);

  it('passes one transient error over the work of the after window, naming the test and both windows', () => {
    const after = withTasks([task('a', { processed: 4_500, errors: 1 })]);
    const comparison = compareEvidence(baseline, after, { expectedTasks: 1 });
    expect(row(comparison, 'errors')).toMatchObject({ verdict: 'pass', detail: expect.stringMatching(/^1 new task error\(s\); error rate non-inferior: 0 error\(s\) in 9000 record\(s\) before, 1 in 1500 after: exact conditional binomial test, p = 0\.15\d* /) });
    expect(comparison.verdict).toBe('pass');
    // the judgment before the patch: any new error failed
    expect(compareEvidence(baseline, after, { expectedTasks: 1, errorRateTested: false }).reasons).toEqual(['1 new task error(s)']);
  });

  it('fails errors that outgrow the baseline rate; a restarted incarnation adds all of its figures', () => {
    const restarted = task('a', { incarnation: 'a-ii', processed: 200, errors: 3 });
    const comparison = compareEvidence(baseline, withTasks([restarted]), { expectedTasks: 1 });
    expect(row(comparison, 'errors')).toMatchObject({ verdict: 'regression', detail: expect.stringContaining('3 new task error(s); error rate worse beyond the margin: 0 error(s) in 9000 record(s) before, 3 in 200 after') });
    expect(comparison.reasons[0]).toMatch(/^3 new task error\(s\): error rate worse beyond the margin/);
  });

  it('keeps the strict rule, any new error fails, where a window processed nothing (a service that counts no records)', () => {
    const idle = withTasks([task('a'), task('b')]);
    const comparison = compareEvidence(idle, withTasks([task('a', { errors: 1 }), task('b')]), { expectedTasks: 2 });
    expect(row(comparison, 'errors')).toMatchObject({ verdict: 'regression', detail: '1 new task error(s)' });
  });
});

describe('latency', () => {
  const samples = (scale: number) => [20, 22, 25, 21, 23, 24, 22, 26, 21, 23].map((v) => v * scale);
  const service = { expectedTasks: 3, kind: 'service' as const, latency: DEFAULT_LATENCY_TOLERANCE };

  it('is tested over both windows\' samples where they exist, p50 and p95 shown beside it', () => {
    const slower = compareEvidence(snapshot({ latencyP50Ms: 22, latencyP95Ms: 26, latencySamplesMs: samples(1) }), snapshot({ latencyP50Ms: 33, latencyP95Ms: 39, latencySamplesMs: samples(1.5) }), service);
    expect(row(slower, 'latency')).toMatchObject({ verdict: 'regression', baseline: 22.5, after: 33.75, detail: expect.stringMatching(/^medians 22.5 → 33.75 ms; worse beyond the margin: Mann-Whitney U = 100, p = [\d.e-]+ for after > baseline × 1.1 \(margin 10 %, confidence 0.95, n = 10 before, 10 after\)$/) });
    expect(row(slower, 'latency p95')).toMatchObject({ verdict: 'not judged' });
    expect(slower.verdict).toBe('regression');
    // the fixed rule (×1.5 and +100 ms) would have passed it
    const same = compareEvidence(snapshot({ latencyP50Ms: 22, latencyP95Ms: 26, latencySamplesMs: samples(1) }), snapshot({ latencyP50Ms: 22, latencyP95Ms: 26, latencySamplesMs: samples(1.02) }), service);
    expect(row(same, 'latency')).toMatchObject({ verdict: 'pass', detail: expect.stringContaining('non-inferior: Mann-Whitney U') });
  });

  it('keeps the fixed multipliers only where no samples exist, saying so', () => {
    const comparison = compareEvidence(snapshot({ latencyP50Ms: 20, latencyP95Ms: 30 }), snapshot({ latencyP50Ms: 400, latencyP95Ms: 480 }), service);
    expect(row(comparison, 'latency')).toBeUndefined();
    expect(row(comparison, 'latency p50')).toMatchObject({ verdict: 'regression', detail: 'p50 latency grew from 20 to 400 ms (more than ×1.5 and +100 ms) (fixed multiplier: no samples to test)' });
    expect(row(comparison, 'latency p95')).toMatchObject({ verdict: 'regression' });
  });

  it('says "not enough samples" with too few (the fixed rule judging p50 and p95), and is not judged for a kind whose latency is not judged', () => {
    const few = compareEvidence(snapshot({ latencyP50Ms: 22, latencyP95Ms: 26, latencySamplesMs: samples(1) }), snapshot({ latencyP50Ms: 300, latencyP95Ms: 300, latencySamplesMs: [300, 300] }), service);
    expect(row(few, 'latency')).toMatchObject({ verdict: 'not enough samples' });
    // too few for the test: p50 and p95 by the fixed rule, saying so
    expect(row(few, 'latency p50')).toMatchObject({ verdict: 'regression', detail: 'p50 latency grew from 22 to 300 ms (more than ×1.5 and +100 ms) (fixed multiplier: too few samples for the test, n = 10 before, 2 after)' });
    expect(few.verdict).toBe('regression');
    const consumer = compareEvidence(snapshot({ latencyP50Ms: 22, latencyP95Ms: 26 }), snapshot({ latencyP50Ms: 300, latencyP95Ms: 300 }), { expectedTasks: 3 });
    expect(row(consumer, 'latency p50')).toMatchObject({ verdict: 'not judged', detail: '22 → 300 ms (shown, not judged for this kind)' });
  });
});

describe('throughput (patch throughput-tested)', () => {
  const perSecond = (scale: number) => [200, 210, 190, 205, 198, 202, 195, 208, 199, 201].map((v) => v * scale);
  const consumer = { expectedTasks: 3, kind: 'consumer' as const };
  // 1 000 records behind at 200 records/s: 5 s of work, past SATURATED_BACKLOG_SECONDS
  const behind = { backlog: 1_000, ratePerSec: 200 };

  it('fails where the workload processes fewer records per second while it is behind in both windows, naming the test', () => {
    const halved = compareEvidence(snapshot({ ...behind, throughputSamples: perSecond(1) }), snapshot({ ...behind, ratePerSec: 100, backlog: 1_500, throughputSamples: perSecond(0.5) }), consumer);
    expect(row(halved, 'throughput')).toMatchObject({
      verdict: 'regression', baseline: 200.5, after: 100.25,
      detail: expect.stringMatching(/^medians 200.5 → 100.25 records\/s; worse beyond the margin: Mann-Whitney U = 0, p = [\d.e-]+ for after < baseline × 0.9 \(margin 10 %, confidence 0.95, n = 10 before, 10 after\)$/),
    });
    expect(halved.verdict).toBe('regression');
    expect(halved.reasons).toContainEqual(expect.stringMatching(/^throughput worse beyond the margin/));
    const more = compareEvidence(snapshot({ ...behind, throughputSamples: perSecond(1) }), snapshot({ ...behind, throughputSamples: perSecond(1.6) }), consumer);
    expect(row(more, 'throughput')).toMatchObject({ verdict: 'pass', detail: expect.stringContaining('non-inferior: Mann-Whitney U') });
  });

  it('is not judged where a window ends keeping up (the rate then follows the offered load), saying why', () => {
    const caughtUp = compareEvidence(snapshot({ ...behind, throughputSamples: perSecond(1) }), snapshot({ backlog: 20, ratePerSec: 100, throughputSamples: perSecond(0.5) }), consumer);
    expect(row(caughtUp, 'throughput')).toMatchObject({ verdict: 'not judged', detail: 'medians 200.5 → 100.25 records/s (not judged: the rate follows the offered load unless both windows end 1 s of work behind; backlog 1000 → 20)' });
    expect(caughtUp.reasons).toEqual([]);
  });

  it('says "not enough samples" with too few, has no row where nothing was sampled, and none in runs before the patch', () => {
    expect(row(compareEvidence(snapshot({ ...behind, throughputSamples: perSecond(1) }), snapshot({ ...behind, throughputSamples: [50, 50] }), consumer), 'throughput')).toMatchObject({ verdict: 'not enough samples' });
    expect(row(compareEvidence(snapshot(behind), snapshot(behind), consumer), 'throughput')).toBeUndefined();
    const halved = [snapshot({ ...behind, throughputSamples: perSecond(1) }), snapshot({ ...behind, throughputSamples: perSecond(0.5) })] as const;
    expect(row(compareEvidence(...halved, { ...consumer, throughputTested: false }), 'throughput')).toBeUndefined();
  });

  it('sums every task\'s records per interval over the intervals all of them cover within the window', () => {
    // two tasks, 500 ms intervals; the second started later (no interval aged 1 500 ms)
    const a: [number, number][] = [[1_500, 10], [1_000, 20], [500, 30], [0, 40]];
    const b: [number, number][] = [[1_000, 1], [500, 2], [0, 3]];
    expect(throughputSamplesOf([a, b], Infinity, 500)).toEqual([42, 64, 86]);
    // a window of 1 200 ms holds the intervals that ended 500 ms and 0 ms ago (each 500 ms long)
    expect(throughputSamplesOf([a, b], 1_200, 500)).toEqual([64, 86]);
    expect(throughputSamplesOf([], Infinity, 500)).toEqual([]);
  });
});

describe('the report', () => {
  it('shows rows not judged in grey and rows not measured in amber, never as a green pass', () => {
    const comparison = compareEvidence(snapshot(), snapshot({ cpuPercentPerTask: 95 }), { expectedTasks: 3, kind: 'consumer' });
    const html = renderOperationReport({ workflowId: 'scale:c', runId: 'r', kind: 'scaleOut', status: 'completed', phase: 'done', startedAt: '2030-01-01T00:00:00Z', closedAt: null, evidence: { baseline: snapshot(), after: snapshot(), comparison } } as never);
    expect(html).toContain('<td>after vs baseline: CPU per task</td><td class="not-judged">not judged</td>');
    expect(html).toContain('<td>after vs baseline: destination receipts</td><td class="unknown">not measured</td>');
    expect(html).not.toMatch(/CPU per task<\/td><td class="pass">/);
  });
});
