// The metrics a Kubernetes workload's contract names (domain/pod-metrics.ts): reading the text
// format, a pod's figures from two readings, and the judgement after a scale-out, each able to fail.
import { baselineMetricProblems, compareMetrics, parseExposition, podFigures, type DeclaredMetric, type MetricsReading } from '../../domain/pod-metrics';
import { WorkloadDefinitionSchema } from '../../protocol';

const ERRORS: DeclaredMetric = { name: 'app_errors_total', better: 'lower', tolerance: 0.2 };
const SERVED: DeclaredMetric = { name: 'app_served_total', better: 'higher', tolerance: 0.2 };
const reading = (pods: Record<string, Record<string, number> | string>): MetricsReading => ({
  windowMs: 1000, counters: ['app_errors_total', 'app_served_total'],
  pods: Object.entries(pods).map(([pod, figures]) => (typeof figures === 'string' ? { pod, figures: {}, error: figures } : { pod, figures })),
});

describe('parseExposition', () => {
  it('sums the series of each wanted name, types it by # TYPE or by _total, and skips the rest', () => {
    const text = [
      '# HELP app_errors_total errors', '# TYPE app_errors_total counter',
      'app_errors_total{code="500"} 3', 'app_errors_total{code="503"} 4 1700000000000',
      '# TYPE app_queue gauge', 'app_queue 12.5', 'app_requests 9', 'other_total 100', '',
    ].join('\n');
    expect(parseExposition(text, ['app_errors_total', 'app_queue', 'app_requests', 'missing_total'])).toEqual({
      app_errors_total: { value: 7, type: 'counter' },
      app_queue: { value: 12.5, type: 'gauge' },
      app_requests: { value: 9, type: 'gauge' },
    });
    expect(parseExposition('x_total 1\n', ['x_total'])).toEqual({ x_total: { value: 1, type: 'counter' } });
  });

  it('refuses a value that is not a finite number', () => {
    expect(() => parseExposition('app_errors_total NaN\n', ['app_errors_total'])).toThrow('app_errors_total is not a finite number');
  });
});

describe('podFigures', () => {
  it('is a counter\'s increase per second, a reset counter\'s value since, and a gauge\'s second value', () => {
    const first = { a_total: { value: 10, type: 'counter' as const }, r_total: { value: 50, type: 'counter' as const }, g: { value: 1, type: 'gauge' as const } };
    const second = { a_total: { value: 30, type: 'counter' as const }, r_total: { value: 4, type: 'counter' as const }, g: { value: 7, type: 'gauge' as const }, new_total: { value: 5, type: 'counter' as const } };
    expect(podFigures('p', first, second, 2000)).toEqual({ pod: 'p', figures: { a_total: 10, r_total: 2, g: 7 } });
  });
});

describe('baselineMetricProblems', () => {
  it('names pods not read and metrics not served; none when every pod serves every metric', () => {
    expect(baselineMetricProblems([ERRORS], reading({ a: { app_errors_total: 0 }, b: { app_errors_total: 1 } }))).toEqual([]);
    expect(baselineMetricProblems([ERRORS, SERVED], reading({ a: { app_errors_total: 0 }, b: '503 no metrics' }))).toEqual([
      'b: 503 no metrics', 'app_served_total not served by a',
    ]);
    expect(baselineMetricProblems([ERRORS], reading({}))).toEqual(['no Ready pod to read the baseline from']);
  });
});

describe('compareMetrics', () => {
  it('passes within the tolerance, either way it is better', () => {
    const rows = compareMetrics([ERRORS, SERVED], reading({ a: { app_errors_total: 1, app_served_total: 100 } }), reading({ a: { app_errors_total: 1.1, app_served_total: 90 }, b: { app_errors_total: 1.1, app_served_total: 85 } }));
    expect(rows.map((r) => [r.check, r.verdict])).toEqual([['metric app_errors_total', 'pass'], ['metric app_served_total', 'pass']]);
    expect(rows[0].detail).toBe('1.00/s a pod over 1 pod(s) before, 1.10/s over 2 after (lower is better, tolerance 20 %: at most 1.20/s)');
  });

  it('is a regression past the tolerance the wrong way, and from a baseline of 0 any move the wrong way', () => {
    const worse = compareMetrics([ERRORS, SERVED], reading({ a: { app_errors_total: 1, app_served_total: 100 } }), reading({ a: { app_errors_total: 1.3, app_served_total: 70 } }));
    expect(worse.map((r) => r.verdict)).toEqual(['regression', 'regression']);
    expect(compareMetrics([ERRORS], reading({ a: { app_errors_total: 0 } }), reading({ a: { app_errors_total: 0.01 } }))[0].verdict).toBe('regression');
    expect(compareMetrics([ERRORS], reading({ a: { app_errors_total: 0 } }), reading({ a: { app_errors_total: 0 } }))[0].verdict).toBe('pass');
    // better the right way is never a regression, however far
    expect(compareMetrics([ERRORS], reading({ a: { app_errors_total: 5 } }), reading({ a: { app_errors_total: 0 } }))[0].verdict).toBe('pass');
  });

  it('is a regression when a pod after the change was not read or does not serve it: a figure not read is not a good one', () => {
    const rows = compareMetrics([ERRORS], reading({ a: { app_errors_total: 1 } }), reading({ a: { app_errors_total: 1 }, b: '502 Bad Gateway', c: {} }));
    expect(rows[0]).toMatchObject({ verdict: 'regression', after: null, detail: 'not read after the change from b (502 Bad Gateway), c (not served)' });
    expect(compareMetrics([ERRORS], reading({ a: { app_errors_total: 1 } }), reading({}))[0]).toMatchObject({ verdict: 'regression', detail: 'no Ready pod to read after the change' });
  });
});

describe('the contract names metrics only where pods serve them', () => {
  const kubernetes = { cluster: 'c', namespace: 'default', kind: 'Deployment', name: 'web' };
  const contract = { downstream: 'none', metrics: [{ name: 'app_errors_total', better: 'lower' }] };

  it('takes metrics with an endpoint, filling the defaults', () => {
    const parsed = WorkloadDefinitionSchema.parse({ kind: 'service', replicas: 2, contract, runtime: { kubernetes: { ...kubernetes, metrics: { port: 9102 } } } });
    expect(parsed.contract.metrics).toEqual([{ name: 'app_errors_total', better: 'lower', tolerance: 0.2 }]);
    expect(parsed.kind === 'service' && parsed.runtime?.kubernetes.metrics).toEqual({ port: 9102, path: '/metrics', windowMs: 5000 });
  });

  it('refuses metrics with nowhere to read them, a name twice, and a name that is not a metric name', () => {
    const issues = (body: unknown) => WorkloadDefinitionSchema.safeParse(body).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];
    expect(issues({ kind: 'service', replicas: 2, contract, runtime: { kubernetes } })).toEqual([
      'contract.metrics: contract.metrics are read from a Kubernetes workload\'s pods: name where they serve them (runtime.kubernetes.metrics: {"port": …})',
    ]);
    expect(issues({ kind: 'service', replicas: 2, contract, spec: { command: ['node'] } })).toHaveLength(1);
    expect(issues({ kind: 'service', replicas: 2, contract: { metrics: [contract.metrics[0], contract.metrics[0]] }, runtime: { kubernetes: { ...kubernetes, metrics: { port: 9102 } } } }))
      .toEqual(['contract.metrics: each metric is named once']);
    expect(issues({ kind: 'service', replicas: 2, contract: { metrics: [{ name: 'bad-name', better: 'lower' }] }, runtime: { kubernetes: { ...kubernetes, metrics: { port: 9102, path: '/m?x=1' } } } })).toEqual([
      'contract.metrics.0.name: a metric name is a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)',
      'runtime.kubernetes.metrics.path: a path starts with / and holds no query',
    ]);
  });
});
