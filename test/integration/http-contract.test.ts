// The HTTP contract of DESIGN.md §6 on the real API (issue 33, item 7): every error, the ones
// Fastify and Node answer before a route runs included, is `{error, message}` with a code of
// protocol/errors.ts; an unknown method on a known path is 405 with Allow, an unknown path 404; and
// what the OpenAPI document declares is what the API accepts.
import http from 'node:http';
import { ERROR_CODES } from '../../protocol/errors';
import { createSourceFeed } from '../../store/source-feed';
import { runCli } from '../support/cli';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload } from '../../harness/workloads';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ agents: [{ id: 'contract-a', labels: { zone: 'a' }, slots: 8 }] });
});
afterAll(async () => {
  await stack?.stop();
});

/** A request as bytes on a socket (headers fetch would refuse to send), answered with status, headers and the parsed body. */
function raw(options: http.RequestOptions & { body?: string }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  const url = new URL(stack.apiUrl);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: url.hostname, port: url.port, ...options }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: JSON.parse(text) }));
    });
    request.on('error', reject);
    request.end(options.body);
  });
}

/** The one error shape: a known code whose status is the answer's, and a message. */
function expectErrorShape(answer: { status: number; body: any }, code: string) {
  expect(answer.body).toEqual({ error: code, message: expect.any(String) });
  expect(ERROR_CODES[code as keyof typeof ERROR_CODES].status).toBe(answer.status);
}

describe('errors before a route runs have the one shape', () => {
  it('answers an unknown method on a known path 405 with Allow, and an unknown path 404', async () => {
    const patch = await raw({ method: 'PATCH', path: '/v1/state', headers: { authorization: `Bearer ${stack.tokens.viewer}` } });
    expect(patch.status).toBe(405);
    expectErrorShape(patch, 'method-not-allowed');
    expect(patch.headers.allow).toBe('GET, HEAD');
    const putRescale = await raw({ method: 'GET', path: '/v1/jobs/clicks/operators/agg/rescale' });
    expect([putRescale.status, putRescale.headers.allow]).toEqual([405, 'POST']);
    const workload = await raw({ method: 'POST', path: '/v1/workloads/web' });
    expect(workload.status).toBe(405);
    expect(workload.headers.allow).toBe('DELETE, GET, HEAD, PUT');
    const unknown = await raw({ method: 'GET', path: '/v1/nothing/here' });
    expect(unknown.status).toBe(404);
    expectErrorShape(unknown, 'not-found');
    expect((await raw({ method: 'PATCH', path: '/v1/nothing/here' })).status).toBe(404);
  });

  it('answers headers too large 431, a path segment too long 414 and a body too large 413, each as {error, message}', async () => {
    const headers = await raw({ method: 'GET', path: '/healthz', headers: { 'x-filler': 'a'.repeat(20_000) } });
    expect(headers.status).toBe(431);
    expectErrorShape(headers, 'headers-too-large');
    const long = await raw({ method: 'GET', path: `/v1/tiers/${'a'.repeat(5000)}`, headers: { authorization: `Bearer ${stack.tokens.viewer}` } });
    expect(long.status).toBe(414);
    expectErrorShape(long, 'uri-too-long');
    // a valid workflow id (300 characters, any of them percent-encoded) is routed, never a 414
    const workflowId = encodeURIComponent('scale:' + '\u{1F4A5}'.repeat(147));
    expect(workflowId.length).toBeGreaterThan(1_700);
    expect((await raw({ method: 'GET', path: `/v1/operations/${workflowId}`, headers: { authorization: `Bearer ${stack.tokens.viewer}` } })).status).toBe(404);
    const body = await raw({
      method: 'POST', path: '/v1/workloads/web/plan', body: JSON.stringify({ replicas: 1, filler: 'a'.repeat(1_100_000) }),
      headers: { authorization: `Bearer ${stack.tokens.operator}`, 'content-type': 'application/json' },
    });
    expect(body.status).toBe(413);
    expectErrorShape(body, 'body-too-large');
    // and the API still serves
    expect((await stack.api('GET', '/healthz', { role: null })).status).toBe(200);
  });
});

describe('tiers and jobs list with no argument', () => {
  it('GET /v1/tiers lists every tier with a policy by name, and scalegate tiers prints them', async () => {
    expect((await stack.api('GET', '/v1/tiers', { role: 'viewer' })).body).toEqual({ tiers: [] });
    for (const tier of ['zeta', 'alpha']) {
      expect((await stack.api('PUT', `/v1/tiers/${tier}/policy`, { body: { workloads: [`${tier}-web`], maxReplicas: 4, targets: { qpsPerInstance: 50 } } })).status).toBe(201);
    }
    expect((await stack.api('PUT', '/v1/tiers/zeta/policy', { body: { workloads: ['zeta-web'], maxReplicas: 5, targets: { qpsPerInstance: 50 } } })).status).toBe(200);
    const listed = await stack.api('GET', '/v1/tiers', { role: 'viewer' });
    expect(listed.status).toBe(200);
    expect(listed.body.tiers.map((t: any) => [t.tier, t.revision, t.policy.maxReplicas, t.workflowId])).toEqual([['alpha', 1, 4, 'autoscale:alpha'], ['zeta', 2, 5, 'autoscale:zeta']]);
    const printed = await runCli(stack, ['tiers']);
    expect(printed).toMatchObject({ code: 0, stderr: '' });
    expect(printed.stdout).toMatch(/^TIER\s+WORKLOADS\s+REPLICAS\s+TARGETS\s+REVISION\s+UPDATED\nalpha\s+alpha-web\s+1–4\s+qpsPerInstance 50\s+1\s+.*\nzeta\s+zeta-web\s+1–5\s+qpsPerInstance 50\s+2\s+/m);
    const ages = (text: string) => text.replace(/(\S+ ago|now)$/gm, '');
    expect(ages((await runCli(stack, ['tiers', 'list'])).stdout)).toBe(ages(printed.stdout));
  });

  it('GET /v1/jobs lists every stream job (not a service) with its subtasks desired, placed and ready, and scalegate jobs prints them', async () => {
    await createSourceFeed(stack.db).ensureTables('contract_in');
    await defineWorkload(stack, 'contract-job', {
      kind: 'stream', selector: {},
      contract: { ownership: 'partitioned', partitions: 2, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
      spec: { source: 'contract_in', sink: 'contract_out', partitions: 2, checkpointIntervalMs: 500, operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }] },
    }, 3);
    await defineWorkload(stack, 'contract-web', { kind: 'service', replicas: 1, spec: { command: ['node', '-e', 'require("http").createServer((q, s) => s.end("ok")).listen(process.env.PORT)'], readiness: { http: '/' } } }, 1);
    const listed = await stack.waitFor('the job listed with its 3 subtasks ready', async () => {
      const answer = await stack.api('GET', '/v1/jobs', { role: 'viewer' });
      return answer.body.jobs?.[0]?.ready === 3 ? answer : null;
    });
    expect(listed.body).toEqual({ jobs: [{
      job: 'contract-job', generation: expect.any(Number), desired: 3, placed: 3, ready: 3,
      operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    }] });
    const printed = await runCli(stack, ['jobs']);
    expect(printed).toMatchObject({ code: 0, stderr: '' });
    expect(printed.stdout).toMatch(/^JOB\s+OPERATORS\s+GENERATION\s+DESIRED\s+PLACED\s+READY\ncontract-job\s+src 1 → agg 1 → out 1\s+\d+\s+3\s+3\s+3$/m);
    // and one job by name, as before
    expect((await runCli(stack, ['jobs', 'contract-job'])).stdout).toMatch(/^job:\s+contract-job$/m);
  });
});

describe('what the document refuses is refused', () => {
  it('a used Idempotency-Key with no body or a body the schema refuses is 400 / 422, not the first operation\'s 202', async () => {
    await defineWorkload(stack, 'contract-key', { kind: 'service', replicas: 1, spec: { command: ['node', '-e', 'require("http").createServer((q, s) => s.end("ok")).listen(process.env.PORT)'], readiness: { http: '/' } } }, 1);
    const headers = { authorization: `Bearer ${stack.tokens.operator}`, 'content-type': 'application/json', 'idempotency-key': 'contract-key-1' };
    const first = await raw({ method: 'POST', path: '/v1/workloads/contract-key/scale', headers, body: JSON.stringify({ replicas: 2, soakMs: 0 }) });
    expect(first).toMatchObject({ status: 202, body: { workflowId: 'scale:contract-key' } });
    const { 'content-type': _type, ...noBodyHeaders } = headers;
    const noBody = await raw({ method: 'POST', path: '/v1/workloads/contract-key/scale', headers: noBodyHeaders });
    expect(noBody.status).toBe(400);
    expectErrorShape(noBody, 'bad-request');
    const zero = await raw({ method: 'POST', path: '/v1/workloads/contract-key/scale', headers, body: JSON.stringify({ replicas: 0 }) });
    expect(zero.status).toBe(422);
    expect(zero.body).toMatchObject({ error: 'validation-failed', issues: expect.arrayContaining([expect.objectContaining({ path: 'body.replicas' })]) });
    // "all" is a definition's replicas, no scale's: the document says integer, the API refuses it as malformed
    const allReplicas = await stack.api('POST', '/v1/workloads/contract-key/scale', { body: { replicas: 'all' } });
    expect(allReplicas).toMatchObject({ status: 422, body: { error: 'validation-failed', issues: [{ path: 'body.replicas', message: 'scale takes a replica count; "all" is a workload definition (PUT)' }] } });
    // the same request again is still answered the operation it started
    const again = await raw({ method: 'POST', path: '/v1/workloads/contract-key/scale', headers, body: JSON.stringify({ replicas: 2, soakMs: 0 }) });
    expect(again).toMatchObject({ status: 202, body: { workflowId: 'scale:contract-key', runId: first.body.runId } });
  });
});
