// api/report.ts: the evidence page (charts of each measure at the baseline and after, the verdict
// table), and http/auth.ts's Basic sign-in a browser uses to open it.
import { renderOperationReport, verdictRows, type ReportedOperation } from '../../api/report';
import type { EvidenceSnapshot } from '../../domain/evidence';
import { authorize, bearerFromBasic } from '../../http/auth';

const snapshot = (fields: Partial<EvidenceSnapshot>): EvidenceSnapshot => ({
  atMs: Date.UTC(2026, 11, 2, 12), tasks: [], ready: 2, processed: 1000, ratePerSec: 50, latencyP50Ms: 12, latencyP95Ms: 40, backlog: 30, errors: 0, recentErrors: 0,
  ...fields,
});

const operation = (fields: Partial<ReportedOperation> = {}): ReportedOperation => ({
  workflowId: 'scale:web', kind: 'scaleOut', status: 'compensated', phase: 'compensated', startedAt: '2026-12-02T12:00:00.000Z', closedAt: '2026-12-02T12:01:00.000Z',
  gates: { passed: true, rows: [{ gate: 'baseline', passed: true, detail: 'baseline captured: 2 ready task(s)' }, { gate: 'capacity', passed: true, detail: '4 slots free' }] },
  evidenceGap: null,
  evidence: {
    baseline: snapshot({}),
    after: snapshot({
      atMs: Date.UTC(2026, 11, 2, 12, 1), ready: 4, ratePerSec: 95.5, latencyP50Ms: null, latencyP95Ms: 90, errors: 3, recentErrors: 3,
      cpuPercentPerTask: 37.5, rssBytesPerTask: 48 * 1048576,
    }),
    comparison: {
      verdict: 'regression', reasons: ['3 new task error(s)'],
      deltas: { processed: 2000, errors: 3, backlog: 0, latencyP95Ms: 50, ratePerSec: 45.5 }, conservation: { duplicates: 0, extra: 0, orderViolations: 0 },
    },
  },
  failure: null,
  ...fields,
});

/** The bars of one chart: point label → value (null: drawn as "not measured"). */
function barsOf(html: string, measure: string): Record<string, number | null> {
  const figure = new RegExp(`<figure class="chart" data-measure="${measure}">(.*?)</figure>`).exec(html)?.[1];
  if (!figure) throw new Error(`no chart ${measure}`);
  const bars: Record<string, number | null> = {};
  for (const match of figure.matchAll(/<g class="point( unmeasured)?" data-point="([^"]+)"(?: data-value="([^"]+)")?/g)) bars[match[2]] = match[1] ? null : Number(match[3]);
  return bars;
}

describe('renderOperationReport', () => {
  const html = renderOperationReport(operation());

  test('one chart per measure, each with the baseline and after; an unmeasured figure is labelled, not drawn as 0', () => {
    expect([...html.matchAll(/data-measure="([^"]+)"/g)].map((m) => m[1])).toEqual(['throughput', 'backlog', 'latency-p50', 'latency-p95', 'errors', 'ready', 'cpu', 'rss']);
    expect(barsOf(html, 'throughput')).toEqual({ baseline: 50, after: 95.5 });
    expect(barsOf(html, 'latency-p95')).toEqual({ baseline: 40, after: 90 });
    expect(barsOf(html, 'latency-p50')).toEqual({ baseline: 12, after: null });
    expect(barsOf(html, 'errors')).toEqual({ baseline: 0, after: 3 });
    expect(barsOf(html, 'ready')).toEqual({ baseline: 2, after: 4 });
    // the baseline's tasks reported no resources: not measured; after, the busiest and the largest task
    expect(barsOf(html, 'cpu')).toEqual({ baseline: null, after: 37.5 });
    expect(barsOf(html, 'rss')).toEqual({ baseline: null, after: 48 });
    expect(html).toContain('not measured');
  });

  test('the verdict table: every gate row, the regression with the numbers compared, the sink audit', () => {
    const rows = [...html.matchAll(/<tr><td>([^<]*)<\/td><td class="([a-z]+)">/g)].map((m) => `${m[1]} ${m[2]}`);
    expect(rows).toEqual(['gate: baseline pass', 'gate: capacity pass', 'after vs baseline regression', 'sink audit pass']);
    expect(html).toContain('3 new task error(s) (processed +2000, errors +3, backlog 0, rate +45.5/s, p95 latency +50 ms)');
  });

  test('nothing external: no script, no stylesheet link, no image or font fetched', () => {
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect([...html.matchAll(/(?:src|href)=/g)]).toHaveLength(0);
  });

  test('what the operation carries is escaped (a workload name or detail cannot inject markup)', () => {
    const hostile = renderOperationReport(operation({
      workflowId: 'scale:<script>alert(1)</script>',
      gates: { passed: false, rows: [{ gate: 'connectivity', passed: false, detail: '"><img src=x onerror=alert(1)>', missingEvidence: '<b>probe</b>' }] },
    }));
    expect(hostile).not.toContain('<script>alert');
    expect(hostile).not.toContain('<img');
    expect(hostile).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(hostile).toContain('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;; missing: &lt;b&gt;probe&lt;/b&gt;');
  });

  test('an operation without snapshots says so, and shows its refusal as the verdict', () => {
    const refused = operation({ status: 'refused', evidence: { baseline: null, after: null, comparison: null }, evidenceGap: 'declare the contract', gates: null });
    const page = renderOperationReport(refused);
    expect(page).not.toContain('<figure');
    expect(page).toContain('recorded no evidence snapshot');
    expect(verdictRows(refused)).toEqual([{ check: 'evidence', verdict: 'unknown', compared: 'declare the contract' }]);
    const recovery = renderOperationReport({ ...refused, kind: 'recoverRuntime', evidence: undefined, result: { outcome: 'completed' } });
    expect(recovery).toContain('a recoverRuntime is judged by its own status');
    expect(recovery).toContain('&quot;outcome&quot;: &quot;completed&quot;');
  });
});

it('a stepped scale-out charts each step after the baseline and gives each a verdict row', () => {
  const steps = [
    { size: 4, outcome: 'good', after: snapshot({ ready: 4, ratePerSec: 80 }), reasons: [] },
    { size: 6, outcome: 'regression', after: snapshot({ ready: 6, latencyP50Ms: 300 }), reasons: ['p50 latency grew from 12 to 300 ms (more than ×1.5 and +50 ms)'] },
    { size: 8, outcome: 'pending', after: null, reasons: [] },
  ];
  const html = renderOperationReport(operation({ steps }));
  expect(barsOf(html, 'ready')).toEqual({ baseline: 2, 'step 1: 4': 4, 'step 2: 6': 6 });
  expect(barsOf(html, 'latency-p50')).toEqual({ baseline: 12, 'step 1: 4': 12, 'step 2: 6': 300 });
  expect(verdictRows(operation({ steps })).slice(2, 5)).toEqual([
    { check: 'step 1 of 3: 4 replica(s)', verdict: 'pass', compared: 'no regression against the baseline' },
    { check: 'step 2 of 3: 6 replica(s)', verdict: 'regression', compared: 'p50 latency grew from 12 to 300 ms (more than ×1.5 and +50 ms)' },
    { check: 'step 3 of 3: 8 replica(s)', verdict: 'unknown', compared: 'not reached' },
  ]);
});

describe('bearerFromBasic: a browser signs in with the token as its password', () => {
  const tokens = { operator: 'op-token-0123456789abcdefgh', viewer: 'vw-token-0123456789abcdefgh' };
  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  test('any user name, the viewer or operator token as the password', () => {
    expect(authorize(tokens, 'viewer', bearerFromBasic(basic('me', tokens.viewer)))).toBe('viewer');
    expect(authorize(tokens, 'viewer', bearerFromBasic(basic('', tokens.operator)))).toBe('operator');
    expect(bearerFromBasic(`Bearer ${tokens.viewer}`)).toBe(`Bearer ${tokens.viewer}`);
  });

  test('a wrong password is an unknown token; a malformed one is a missing token; neither is echoed', () => {
    expect(() => authorize(tokens, 'viewer', bearerFromBasic(basic('me', 'not-the-token')))).toThrow('unknown bearer token');
    for (const header of [basic('me', 'two words'), `Basic ${Buffer.from('no-colon').toString('base64')}`, 'Basic !!!']) {
      expect(() => authorize(tokens, 'viewer', bearerFromBasic(header))).toThrow(/^missing bearer token/);
    }
  });
});
