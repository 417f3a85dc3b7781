// The control plane's HTTP client for the agents, against a real HTTP server on loopback: each way
// an agent can answer, or not, becomes what the activities expect (an answer, null, a retryable
// unreachable, a non-retryable failure), and calls reuse their connections.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApplicationFailure } from '@temporalio/activity';
import { AgentUnreachableError, createAgentClient } from '../../activities/agent-client';
import { waitFor as pollUntil } from '../../harness/wait-for';

const TASK = { taskId: 'web-0-g1', workload: 'web', incarnation: 'web-0-g1-1', state: 'ready', generation: 1, errors: 0, counts: {} };
const BOUND_MS = 300;

let server: http.Server;
let endpoint: string;
const connections: number[] = [];
const authorizations: (string | undefined)[] = [];

beforeAll(async () => {
  server = http.createServer((request, response) => {
    authorizations.push(request.headers.authorization);
    const answer = (status: number, body: string) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(body);
    };
    const id = decodeURIComponent(request.url!.split('/')[3] ?? '');
    if (id === TASK.taskId) return answer(200, JSON.stringify(TASK));
    if (id === 'absent') return answer(404, JSON.stringify({ error: 'not-found', message: 'no such task' }));
    if (id === 'refused-credential') return answer(401, JSON.stringify({ error: 'unauthorized', message: 'credential refused' }));
    if (id === 'bad-request') return answer(422, JSON.stringify({ error: 'invalid-input', message: 'taskId: too long' }));
    if (id === 'broken') return answer(500, 'not json');
    if (id === 'off-protocol') return answer(200, JSON.stringify({ taskId: 'x' }));
    if (id === 'slow') return void setTimeout(() => answer(200, JSON.stringify({ ...TASK, taskId: 'slow' })), 600);
    if (id === 'silent') return; // never answers
    if (id === 'stalls') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"taskId":'); // and never the rest
      return;
    }
    if (id === 'huge') {
      response.writeHead(200, { 'content-type': 'application/json' });
      const mebibyte = Buffer.alloc(1024 * 1024, 0x20);
      for (let i = 0; i < 17; i++) response.write(mebibyte);
      response.end('{}');
    }
  });
  server.on('connection', () => connections.push(Date.now()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const client = createAgentClient(BOUND_MS);
const target = () => ({ endpoint, credential: 'runtime-credential' });

it('answers the task an agent reports, presenting the runtime\'s credential, over one kept-alive connection', async () => {
  connections.length = 0;
  authorizations.length = 0;
  for (let i = 0; i < 3; i++) expect(await client.taskStatus(target(), TASK.taskId)).toEqual(TASK);
  expect(authorizations).toEqual(Array(3).fill('Bearer runtime-credential'));
  expect(connections).toHaveLength(1);
});

it('closes a kept-alive connection it has not used for a while, so an agent stopping need not wait for it', async () => {
  const closed: number[] = [];
  const watching = (socket: import('node:net').Socket) => socket.once('close', () => closed.push(Date.now()));
  server.on('connection', watching);
  try {
    connections.length = 0;
    const brief = createAgentClient(BOUND_MS, 200);
    expect(await brief.taskStatus(target(), TASK.taskId)).toEqual(TASK);
    expect(connections).toHaveLength(1);
    // well before the server's own keep-alive timeout (node:http's 5 s) would close it
    await pollUntil('the idle connection closed by the client', () => closed.length === 1, { timeoutMs: 2_000 });
  } finally {
    server.off('connection', watching);
  }
  // and a call that is answered later than that is not cut short by it (a drain waits for its task)
  expect(await createAgentClient(2_000, 200).taskStatus(target(), 'slow')).toEqual({ ...TASK, taskId: 'slow' });
});

it('answers null for a task the agent does not host', async () => {
  expect(await client.taskStatus(target(), 'absent')).toBeNull();
});

it.each([
  ['does not answer within the bound', 'silent', new RegExp(`no answer within ${BOUND_MS} ms`)],
  ['stops in the middle of its answer', 'stalls', new RegExp(`no answer within ${BOUND_MS} ms`)],
])('is unreachable (retryable) when the agent %s', async (_, id, message) => {
  const error = await client.taskStatus(target(), id).catch((e: Error) => e);
  expect(error).toBeInstanceOf(AgentUnreachableError);
  expect((error as Error).message).toMatch(message);
});

it('is unreachable (retryable) when the agent answers more than a task list could hold', async () => {
  // a bound long enough for 17 MiB over loopback on a busy machine: the size, not the time, ends it
  const error = await createAgentClient(30_000).taskStatus(target(), 'huge').catch((e: Error) => e);
  expect(error).toBeInstanceOf(AgentUnreachableError);
  expect((error as Error).message).toMatch(/answer larger than 16777216 bytes/);
});

it('is unreachable when nothing listens at the endpoint', async () => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const error = await client.taskStatus({ endpoint: `http://127.0.0.1:${port}`, credential: 'c' }, TASK.taskId).catch((e: Error) => e);
  expect(error).toBeInstanceOf(AgentUnreachableError);
  expect((error as Error).message).toMatch(/ECONNREFUSED/);
});

it('fails retryably on a refused credential or a server error, and for good on an error the protocol does not retry', async () => {
  const refused = await client.taskStatus(target(), 'refused-credential').catch((e: Error) => e);
  expect(refused).not.toBeInstanceOf(ApplicationFailure);
  expect((refused as Error).message).toMatch(/unauthorized: credential refused/);
  const broken = await client.taskStatus(target(), 'broken').catch((e: Error) => e);
  expect(broken).not.toBeInstanceOf(ApplicationFailure);
  expect((broken as Error).message).toMatch(/http-500/);
  const invalid = await client.taskStatus(target(), 'bad-request').catch((e: Error) => e);
  expect(invalid).toBeInstanceOf(ApplicationFailure);
  expect(invalid).toMatchObject({ type: 'invalid-input', nonRetryable: true });
});

it('refuses an answer that does not match the protocol', async () => {
  await expect(client.taskStatus(target(), 'off-protocol')).rejects.toThrow(/answer does not match the protocol/);
});
