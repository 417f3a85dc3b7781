// One TCP connection attempt, bounded: what a service's readiness probe (tcp) and a workload's
// required endpoints (agent/requirements.ts) both ask. The socket is closed at once either way.
import net from 'node:net';

export type ConnectAttempt =
  | { ok: true }
  /** invalid: the attempt could not be made (e.g. a port out of range); timeout; error: refused, unresolvable, … */
  | { ok: false; kind: 'invalid' | 'timeout' | 'error'; message: string; code?: string };

export function connectTcp(host: string, port: number, timeoutMs: number): Promise<ConnectAttempt> {
  return new Promise((resolve) => {
    let socket: net.Socket;
    try {
      socket = net.connect({ host, port });
    } catch (error) {
      resolve({ ok: false, kind: 'invalid', message: error instanceof Error ? error.message : String(error) });
      return;
    }
    const done = (attempt: ConnectAttempt) => {
      socket.destroy();
      resolve(attempt);
    };
    socket.setTimeout(timeoutMs, () => done({ ok: false, kind: 'timeout', message: `no connection within ${timeoutMs} ms` }));
    socket.once('connect', () => done({ ok: true }));
    socket.once('error', (error: NodeJS.ErrnoException) => done({ ok: false, kind: 'error', message: error.message, code: error.code }));
  });
}
