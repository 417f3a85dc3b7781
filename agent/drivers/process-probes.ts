// A service task's readiness probes (DESIGN.md §5): an HTTP GET of its readiness path or a TCP
// connection to its public port, made where the node binds its tasks, and the latency window that
// times a ready task's readiness path. The process driver and the container driver both probe so.
import http from 'node:http';
import { LATENCY_SAMPLES_REPORTED } from '../../protocol';
import { urlHost } from '../config';
import { messageOf } from '../../lib/errors';
import type { DriverContext } from './driver';
import { connectTcp } from './tcp-connect';

/** Readiness probes start 10 ms after spawn and back off to one per 100 ms: most tasks are ready within a few. */
export const READINESS_POLL_MS = { first: 10, max: 100 } as const;
/** Without a probe, a process that is still alive this long after spawning counts as ready. */
export const NO_PROBE_SETTLE_MS = 200;
const PROBE_TIMEOUT_MS = 1000;
/**
 * A ready service with an HTTP readiness path is probed on, for its latency (what the scale-out
 * compares before and after): every LATENCY_PROBE_MS, the answers of the last LATENCY_WINDOW_MS.
 */
export const LATENCY_PROBE_MS = 1_000;
export const LATENCY_WINDOW_MS = 10_000;
const LOOPBACK = '127.0.0.1';

/** Where the agent probes its own tasks: the node's bind address (loopback for a wildcard or none). */
export function probeHostOf(ctx: Pick<DriverContext, 'taskBindHost'>): string {
  const host = ctx.taskBindHost;
  if (!host || host === '0.0.0.0') return LOOPBACK;
  return host === '::' ? '::1' : host;
}

export interface ProbeOutcome {
  ready: boolean;
  /** why not, for status().detail while starting */
  detail: string;
  /** the probe itself cannot be made (e.g. a path http refuses): asking again will not help */
  broken?: boolean;
}

export function probeHttp(port: number, pathname: string, host = LOOPBACK): Promise<ProbeOutcome> {
  const target = `GET http://${urlHost(host)}:${port}${pathname}`;
  return new Promise((resolve) => {
    let request: http.ClientRequest;
    try {
      // Throws at once for a path http will not send (e.g. one with a space): that is the task's
      // configuration, not a passing state, so the probe is broken rather than not-yet-ready.
      request = http.get({ host, port, path: pathname, agent: false, timeout: PROBE_TIMEOUT_MS }, (response) => {
        response.on('error', () => {}); // a reset mid-body changes nothing: the status is what counts
        response.resume();
        const status = response.statusCode ?? 0;
        resolve({ ready: status >= 200 && status < 300, detail: `readiness ${target} answered ${status}` });
      });
    } catch (error) {
      resolve({ ready: false, broken: true, detail: `readiness ${JSON.stringify(pathname)} cannot be probed: ${messageOf(error)}` });
      return;
    }
    request.on('timeout', () => request.destroy(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)));
    request.on('error', (error) => resolve({ ready: false, detail: `readiness ${target} failed: ${error.message}` }));
  });
}

export async function probeTcp(port: number, host = LOOPBACK): Promise<ProbeOutcome> {
  const target = `TCP ${urlHost(host)}:${port}`;
  const attempt = await connectTcp(host, port, PROBE_TIMEOUT_MS);
  if (attempt.ok) return { ready: true, detail: `readiness ${target} connected` };
  if (attempt.kind === 'invalid') return { ready: false, broken: true, detail: `readiness ${target} cannot be probed: ${attempt.message}` };
  if (attempt.kind === 'timeout') return { ready: false, detail: `readiness ${target}: no connection within ${PROBE_TIMEOUT_MS} ms` };
  return { ready: false, detail: `readiness ${target} failed: ${attempt.message}` };
}

/** The answers of a ready task's readiness path within the last LATENCY_WINDOW_MS: when, and how long each took. */
export class LatencyWindow {
  private readonly latencies: { at: number; ms: number }[] = [];

  /** A timed answer; what has left the window goes (and no more than 200 are kept). */
  add(ms: number, now = Date.now()): void {
    this.latencies.push({ at: now, ms });
    while (this.latencies.length && (this.latencies[0].at < now - LATENCY_WINDOW_MS || this.latencies.length > 200)) this.latencies.shift();
  }

  /** A new run of the task measures afresh. */
  clear(): void {
    this.latencies.length = 0;
  }

  /** p50 and p95 of the answers within the window (none: not measured). */
  percentiles(): { p50: number; p95: number } | undefined {
    const since = Date.now() - LATENCY_WINDOW_MS;
    const sorted = this.latencies.filter((sample) => sample.at >= since).map((sample) => sample.ms).sort((a, b) => a - b);
    if (sorted.length === 0) return undefined;
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    return { p50: at(0.5), p95: at(0.95) };
  }

  /** The answers within the window, newest last, each [age in ms, latency in ms]: the samples p50 and p95 are taken from. */
  samples(): [number, number][] {
    const now = Date.now();
    return this.latencies.filter((sample) => sample.at >= now - LATENCY_WINDOW_MS).slice(-LATENCY_SAMPLES_REPORTED).map((sample) => [now - sample.at, sample.ms]);
  }
}
