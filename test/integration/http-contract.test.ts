// The HTTP contract of DESIGN.md §6 on the real API (issue 33, item 7): every error, the ones
// Fastify and Node answer before a route runs included, is `{error, message}` with a code of
// protocol/errors.ts; an unknown method on a known path is 405 with Allow, an unknown path 404; and
// what the OpenAPI document declares is what the API accepts.
import http from 'node:http';
import { ERROR_CODES } from '../../protocol/errors';
import { startStack, type Stack } from '../support/stack';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ agents: [{ id: 'contract-a', labels: { zone: 'a' } }] });
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
    const long = await raw({ method: 'GET', path: `/v1/tiers/${'a'.repeat(150)}`, headers: { authorization: `Bearer ${stack.tokens.viewer}` } });
    expect(long.status).toBe(414);
    expectErrorShape(long, 'uri-too-long');
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
