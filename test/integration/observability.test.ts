// What an operator watches: /metrics (prom-client, process metrics included, every scalegate
// figure read from its real source), the processes' JSON logs scoped by workload, workflow and
// runtime with no token in them, and the search attributes the worker registers on any server.
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import path from 'node:path';
import { parseApiConfig } from '../../api/config';
import type { ApiDeps } from '../../api/deps';
import { allRoutes } from '../../api/server';
import { createMetrics, METRIC_LABELS, LABEL_VALUES, UNMATCHED_ROUTE, type DynamicLabel, type MetricSources } from '../../api/metrics';
import { ensureSearchAttributes, SearchAttributeSetupError } from '../../workers/orchestrator';
import { testEnv } from '../../harness/env';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload, scaleAndWait } from '../../harness/workloads';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const service = (replicas: number, extra: Record<string, unknown> = {}) => ({
  kind: 'service', replicas, selector: { pool: 'obs' }, contract: SERVICE_CONTRACT,
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 }, ...extra,
});

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: 3000,
    // every line the processes can write: debug
    env: { SCALEGATE_LOG_LEVEL: 'debug' },
    agents: [{ id: 'obs-a', labels: { zone: 'a', pool: 'obs' } }, { id: 'obs-b', labels: { zone: 'b', pool: 'obs' } }],
  });
});
afterAll(async () => {
  await stack?.stop();
});

/** One sample of the Prometheus text: `name{labels} value`, labels as written (escaped). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | null {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const written = match[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => written.includes(`${k}="${v}"`))) return Number(match[3]);
  }
  return null;
}
/** Every sample of the Prometheus text: its name, its labels (unescaped) and its value. */
function samples(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const found = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    const written = match[2] ?? '';
    const pair = /([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)",?/y;
    for (let at = 0; at < written.length;) {
      pair.lastIndex = at;
      const m = pair.exec(written);
      if (!m) throw new Error(`bad labels in ${JSON.stringify(line)}`);
      labels[m[1]] = m[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      at = pair.lastIndex;
    }
    found.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return found;
}
/** The labels of a sample that are outside METRIC_LABELS, as `metric{label="value"}` (none: []). */
function undeclaredLabels(text: string, dynamic: Record<DynamicLabel, readonly string[]>): string[] {
  const declared: Record<string, Record<string, string>> = METRIC_LABELS;
  const problems: string[] = [];
  for (const { name, labels } of samples(text).filter((s) => s.name.startsWith('scalegate_'))) {
    const base = /^(.*?)(_bucket|_sum|_count)?$/.exec(name)!;
    const metric = declared[name] ? name : base[1];
    if (!declared[metric]) {
      problems.push(`${name}: not declared`);
      continue;
    }
    for (const [label, value] of Object.entries(labels)) {
      if (label === 'le' && base[2] === '_bucket') continue; // a histogram's bucket bounds, fixed by its definition
      const source = declared[metric][label];
      const allowed: readonly string[] | undefined = source === undefined ? undefined
        : source in dynamic ? dynamic[source as DynamicLabel] : LABEL_VALUES[source as keyof typeof LABEL_VALUES];
      if (!allowed?.includes(value)) problems.push(`${name}{${label}=${JSON.stringify(value)}}`);
    }
  }
  return problems;
}
const scrape = async () => {
  const response = await stack.api('GET', '/metrics', { role: null });
  expect(response.status).toBe(200);
  return response.body as string;
};

describe('operations, logs and metrics on one stack', () => {
  const name = 'obs-web';
  let started: { workflowId: string; runId: string };

  beforeAll(async () => {
    // viewer and operator tokens at work: a scale-out that completes, one that is refused by a gate
    await defineWorkload(stack, name, service(1), 1);
    const operation = await scaleAndWait(stack, name, { replicas: 2, soakMs: 0, reason: 'observability' }, 'scaleOut');
    expect(operation.status).toBe('completed');
    started = { workflowId: operation.workflowId, runId: operation.runId };
    await defineWorkload(stack, 'obs-unknown', service(1, { contract: { ...SERVICE_CONTRACT, delivery: 'unknown' } }), 1);
    expect((await scaleAndWait(stack, 'obs-unknown', { replicas: 2, soakMs: 0 }, 'scaleOut')).status).toBe('refused');
    // a workload nothing matches: unplaced
    expect((await stack.api('PUT', '/v1/workloads/obs-nowhere', { body: service(1, { selector: { pool: 'none' } }) })).status).toBe(201);
    // the agent token at work: a runtime that registers and never heartbeats, so its lease expires
    const ghost = await stack.api('POST', '/v1/runtimes', { role: 'agent', body: { id: 'obs-ghost', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 1 } });
    expect(ghost.status).toBe(201);
    await stack.waitFor('obs-ghost LOST', async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body.runtimes.find((r: any) => r.id === 'obs-ghost')?.status === 'LOST');
    // The API reports what the sweeper declared on its next liveness tick (every lease/3): wait for it.
    await stack.waitFor('the API to report obs-ghost LOST', async () => stack.logs.some((line) => line.includes('lease expired: runtime LOST') && line.includes('obs-ghost')));
    await stack.waitFor('obs-nowhere unplaced', async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body.unplaced.some((u: any) => u.workload === 'obs-nowhere'));
  });

  it('serves prom-client metrics with the process metrics and every scalegate figure from its source', async () => {
    // Figures from Temporal's histories appear once its visibility lists the closed operation.
    const text = await stack.waitFor('converge and placement pass durations in /metrics', async () => {
      const t = await scrape();
      return (sample(t, 'scalegate_converge_duration_seconds_count', { kind: 'scale-out', outcome: 'completed' }) ?? 0) >= 1 &&
        (sample(t, 'scalegate_placement_pass_duration_seconds_count') ?? 0) >= 1 ? t : null;
    });
    // prom-client's default process metrics
    expect(sample(text, 'process_cpu_user_seconds_total')).not.toBeNull();
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_eventloop_lag_seconds')).not.toBeNull();
    // operations: started from Temporal visibility, ended from the ledger
    expect(sample(text, 'scalegate_operations_started_total', { kind: 'scale-out' })).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'scalegate_operations_started_total', { kind: 'apply' })).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'scalegate_operations_completed_total', { kind: 'scale-out' })).toBe(1);
    expect(sample(text, 'scalegate_operations_refused_total', { kind: 'scale-out' })).toBe(1);
    expect(sample(text, 'scalegate_operations_compensated_total', { kind: 'scale-out' })).toBe(0);
    expect(sample(text, 'scalegate_ledger_events_total', { kind: 'scale-out', outcome: 'refused' })).toBe(1);
    expect(sample(text, 'scalegate_gate_failures_total', { gate: 'delivery' })).toBe(1);
    // placement passes and skips from the reconcile marker
    expect(sample(text, 'scalegate_placement_passes_total')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'scalegate_placement_pass_skips_total')).not.toBeNull();
    expect(sample(text, 'scalegate_unplaced_workloads', { reason: 'placement-unavailable' })).toBe(1);
    expect(sample(text, 'scalegate_lease_expirations_total')).toBeGreaterThanOrEqual(1);
    expect(text).toContain('# TYPE scalegate_recoveries_total counter');
    expect(sample(text, 'scalegate_runtimes', { status: 'LOST' })).toBe(1);
    // HTTP requests by route (the route pattern, not the path) and status
    expect(sample(text, 'scalegate_http_requests_total', { method: 'POST', route: '/v1/workloads/:name/scale', status: '202' })).toBe(2);
    expect(sample(text, 'scalegate_http_requests_total', { method: 'PUT', route: '/v1/workloads/:name', status: '201' })).toBe(3);
    expect(sample(text, 'scalegate_metrics_source_up', { source: 'temporal' })).toBe(1);
    expect(sample(text, 'scalegate_metrics_source_up', { source: 'postgres' })).toBe(1);
  });

  it('exports desired, placed and ready replicas per workload, the figures of /v1/state, and none for a retired one', async () => {
    // a workload retired at once (nothing placed): it keeps no series
    expect((await stack.api('PUT', '/v1/workloads/obs-gone', { body: service(1, { selector: { pool: 'none' } }) })).status).toBe(201);
    // (409 while the reconcile loop's apply of it still holds scale:obs-gone)
    await stack.waitFor('obs-gone retired', async () => (await stack.api('DELETE', '/v1/workloads/obs-gone')).status === 202);
    const figures = (text: string, workload: string) =>
      Object.fromEntries(['desired', 'placed', 'ready'].map((state) => [state, sample(text, 'scalegate_workload_replicas', { workload, state })]));
    // One scrape and one read of the state that agree (a heartbeat between the two may move `ready`).
    const { text, state } = await stack.waitFor('the replica gauges equal to /v1/state', async () => {
      const t = await scrape();
      const s = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
      const web = s.workloads.find((w: any) => w.name === name);
      if (!web || web.ready !== 2) return null;
      const agree = s.workloads.filter((w: any) => w.status !== 'retired')
        .every((w: any) => JSON.stringify(figures(t, w.name)) === JSON.stringify({ desired: w.desired, placed: w.placed, ready: w.ready }));
      return agree ? { text: t, state: s } : null;
    });
    expect(state.workloads.find((w: any) => w.name === name)).toMatchObject({ replicas: 2, desired: 2, placed: 2, ready: 2 });
    expect(figures(text, name)).toEqual({ desired: 2, placed: 2, ready: 2 });
    expect(figures(text, 'obs-nowhere')).toEqual({ desired: 1, placed: 0, ready: 0 });
    expect(state.workloads.find((w: any) => w.name === 'obs-gone')).toMatchObject({ status: 'retired' });
    expect(text).not.toContain('workload="obs-gone"');
  });

  it('takes every label value of every scalegate_* metric from its declared enum, free text in the sources included', async () => {
    // What the sources may hold beyond the enums: a refusal's free-text decision (cut, with line
    // breaks), a kind and an outcome from elsewhere, a gate row no version of scalegate writes.
    const refusal = `refused: ${'scale-out 1 → 2 ended refused: the delivery gate failed\nmissing evidence: '.repeat(8)}`.slice(0, 300);
    await stack.db.query(
      `insert into ledger (kind, workload, reason, inputs, outcome) values
         ('autoscale', $1, 'free text', $2, 'refused'),
         ('autoscale', $1, 'free text', '{"decision": "no-change: within tolerance"}', 'no-change'),
         ('some kind\nof row', $1, 'free text', $3, 'an outcome, with words')`,
      [name, JSON.stringify({ decision: refusal }), JSON.stringify({ gates: [{ gate: 'a gate\nnobody knows', passed: false }] })],
    );
    // A raw URL with a query, one no route matches, and a method none serves.
    await stack.api('GET', `/v1/workloads/${name}?view=full`, { role: 'viewer' });
    await stack.api('GET', `/v1/no/such/path/${Date.now()}`, { role: null });
    await fetch(`${stack.apiUrl}/v1/state`, { method: 'PROPFIND' }).catch(() => null);

    const text = await scrape();
    const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    // the route table, built as the API builds it (its handlers do not run)
    const config = parseApiConfig({ DATABASE_URL: stack.databaseUrl, SCALEGATE_OPERATOR_TOKEN: stack.tokens.operator, SCALEGATE_AGENT_TOKEN: stack.tokens.agent, SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer });
    const routes = [...allRoutes({ config, db: stack.db } as Partial<ApiDeps> as ApiDeps).map((r) => r.path), UNMATCHED_ROUTE];
    expect(routes).toEqual(expect.arrayContaining(['/v1/state', '/v1/workloads/:name', '/metrics']));
    const workloads = state.workloads.filter((w: any) => w.status !== 'retired').map((w: any) => w.name);
    expect(undeclaredLabels(text, { route: routes, workload: workloads })).toEqual([]);
    // the free text counted under its code, never copied
    expect(sample(text, 'scalegate_autoscaler_decisions_total', { decision: 'refused' })).toBe(1);
    expect(sample(text, 'scalegate_autoscaler_decisions_total', { decision: 'within-tolerance' })).toBe(1);
    expect(sample(text, 'scalegate_ledger_events_total', { kind: 'other', outcome: 'other' })).toBe(1);
    expect(sample(text, 'scalegate_gate_failures_total', { gate: 'other' })).toBe(1);
    expect(sample(text, 'scalegate_http_requests_total', { method: 'GET', route: '/v1/workloads/:name', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'scalegate_http_requests_total', { route: UNMATCHED_ROUTE, status: '404' })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain('delivery gate failed');
    // and the check bites: a free-text label is reported
    expect(undeclaredLabels('scalegate_gate_failures_total{gate="the delivery gate failed"} 1', { route: routes, workload: workloads }))
      .toEqual(['scalegate_gate_failures_total{gate="the delivery gate failed"}']);
  });

  it('writes JSON log lines scoped by workload, workflow and runtime', async () => {
    const lines = stack.logs.map((line) => {
      const match = /^\[([^\]]+)\] (.*)$/.exec(line);
      try {
        return { service: match?.[1] ?? '', entry: JSON.parse(match?.[2] ?? '') as Record<string, unknown> };
      } catch {
        return { service: match?.[1] ?? '', entry: null };
      }
    });
    const of = (service: string) => lines.filter((l) => l.service === service);
    for (const service of ['api', 'worker']) {
      const own = of(service);
      expect(own.length).toBeGreaterThan(0);
      expect(own.filter((l) => l.entry === null).map((l) => l.entry)).toEqual([]); // every line is JSON
      expect(own.every((l) => typeof l.entry?.at === 'string' && typeof l.entry?.level === 'string' && typeof l.entry?.msg === 'string')).toBe(true);
    }
    // the API: the scale request names its workload and the workflow it started
    expect(of('api').map((l) => l.entry)).toContainEqual(expect.objectContaining({
      msg: 'request', route: '/v1/workloads/:name/scale', status: 202, workload: name, workflow: started.workflowId,
    }));
    // the API: a heartbeat names its runtime; the lease sweeper names the runtime it declared LOST
    expect(of('api').map((l) => l.entry)).toContainEqual(expect.objectContaining({ route: '/v1/runtimes/:id/heartbeat', runtime: 'obs-a' }));
    expect(of('api').map((l) => l.entry)).toContainEqual(expect.objectContaining({ runtime: 'obs-ghost', msg: 'lease expired: runtime LOST' }));
    // the worker: the SDK's lines about the scale-out name its workflow and workload
    expect(of('worker').map((l) => l.entry)).toContainEqual(expect.objectContaining({ workflow: started.workflowId, workload: name }));
    // the agents scope every line by runtime
    expect(of('agent:obs-a').some((l) => l.entry?.runtime === 'obs-a')).toBe(true);
  });

  it('prints no token: every role, the runtimes\' credentials and a bad token, after requests with each', async () => {
    const bad = `bad-token-${'x'.repeat(30)}`;
    const driven = [
      await stack.api('GET', '/v1/state', { role: 'viewer' }),
      await stack.api('GET', `/v1/workloads/${name}`, { role: 'operator' }),
      await stack.api('POST', `/v1/workloads/${name}/plan`, { role: 'operator', body: { replicas: 1 } }),
      await stack.api('GET', '/v1/state', { role: 'agent' }), // forbidden: the agent token reads no state
      await stack.api('POST', `/v1/workloads/${name}/scale`, { role: 'viewer', body: { replicas: 3 } }), // forbidden
      await stack.api('GET', '/v1/state', { token: bad }),
      await stack.api('POST', '/v1/runtimes', { token: bad, body: { id: 'obs-bad', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 1 } }),
      await stack.api('POST', '/v1/runtimes/obs-a/heartbeat', { token: bad, body: { fence: 1, tasks: [] } }),
      await stack.agentApi('obs-a', 'GET', '/v1/tasks', undefined, { token: bad }),
    ];
    expect(driven.map((r) => r.status)).toEqual([200, 200, 201, 403, 403, 401, 401, 401, 401]);
    // a scale with the operator token, so the worker calls the agents with their credentials again
    await scaleAndWait(stack, name, { replicas: 1, drainTimeoutMs: 2000 }, 'scaleIn');

    const credentials = Object.values(await stack.runtimeCredentials());
    expect(credentials.length).toBeGreaterThanOrEqual(2);
    const secrets = { ...stack.tokens, bad, ...Object.fromEntries(credentials.map((c, i) => [`credential ${i}`, c])) };
    const output = stack.logs.join('\n');
    expect(output.length).toBeGreaterThan(10_000); // the debug output of five processes, not an empty log
    const leaked = Object.entries(secrets).filter(([, secret]) => output.includes(secret)).map(([role]) => role);
    expect(leaked).toEqual([]);
  });
});

describe('/metrics rendering', () => {
  it('counts a value outside its label\'s enum as `other`, and escapes nothing it copies because it copies no free text', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const sources: MetricSources = {
      taskQueue: 'q',
      ledgerStats: async () => ({
        byOutcome: [{ kind: 'odd"kind\\with\nnewline', outcome: 'completed', count: 2 }, { kind: 'scale-out', outcome: 'refused', count: 1 }],
        gateFailures: [{ gate: 'delivery', count: 1 }, { gate: 'no such gate', count: 2 }],
        autoscaleDecisions: [{ decision: 'refused: scale-out 2 → 3 ended refused: gates\nfailed: deliv', count: 3 }, { decision: 'no-change: cooldown', count: 1 }],
      }),
      reconcileMarker: async () => ({ passes: 0, skips: 0 }),
      unplaced: async () => [{ workload: 'w', reason: 'placement-unavailable' }, { workload: 'v', reason: 'no runtime\nat all' }],
      runtimes: async () => [],
      workloads: async () => [],
      placements: async () => [],
      temporal: async () => { throw new Error('no Temporal in this test'); },
    };
    metrics.declareRoutes(['/v1/workloads/:name']);
    metrics.countRequest('GET', '/v1/workloads/:name', 200);
    metrics.countRequest('GET', '/v1/workloads/web', 200); // a raw URL is no route
    metrics.countRequest('BREW', undefined, 404);
    const text = await metrics.render(sources);
    const expected = [
      'scalegate_ledger_events_total{kind="other",outcome="completed"} 2',
      'scalegate_ledger_events_total{kind="scale-out",outcome="refused"} 1',
      'scalegate_gate_failures_total{gate="delivery"} 1',
      'scalegate_gate_failures_total{gate="other"} 2',
      'scalegate_autoscaler_decisions_total{decision="refused"} 3',
      'scalegate_autoscaler_decisions_total{decision="cooldown"} 1',
      'scalegate_unplaced_workloads{reason="placement-unavailable"} 1',
      'scalegate_unplaced_workloads{reason="other"} 1',
      'scalegate_http_requests_total{method="GET",route="/v1/workloads/:name",status="200"} 1',
      'scalegate_http_requests_total{method="GET",route="unmatched",status="200"} 1',
      'scalegate_http_requests_total{method="other",route="unmatched",status="404"} 1',
      'scalegate_metrics_source_up{source="temporal"} 0',
    ];
    expect(expected.filter((line) => !text.split('\n').includes(line))).toEqual([]);
    expect(undeclaredLabels(text, { route: ['/v1/workloads/:name', UNMATCHED_ROUTE], workload: [] })).toEqual([]);
  });
});

describe('search attributes registered by the worker on any server', () => {
  let connection: Connection;
  beforeAll(async () => {
    connection = await Connection.connect({ address: testEnv().temporalAddress });
  });
  afterAll(async () => {
    await connection?.close();
  });

  it('adds the missing ones in a fresh namespace, then finds them all there (idempotent)', async () => {
    const namespace = `obs-sa-${Date.now()}`;
    await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    await stack.waitFor(`namespace ${namespace}`, async () => connection.workflowService.describeNamespace({ namespace }).then(() => true, () => false));
    expect(await ensureSearchAttributes(connection.operatorService, namespace)).toEqual({ added: ['ScalegateWorkload', 'ScalegateOperation', 'ScalegatePhase', 'ScalegateOutcome'] });
    expect(await ensureSearchAttributes(connection.operatorService, namespace)).toEqual({ added: [] });
    const listed = (await connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
    expect(Object.keys(listed)).toEqual(expect.arrayContaining(['ScalegateWorkload', 'ScalegateOperation', 'ScalegatePhase', 'ScalegateOutcome']));
  });

  it('leaves the dev server\'s own registration alone', async () => {
    expect(await ensureSearchAttributes(connection.operatorService, 'default')).toEqual({ added: [] });
  });

  it('says clearly when this identity may not add them, with the command an administrator can run', async () => {
    const denied = Object.assign(new Error('7 PERMISSION_DENIED: Request unauthorized.'), { code: 7, details: 'Request unauthorized.' });
    const operator = {
      listSearchAttributes: async () => ({ customAttributes: { ScalegateWorkload: 2 } }),
      addSearchAttributes: async () => { throw denied; },
    } as unknown as Parameters<typeof ensureSearchAttributes>[0];
    const error = await ensureSearchAttributes(operator, 'prod').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SearchAttributeSetupError);
    expect((error as SearchAttributeSetupError).missing).toEqual(['ScalegateOperation', 'ScalegatePhase', 'ScalegateOutcome']);
    expect((error as Error).message).toMatch(/lacks the permission/);
    expect((error as Error).message).toContain('temporal operator search-attribute create --namespace prod --name ScalegateOperation --type Keyword --name ScalegatePhase --type Keyword');
  });

  it('refuses an attribute that exists with another type', async () => {
    const operator = {
      listSearchAttributes: async () => ({ customAttributes: { ScalegateWorkload: 2, ScalegateOperation: 2, ScalegatePhase: 1 } }),
      addSearchAttributes: async () => ({}),
    } as unknown as Parameters<typeof ensureSearchAttributes>[0];
    await expect(ensureSearchAttributes(operator, 'default')).rejects.toThrow(/ScalegatePhase exists as TEXT, scalegate needs KEYWORD/);
  });
});
