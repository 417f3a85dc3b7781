// The metrics a Kubernetes workload's contract names (issue 37), pure: reading Prometheus's text
// format, turning two readings of a pod into its figures (a counter's rate per second, a gauge's
// value), and judging the figures after a scale-out against the baseline. The runtime port reads
// the pods through the API server's proxy (runtimes/kubernetes.ts); these decide.
import type { ComparisonRow } from './evidence';

export interface DeclaredMetric {
  name: string;
  better: 'lower' | 'higher';
  /** how far, relative to the baseline, the figure may move the wrong way */
  tolerance: number;
}

export type MetricType = 'counter' | 'gauge';

/** One pod's figures for the declared metrics (a counter as its rate per second over the window), or why there are none. */
export interface PodMetricFigures {
  pod: string;
  /** by metric name; a metric the pod does not serve is absent */
  figures: Record<string, number>;
  /** the pod could not be read (its answer, or the API server's refusal) */
  error?: string;
}

export interface MetricsReading {
  windowMs: number;
  pods: PodMetricFigures[];
  /** the declared metrics some pod typed a counter (their figures are rates per second) */
  counters: string[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+-?\d+)?$/;

/**
 * The values of `names` in a text exposition, each series of a name summed (its labels are the
 * pod's own breakdown), and each name's type: a `# TYPE` line's, else a counter when it ends in
 * `_total`. A name the text does not carry is absent; a value that is not a number is an error.
 */
export function parseExposition(text: string, names: readonly string[]): Record<string, { value: number; type: MetricType }> {
  const wanted = new Set(names);
  const typed: Record<string, string> = {};
  const values: Record<string, { value: number; type: MetricType }> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const type = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (type) typed[type[1]] = type[2];
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (!sample || !wanted.has(sample[1])) continue;
    const value = Number(sample[3]);
    if (!Number.isFinite(value)) throw new Error(`${sample[1]} is not a finite number: "${sample[3]}"`);
    const name = sample[1];
    const type: MetricType = (typed[name] ?? (name.endsWith('_total') ? 'counter' : 'gauge')) === 'counter' ? 'counter' : 'gauge';
    values[name] = { value: (values[name]?.value ?? 0) + value, type };
  }
  return values;
}

/**
 * A pod's figures from its two readings `elapsedMs` apart: a counter's increase per second (a
 * counter that went down was reset: what it counted since is its increase), a gauge's second value.
 */
export function podFigures(
  pod: string, first: Record<string, { value: number; type: MetricType }>, second: Record<string, { value: number; type: MetricType }>, elapsedMs: number,
): PodMetricFigures {
  const figures: Record<string, number> = {};
  for (const [name, now] of Object.entries(second)) {
    if (now.type === 'gauge') {
      figures[name] = now.value;
      continue;
    }
    const before = first[name];
    if (!before) continue; // one reading only: no rate
    const increase = now.value >= before.value ? now.value - before.value : now.value;
    figures[name] = increase / Math.max(elapsedMs / 1000, 1e-3);
  }
  return { pod, figures };
}

/** What stops a baseline from being judged against: pods not read, or not serving a declared metric. Empty: it can be. */
export function baselineMetricProblems(declared: readonly DeclaredMetric[], reading: MetricsReading): string[] {
  if (reading.pods.length === 0) return ['no Ready pod to read the baseline from'];
  return [
    ...reading.pods.filter((p) => p.error).map((p) => `${p.pod}: ${p.error}`),
    ...declared.flatMap((metric) => {
      const missing = reading.pods.filter((p) => !p.error && !(metric.name in p.figures)).map((p) => p.pod);
      return missing.length ? [`${metric.name} not served by ${missing.join(', ')}`] : [];
    }),
  ];
}

const round = (n: number) => (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 1 ? n.toFixed(2) : n.toPrecision(2));

/** The mean figure a pod of `metric` over the pods that serve it. */
function meanOf(reading: MetricsReading, metric: string): { mean: number; pods: number } {
  const values = reading.pods.filter((p) => !p.error && metric in p.figures).map((p) => p.figures[metric]);
  return { mean: values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0, pods: values.length };
}

/**
 * One comparison row per declared metric: its mean a pod after the change against the baseline's.
 * A regression when it moved the wrong way past its tolerance (from a baseline of 0, any move the
 * wrong way), and when a pod after the change could not be read or does not serve it: a figure
 * not read is never taken for a good one.
 */
export function compareMetrics(declared: readonly DeclaredMetric[], baseline: MetricsReading, after: MetricsReading): ComparisonRow[] {
  return declared.map((metric) => {
    const before = meanOf(baseline, metric.name);
    const now = meanOf(after, metric.name);
    const unit = [...baseline.counters, ...after.counters].includes(metric.name) ? '/s' : '';
    const unread = after.pods.filter((p) => p.error || !(metric.name in p.figures)).map((p) => (p.error ? `${p.pod} (${p.error})` : `${p.pod} (not served)`));
    const check = `metric ${metric.name}`;
    if (unread.length || after.pods.length === 0) {
      return {
        check, verdict: 'regression', baseline: before.mean, after: null,
        detail: after.pods.length === 0 ? 'no Ready pod to read after the change' : `not read after the change from ${unread.join(', ')}`,
      };
    }
    const limit = metric.better === 'lower' ? before.mean * (1 + metric.tolerance) : before.mean * (1 - metric.tolerance);
    const worse = metric.better === 'lower' ? now.mean > limit && now.mean > before.mean : now.mean < limit && now.mean < before.mean;
    const detail = `${round(before.mean)}${unit} a pod over ${before.pods} pod(s) before, ${round(now.mean)}${unit} over ${now.pods} after `
      + `(${metric.better} is better, tolerance ${Math.round(metric.tolerance * 100)} %: ${metric.better === 'lower' ? 'at most' : 'at least'} ${round(limit)}${unit})`;
    return { check, verdict: worse ? 'regression' : 'pass', baseline: before.mean, after: now.mean, detail };
  });
}
