// agent/requirements.ts against real sockets: a listening TCP port is reached, a closed one is
// not (named by its error), an HTTP endpoint must answer 2xx/3xx, one that never answers is
// bounded by the timeout, and the runtime asking names itself to the endpoint.
import http from 'node:http';
import net from 'node:net';
import { probeRequirements } from '../../agent/requirements';

const servers: (net.Server | http.Server)[] = [];
const listen = async <S extends net.Server | http.Server>(server: S): Promise<number> => {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
};
/** A port nothing listens on: bound, then closed. */
const closedPort = async () => {
  const server = net.createServer();
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
  await new Promise((resolve) => server.close(resolve));
  return port;
};

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
