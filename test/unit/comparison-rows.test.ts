// Every comparison of a scale-out (domain/evidence.ts compareEvidence) is a row with its verdict and
// both figures: backlog (with its drain rate), memory and CPU per task judged by growth tolerances
// when given, shown otherwise; a side not measured is "not measured", never a pass by default.
import {
  compareEvidence, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_CPU_TOLERANCE, DEFAULT_RSS_TOLERANCE, type EvidenceSnapshot,
} from '../../domain/evidence';
import { verdictRows } from '../../api/report';

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
    expect(row(shown, 'CPU per task')).toMatchObject({ verdict: 'pass', detail: '10 % → 95 % (shown, not judged here)' });
  });

  it('say "not measured" where a side was not measured, and cover every check', () => {
    const comparison = compareEvidence(snapshot({ cpuPercentPerTask: null }), snapshot(), judged);
    expect(row(comparison, 'CPU per task')).toMatchObject({ verdict: 'not measured', baseline: null, after: 10 });
    expect(comparison.rows!.map((r) => r.check)).toEqual([
      'errors', 'tasks ready', 'destination receipts', 'latency p50', 'latency p95', 'backlog', 'memory per task', 'CPU per task',
    ]);
    const withSink = compareEvidence(snapshot(), snapshot({ sink: { sourceCount: 10, sinkCount: 9, missing: 1, duplicates: 0, extra: 0, orderViolations: 0 } }), judged);
    expect(row(withSink, 'destination receipts')).toMatchObject({ verdict: 'pass', after: 9, detail: '9 of 10 source records received (1 not yet)' });
  });

  it('are the report\'s verdict table, one line each', () => {
    const comparison = compareEvidence(snapshot({ backlog: 800 }), snapshot({ atMs: 10_000, backlog: 5_000 }), judged);
    const table = verdictRows({ evidence: { baseline: null, after: null, comparison } } as never);
    expect(table.find((r) => r.check === 'after vs baseline: backlog')).toMatchObject({ verdict: 'regression' });
    expect(table.find((r) => r.check === 'after vs baseline: latency p95')).toMatchObject({ verdict: 'unknown', compared: 'p95 latency not measured at the baseline or after' });
  });
});
