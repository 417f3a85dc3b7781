// GET /v1/operations/:workflowId/report: an operation's evidence as one HTML page people can look
// at, with no external asset (no script, no stylesheet, no font: the page is served under a CSP
// that allows none). Charts are inline SVG: each measure over the evidence points (the baseline,
// then the snapshot after the change), followed by the verdict table (every gate row and the
// before/after comparison, each with the numbers it compared). Pure: operation view in, HTML out.
import type { EvidenceComparison, EvidenceSnapshot } from '../domain/evidence';
import type { GateReport } from '../domain/gates';

/** What the report reads of GET /v1/operations/:workflowId's answer. */
export interface ReportedOperation {
  workflowId: string;
  /** the run shown, and this page's own link to it (which names the run: it keeps showing this run) */
  runId?: string;
  reportUrl?: string;
  kind: string;
  status: string;
  phase: unknown;
  startedAt: string;
  closedAt: string | null;
  gates?: unknown;
  evidenceGap?: unknown;
  evidence?: { baseline: unknown; after: unknown; comparison: unknown };
  /** a stepped scale-out: each size with its evidence after and its verdict */
  steps?: unknown;
  failure: string | null;
  result?: unknown;
}

/** The page's policy: its own inline styles, nothing fetched, nothing run. */
export const REPORT_CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface EvidencePoint {
  label: string;
  snapshot: EvidenceSnapshot;
}

export interface Measure {
  id: string;
  title: string;
  unit: string;
  valueOf(snapshot: EvidenceSnapshot): number | null;
}

/** The measures charted, in order: what the placement guide's proof row asks to compare. */
export const MEASURES: Measure[] = [
  { id: 'throughput', title: 'Throughput', unit: 'records/s', valueOf: (s) => s.ratePerSec },
  { id: 'backlog', title: 'Backlog', unit: 'records', valueOf: (s) => s.backlog },
  { id: 'latency-p50', title: 'Latency p50', unit: 'ms', valueOf: (s) => s.latencyP50Ms },
  { id: 'latency-p95', title: 'Latency p95', unit: 'ms', valueOf: (s) => s.latencyP95Ms },
  // the current error rate where the agents report one (their error window), else every error
  { id: 'errors', title: 'Errors', unit: 'task errors', valueOf: (s) => s.recentErrors ?? s.errors },
  { id: 'ready', title: 'Ready tasks', unit: 'tasks', valueOf: (s) => s.ready },
  // a service task's process, as its agent reads /proc: the busiest task's CPU, the largest one's memory
  { id: 'cpu', title: 'CPU per task', unit: '% of a core', valueOf: (s) => s.cpuPercentPerTask ?? null },
  { id: 'rss', title: 'Memory per task', unit: 'MB resident', valueOf: (s) => (s.rssBytesPerTask == null ? null : Math.round(s.rssBytesPerTask / 1048576 * 10) / 10) },
];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Every string from the operation (workload names, details, reasons) goes through this. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c]);

const isSnapshot = (value: unknown): value is EvidenceSnapshot =>
  typeof value === 'object' && value !== null && typeof (value as EvidenceSnapshot).atMs === 'number' && Array.isArray((value as EvidenceSnapshot).tasks);

/** The evidence points of an operation, in time order: the baseline, then after the change (those it reached). */
export function evidencePoints(operation: ReportedOperation): EvidencePoint[] {
  const points: EvidencePoint[] = [];
  if (isSnapshot(operation.evidence?.baseline)) points.push({ label: 'baseline', snapshot: operation.evidence.baseline });
  const steps = stepsOf(operation);
  if (steps.length) {
    steps.forEach((step, i) => {
      if (isSnapshot(step.after)) points.push({ label: `step ${i + 1}: ${step.size}`, snapshot: step.after });
    });
  } else if (isSnapshot(operation.evidence?.after)) points.push({ label: 'after', snapshot: operation.evidence.after });
  return points;
}

interface ReportedStep {
  size: number;
  outcome: string;
  after: unknown;
  reasons: string[];
}

const stepsOf = (operation: ReportedOperation): ReportedStep[] => (Array.isArray(operation.steps) ? (operation.steps as ReportedStep[]) : []);

const formatNumber = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 2 : 1));

/** One bar chart (inline SVG) of a measure over the points; an unmeasured point is labelled, not drawn as 0. */
export function renderChart(measure: Measure, points: EvidencePoint[]): string {
  const width = 360;
  const height = 180;
  const top = 28;
  const bottom = 36;
  const values = points.map((point) => measure.valueOf(point.snapshot));
  const max = Math.max(1, ...values.map((value) => value ?? 0));
  const slot = (width - 20) / Math.max(1, points.length);
  const barWidth = Math.min(80, slot * 0.6);
  const bars = points.map((point, i) => {
    const value = values[i];
    const x = 10 + slot * i + (slot - barWidth) / 2;
    const label = `<text x="${x + barWidth / 2}" y="${height - 14}" text-anchor="middle" class="axis">${escapeHtml(point.label)}</text>`;
    if (value === null) {
      return `<g class="point unmeasured" data-point="${escapeHtml(point.label)}">${label}<text x="${x + barWidth / 2}" y="${height - bottom - 6}" text-anchor="middle" class="value">not measured</text></g>`;
    }
    const barHeight = ((height - top - bottom) * value) / max;
    const y = height - bottom - barHeight;
    return `<g class="point" data-point="${escapeHtml(point.label)}" data-value="${value}">`
      + `<rect x="${x}" y="${y}" width="${barWidth}" height="${Math.max(barHeight, 1)}" class="bar ${i === 0 ? 'before' : 'later'}"><title>${escapeHtml(point.label)}: ${formatNumber(value)} ${escapeHtml(measure.unit)}</title></rect>`
      + `<text x="${x + barWidth / 2}" y="${y - 6}" text-anchor="middle" class="value">${formatNumber(value)}</text>${label}</g>`;
  }).join('');
  return `<figure class="chart" data-measure="${measure.id}"><figcaption>${escapeHtml(measure.title)} <span class="unit">(${escapeHtml(measure.unit)})</span></figcaption>`
    + `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeHtml(measure.title)}">`
    + `<line x1="8" y1="${height - bottom}" x2="${width - 8}" y2="${height - bottom}" class="baseline-axis"/>${bars}</svg></figure>`;
}

interface VerdictRow {
  check: string;
  /** `not judged` and `not enough samples` are grey, `not measured` and `unknown` amber: none is a pass */
  verdict: 'pass' | 'fail' | 'regression' | 'unknown' | 'not measured' | 'not judged' | 'not enough samples';
  compared: string;
}

/** The cell's class: green only for a pass. */
const VERDICT_CLASS: Record<VerdictRow['verdict'], string> = {
  pass: 'pass', fail: 'fail', regression: 'regression', unknown: 'unknown', 'not measured': 'unknown', 'not judged': 'not-judged', 'not enough samples': 'not-judged',
};

/** The verdict table's rows: every gate row, then the comparison after the change (each reason, or a pass with its deltas). */
export function verdictRows(operation: ReportedOperation): VerdictRow[] {
  const rows: VerdictRow[] = [];
  const gates = operation.gates as GateReport | null | undefined;
  for (const row of gates?.rows ?? []) {
    rows.push({ check: `gate: ${row.gate}`, verdict: row.passed ? 'pass' : 'fail', compared: row.passed ? row.detail : `${row.detail}; missing: ${row.missingEvidence ?? 'evidence'}` });
  }
  stepsOf(operation).forEach((step, i, steps) => {
    const verdict = step.outcome === 'good' ? 'pass' : step.outcome === 'regression' ? 'regression' : 'unknown';
    const compared = step.outcome === 'pending' ? 'not reached' : step.reasons.join('; ') || 'no regression against the baseline';
    rows.push({ check: `step ${i + 1} of ${steps.length}: ${step.size} replica(s)`, verdict, compared });
  });
  const comparison = operation.evidence?.comparison as EvidenceComparison | null | undefined;
  if (comparison?.rows) {
    // Every comparison with its figures and verdict (comparisons recorded since the rows existed).
    for (const row of comparison.rows) rows.push({ check: `after vs baseline: ${row.check}`, verdict: row.verdict, compared: row.detail });
  } else if (comparison) {
    const { deltas } = comparison;
    const latency = deltas.latencyP95Ms === null ? 'p95 latency not measured' : `p95 latency ${signed(deltas.latencyP95Ms)} ms`;
    const numbers = `processed ${signed(deltas.processed)}, errors ${signed(deltas.errors)}, backlog ${signed(deltas.backlog)}, rate ${signed(deltas.ratePerSec)}/s, ${latency}`;
    if (comparison.verdict === 'pass') rows.push({ check: 'after vs baseline', verdict: 'pass', compared: numbers });
    for (const reason of comparison.reasons) rows.push({ check: 'after vs baseline', verdict: 'regression', compared: `${reason} (${numbers})` });
    if (comparison.conservation) {
      const { duplicates, extra, orderViolations } = comparison.conservation;
      rows.push({
        check: 'sink audit', verdict: duplicates + extra + orderViolations === 0 ? 'pass' : 'regression',
        compared: `${duplicates} duplicate(s), ${extra} extra row(s), ${orderViolations} ordering violation(s)`,
      });
    }
  } else if (operation.evidenceGap) {
    rows.push({ check: 'evidence', verdict: 'unknown', compared: String(operation.evidenceGap) });
  }
  return rows;
}

const signed = (value: number): string => `${value > 0 ? '+' : ''}${formatNumber(value)}`;

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#555}.meta b{color:#1d1d1f}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{margin:0;border:1px solid #ddd;border-radius:6px;padding:8px}
figcaption{font-weight:600}.unit{font-weight:400;color:#666}
.bar.before{fill:#8da2c0}.bar.later{fill:#3b6fb6}.baseline-axis{stroke:#999}
.axis,.value{font-size:12px;fill:#333}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ddd;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f7}.pass{color:#1a7f37;font-weight:600}.fail,.regression{color:#c62828;font-weight:600}.unknown{color:#9a6700;font-weight:600}.not-judged{color:#6e6e73}
`;

/** The whole page. */
export function renderOperationReport(operation: ReportedOperation): string {
  const points = evidencePoints(operation);
  const title = `${operation.kind} ${operation.workflowId}`;
  const charts = points.length === 0
    ? `<p class="no-evidence">This operation recorded no evidence snapshot${operation.kind === 'scaleOut' || operation.kind === 'scaleIn' ? ' (it ended before its baseline was taken)' : ` (a ${escapeHtml(operation.kind)} is judged by its own status, shown below)`}.</p>`
    : `<div class="charts">${MEASURES.map((measure) => renderChart(measure, points)).join('')}</div>`;
  const rows = verdictRows(operation);
  const table = rows.length === 0
    ? '<p>No verdict was recorded.</p>'
    : `<table class="verdicts"><thead><tr><th>check</th><th>verdict</th><th>what was compared</th></tr></thead><tbody>${rows
      .map((row) => `<tr><td>${escapeHtml(row.check)}</td><td class="${VERDICT_CLASS[row.verdict]}">${row.verdict}</td><td>${escapeHtml(row.compared)}</td></tr>`)
      .join('')}</tbody></table>`;
  const when = points.map((point) => `${point.label} at ${new Date(point.snapshot.atMs).toISOString()}`).join(', ');
  const result = operation.result === undefined ? '' : `<h2>Status</h2><pre>${escapeHtml(JSON.stringify(operation.result, null, 2) ?? 'null')}</pre>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}: evidence</title><style>${STYLE}</style></head><body>`
    + `<h1>${escapeHtml(title)}</h1>`
    + (operation.runId ? `<p class="meta">run ${operation.reportUrl ? `<a class="run" href="${escapeHtml(operation.reportUrl)}">${escapeHtml(operation.runId)}</a> (this page's link: it keeps showing this run)` : escapeHtml(operation.runId)}</p>` : '')
    + `<p class="meta">status <b class="status">${escapeHtml(operation.status)}</b>, phase <b>${escapeHtml(String(operation.phase ?? '—'))}</b>; started ${escapeHtml(operation.startedAt)}${operation.closedAt ? `, closed ${escapeHtml(operation.closedAt)}` : ', still running'}</p>`
    + (operation.failure ? `<p class="fail">failure: ${escapeHtml(operation.failure)}</p>` : '')
    + `<h2>Evidence</h2>${when ? `<p class="meta">${escapeHtml(when)}</p>` : ''}${charts}`
    + `<h2>Verdicts</h2>${table}${result}</body></html>`;
}
