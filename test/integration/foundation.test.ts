// The foundation on the real stack: agents register and heartbeat, a killed agent goes LOST after
// its lease, the ping workflow runs through Temporal to PostgreSQL, and bad input never yields a 500.
import { WorkflowFailedError } from '@temporalio/client';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { startStack, Stack } from '../../harness/stack';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 1500, agents: [{ id: 'node-a', labels: { zone: 'a' } }, { id: 'node-b', labels: { zone: 'b' } }] });
});
afterAll(async () => {
  await stack?.stop();
});

const runtimeStatus = async (id: string) => {
  const { body } = await stack.api('GET', '/v1/state', { role: 'viewer' });
  return body.runtimes.find((r: { id: string }) => r.id === id);
};

describe('runtimes and leases', () => {
  it('lists both agents READY with their labels, renewing their leases', async () => {
    const a = await runtimeStatus('node-a');
    expect(a).toMatchObject({ status: 'READY', labels: { zone: 'a' }, endpoint: stack.agents['node-a'].url, fence: 1 });
    expect((await runtimeStatus('node-b')).labels).toEqual({ zone: 'b' });
    const firstLease = a.leaseExpiresAt;
    await stack.waitFor('a lease renewal', async () => (await runtimeStatus('node-a')).leaseExpiresAt > firstLease);
  });

  // One story, one test: each step needs the one before it (a LOST runtime, then its stale fence).
  // It ends with node-b back READY, so the fleet is as every other test expects it (two READY).
  it('an agent killed with SIGKILL goes LOST after its lease, its stale fence is refused, and it returns READY with a new fence and a new credential', async () => {
    const fenceBefore = (await runtimeStatus('node-b')).fence;
    const credentialBefore = await stack.credentialOf('node-b');
    stack.agents['node-b'].process.kill('SIGKILL');
    await stack.agents['node-b'].process.exited;
    try {
      // LOST after its lease, and the other stays READY
      const lost = await stack.waitFor('node-b LOST', async () => {
        const b = await runtimeStatus('node-b');
        return b.status === 'LOST' ? b : null;
      });
      expect(lost.fence).toBe(fenceBefore + 1); // declared LOST bumps the fence: the old incarnation's writes are refused
      expect((await runtimeStatus('node-a')).status).toBe('READY');

      // a heartbeat on the stale fence (with the runtime's own credential) is refused, and the tasks
      // it reports are listed as revoked
      const task = { taskId: 'x-0-g1', workload: 'x', incarnation: 'i1', state: 'ready' };
      const { status, body } = await stack.api('POST', '/v1/runtimes/node-b/heartbeat', { token: credentialBefore, body: { fence: fenceBefore, tasks: [task] } });
      expect(status).toBe(409);
      expect(body).toMatchObject({ error: 'stale-fence', currentFence: fenceBefore + 1, revoked: ['x-0-g1'] });
      // its lapsed credential no longer resumes it: the agent must register anew with the agent token
      const resume = await stack.api('POST', '/v1/runtimes', { token: credentialBefore, body: { id: 'node-b', endpoint: stack.agents['node-b'].url, labels: { zone: 'b' }, slots: 4 } });
      expect(resume.status).toBe(401);
      expect(resume.body.error).toBe('credential-expired');
    } finally {
      // the returning agent (same state folder): READY again, with a new fence and a new credential
      const agent = await stack.startAgent({ id: 'node-b', labels: { zone: 'b' } });
      expect(agent.port).toBeGreaterThan(0);
    }
    const b = await runtimeStatus('node-b');
    expect(b.status).toBe('READY');
    expect(b.fence).toBe(fenceBefore + 2);
    expect(await stack.credentialOf('node-b')).not.toBe(credentialBefore);
  });
});

describe('the ping workflow', () => {
  it('runs on the real server and reads the store', async () => {
    const result = await stack.temporal.workflow.execute('ping', {
      taskQueue: stack.taskQueue, workflowId: `ping-${Date.now()}`, args: [{ note: 'hello' }],
    });
    expect(result).toEqual({ runtimes: 2, ready: 2, workloads: 0, note: 'hello' });
  });

  it('fails non-retryably with a message naming the bad field', async () => {
    const run = stack.temporal.workflow.execute('ping', { taskQueue: stack.taskQueue, workflowId: `ping-bad-${Date.now()}`, args: [{ note: 42 }] });
    const error = await run.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect(String((error as WorkflowFailedError).cause?.message)).toMatch(/invalid input: note:/);
  });
});

describe('bad input and auth', () => {
  const register = { id: 'node-z', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 1 };

  it.each([
    ['malformed JSON', 400, 'invalid-json', { rawBody: '{"id":', role: 'agent' as const }],
    ['a missing field', 422, 'validation-failed', { body: { id: 'node-z' }, role: 'agent' as const }],
    ['a wrong type', 422, 'validation-failed', { body: { ...register, slots: 'many' }, role: 'agent' as const }],
    ['no token', 401, 'unauthorized', { body: register, role: null }],
    ['a wrong token', 401, 'invalid-credential', { body: register, role: 'agent' as const, wrongToken: true }],
    ['a viewer token on an agent route', 403, 'forbidden', { body: register, role: 'viewer' as const }],
  ])('register with %s → %i %s', async (_what, status, code, options) => {
    const response =
      'wrongToken' in options
        ? await fetch(`${stack.apiUrl}/v1/runtimes`, { method: 'POST', headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json' }, body: JSON.stringify(register) })
            .then(async (r) => ({ status: r.status, body: await r.json() }))
        : await stack.api('POST', '/v1/runtimes', options);
    expect(response.status).toBe(status);
    expect(response.body.error).toBe(code);
    expect(typeof response.body.message).toBe('string');
  });

  it('refuses an agent token on an operator route with 403', async () => {
    const { status, body } = await stack.api('POST', '/v1/runtimes/node-a/cordon', { role: 'agent' });
    expect(status).toBe(403);
    expect(body.error).toBe('forbidden');
  });

  it('validates heartbeats: missing fence → 422; unknown runtime → 401 (no credential can match); the agent token → 403', async () => {
    const token = await stack.credentialOf('node-a');
    expect((await stack.api('POST', '/v1/runtimes/node-a/heartbeat', { token, body: { tasks: [] } })).status).toBe(422);
    expect((await stack.api('POST', '/v1/runtimes/nobody/heartbeat', { token, body: { fence: 1 } })).body.error).toBe('invalid-credential');
    expect((await stack.api('POST', '/v1/runtimes/node-a/heartbeat', { role: 'agent', body: { fence: 1 } })).status).toBe(403);
  });

  it('answers readiness, OpenAPI and metrics without a token', async () => {
    expect((await stack.api('GET', '/readyz', { role: null })).body).toEqual({ status: 'ready', postgres: true, temporal: true });
    const openapi = (await stack.api('GET', '/openapi.json', { role: null })).body;
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(['/v1/state', '/v1/runtimes', '/v1/runtimes/{id}/heartbeat']));
    // the served document names this API, and is the typed one test/unit/openapi.test.ts checks
    expect(openapi.servers).toEqual([{ url: stack.apiUrl, description: 'this API' }]);
    expect(openapi.paths['/v1/workloads/{name}/scale'].post).toMatchObject({
      operationId: 'scaleWorkload',
      responses: { 202: { content: { 'application/json': { schema: { $ref: '#/components/schemas/StartedOperation' } } } } },
    });
    expect(Object.keys(openapi.paths['/v1/workloads/{name}'].put.requestBody.content['application/json'].schema.oneOf[0].properties)).toEqual(expect.arrayContaining(['kind', 'replicas', 'spec']));
    const metrics = (await stack.api('GET', '/metrics', { role: null })).body as string;
    expect(metrics).toMatch(/scalegate_runtimes\{status="READY"\} 2/);
  });
});

describe('the scalegate CLI', () => {
  const cli = (args: string[], env: Record<string, string>) =>
    promisify(execFile)(process.execPath, [path.resolve(__dirname, '../../cli/bin.js'), ...args], {
      env: { PATH: process.env.PATH, SCALEGATE_API_URL: stack.apiUrl, ...env },
    });

  it('reads the state with the viewer token', async () => {
    const { stdout } = await cli(['state', '--json'], { SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer });
    expect(JSON.parse(stdout).runtimes.map((r: { id: string }) => r.id).sort()).toEqual(['node-a', 'node-b']);
  });

  it('exits non-zero and prints the API error on a refused call', async () => {
    const failure = await cli(['cordon', 'node-a', '--json'], { SCALEGATE_OPERATOR_TOKEN: 'not-the-token' }).catch((e: { code: number; stdout: string }) => e);
    expect(failure).toMatchObject({ code: 1 });
    expect(JSON.parse((failure as { stdout: string }).stdout).error).toBe('unauthorized');
  });
});
