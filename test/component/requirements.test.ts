// agent/requirements.ts against real sockets: a listening TCP port is reached, a closed one is
// not (named by its error), an HTTP endpoint must answer 2xx/3xx, one that never answers is
// bounded by the timeout, and the runtime asking names itself to the endpoint.
import http from 'node:http';
import net from 'node:net';
import { TaskHost } from '../../agent/host';
import { probeRequirements } from '../../agent/requirements';
import { freePort } from '../../embedded/processes';

const servers: (net.Server | http.Server)[] = [];
const listen = async <S extends net.Server | http.Server>(server: S): Promise<number> => {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
};
/** A port nothing listens on (bound, then closed). */
const closedPort = freePort;

afterAll(async () => {
  for (const server of servers) {
    (server as http.Server).closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }
});

it('answers one result per endpoint, in order: reached, refused, an HTTP status, a timeout', async () => {
  const seenAgents: string[] = [];
  const tcpPort = await listen(net.createServer((socket) => socket.end()));
  const httpPort = await listen(http.createServer((request, response) => {
    seenAgents.push(String(request.headers['user-agent']));
    response.writeHead(request.url === '/healthz' ? 200 : 503).end();
  }));
  // accepts the connection and never answers
  const silentPort = await listen(http.createServer(() => {}));
  const refusedPort = await closedPort();

  const results = await probeRequirements([
    { tcp: `127.0.0.1:${tcpPort}` },
    { tcp: `127.0.0.1:${refusedPort}` },
    { http: `http://127.0.0.1:${httpPort}/healthz` },
    { http: `http://127.0.0.1:${httpPort}/down` },
    { http: `http://127.0.0.1:${silentPort}/healthz` },
  ], { runtimeId: 'rt-7', timeoutMs: 300 });

  expect(results).toEqual([
    { endpoint: `tcp 127.0.0.1:${tcpPort}`, ok: true, detail: 'connected' },
    { endpoint: `tcp 127.0.0.1:${refusedPort}`, ok: false, detail: 'ECONNREFUSED' },
    { endpoint: `http http://127.0.0.1:${httpPort}/healthz`, ok: true, detail: 'HTTP 200' },
    { endpoint: `http http://127.0.0.1:${httpPort}/down`, ok: false, detail: 'HTTP 503' },
    { endpoint: `http http://127.0.0.1:${silentPort}/healthz`, ok: false, detail: 'no answer within 300 ms' },
  ]);
  expect(seenAgents).toEqual(['scalegate-agent (runtime rt-7)', 'scalegate-agent (runtime rt-7)']);
});

describe('a task start on an agent', () => {
  /** A driver that starts nothing real: the host's check, not the driver, is under test. */
  const started: string[] = [];
  const host = new TaskHost({
    service: {
      kind: 'service',
      async start(start) {
        started.push(start.taskId);
        return {
          taskId: start.taskId, incarnation: 'i-1',
          status: () => ({ taskId: start.taskId, workload: start.workload, incarnation: 'i-1', state: 'ready' as const, counts: {}, errors: 0, generation: start.generation }),
          drain: async () => ({ taskId: start.taskId, incarnation: 'i-1', inFlight: 0, durationMs: 0 }),
        };
      },
      async probe() {
        return { source: { ok: true, detail: '' }, destination: { ok: true, detail: '' } };
      },
    },
  }, { runtimeId: 'rt-9' });
  const start = (taskId: string, requires: { tcp: string }[]) => ({
    taskId, workload: 'web', kind: 'service' as const, index: 0, generation: 1, placementFence: 1, spec: {}, requires,
  });

  it('is refused where a required endpoint cannot be reached, naming the runtime and the endpoint; nothing starts', async () => {
    const refused = await closedPort();
    const error = await host.ensure(start('web-0-g1', [{ tcp: `127.0.0.1:${refused}` }])).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'requirement-unreachable',
      message: `runtime rt-9 cannot reach tcp 127.0.0.1:${refused} (ECONNREFUSED), which workload web requires: task web-0-g1 was not started`,
    });
    expect(started).toEqual([]);
    expect(host.get('web-0-g1')).toBeNull();
  });

  it('goes ahead once every required endpoint answers', async () => {
    const port = await listen(net.createServer((socket) => socket.end()));
    const outcome = await host.ensure(start('web-1-g1', [{ tcp: `127.0.0.1:${port}` }]));
    expect(outcome).toMatchObject({ created: true, status: { state: 'ready' } });
    expect(started).toEqual(['web-1-g1']);
  });
});
