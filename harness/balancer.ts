// A load balancer in front of several API processes, as a production deployment has one: agents,
// the CLI and the tests talk to its one URL. It health-checks each backend (/healthz every 250 ms,
// 1 s timeout) and sends each request to the next healthy one; a request a backend refused to
// connect never reached it, so it goes to the next one (safe for any method). A backend that took
// the request and then went quiet (SIGSTOP) answers nothing: after `requestTimeoutMs` the client
// gets a 502, never a retry that could run a request twice.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Balancer {
  url: string;
  /** backends' URLs, in order; `healthy[i]` is what the last check said of backend i */
  backends: string[];
  healthy: boolean[];
  close(): Promise<void>;
}

export async function startBalancer(backends: string[], options: { requestTimeoutMs?: number; checkIntervalMs?: number; /** where it listens (default 127.0.0.1; a multi-host stack's bridge address) */ host?: string } = {}): Promise<Balancer> {
  const healthy = backends.map(() => true);
  const requestTimeoutMs = options.requestTimeoutMs ?? 65_000;
  let next = 0;

  const check = () => backends.forEach((backend, i) => {
    const probe = http.get(`${backend}/healthz`, { timeout: 1_000 }, (response) => {
      healthy[i] = response.statusCode === 200;
      response.resume();
    });
    probe.on('timeout', () => probe.destroy(new Error('timeout')));
    probe.on('error', () => {
      healthy[i] = false;
    });
  });
  const timer = setInterval(check, options.checkIntervalMs ?? 250);
  check();

  /** Backends to try, the healthy first from the round-robin position; all of them when none is healthy. */
  const order = (): number[] => {
    const start = next++ % backends.length;
    const all = backends.map((_, k) => (start + k) % backends.length);
    const up = all.filter((i) => healthy[i]);
    return up.length ? [...up, ...all.filter((i) => !healthy[i])] : all;
  };

  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const attempt = (candidates: number[]) => {
        const [i, ...rest] = candidates;
        if (i === undefined) {
          response.writeHead(502, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ error: 'unavailable', message: 'no API backend accepted the connection' }));
          return;
        }
        const target = new URL(request.url ?? '/', backends[i]);
        const forwarded = http.request(target, { method: request.method, headers: { ...request.headers, host: target.host }, timeout: requestTimeoutMs }, (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        });
        forwarded.on('timeout', () => forwarded.destroy(Object.assign(new Error('backend timed out'), { code: 'ETIMEDOUT' })));
        forwarded.on('error', (error: NodeJS.ErrnoException) => {
          if (response.headersSent) return response.destroy();
          // Refused: the request never reached that backend.
          if (error.code === 'ECONNREFUSED') {
            healthy[i] = false;
            return attempt(rest);
          }
          response.writeHead(502, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ error: 'unavailable', message: `API backend ${backends[i]}: ${error.message}` }));
        });
        forwarded.end(body);
      };
      attempt(order());
    });
  });
  // Port 0 may hand the balancer a backend's own port (picked free, not bound by its API yet): that
  // API then cannot listen, and the balancer forwards to itself without end (chaos seed 80, 12,000
  // connections). Listen again until the port is none of the backends'.
  const backendPorts = new Set(backends.map((backend) => Number(new URL(backend).port)));
  let port: number;
  for (;;) {
    await new Promise<void>((resolve) => server.listen(0, options.host ?? '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    if (!backendPorts.has(port)) break;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`, backends, healthy,
    async close() {
      clearInterval(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
