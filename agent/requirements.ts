// The workload's `requires` (DESIGN.md §5 "Connectivity"), probed from this runtime for the
// scale-out's connectivity gate: a TCP endpoint must accept a connection, an HTTP one must answer
// 2xx or 3xx, each within a bound, all at once. Nothing is sent beyond the connection, or a GET
// that names the runtime asking.
import type { ProbeResult, Requirement } from '../protocol';
import { connectTcp } from './drivers/tcp-connect';

/** How long one endpoint may take: a probe that hangs would hold the gate. */
export const REQUIREMENT_TIMEOUT_MS = 3_000;

/** Why a fetch failed: its cause's code (ECONNREFUSED, ENOTFOUND, ...) where it has one, the message otherwise. */
const fetchFailureOf = (error: unknown): string => {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
};

export const endpointOf = (requirement: Requirement): string => ('tcp' in requirement ? `tcp ${requirement.tcp}` : `http ${requirement.http}`);

async function probeTcp(endpoint: string, timeoutMs: number): Promise<ProbeResult> {
  const colon = endpoint.lastIndexOf(':');
  const host = endpoint.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const attempt = await connectTcp(host, Number(endpoint.slice(colon + 1)), timeoutMs);
  return attempt.ok ? { ok: true, detail: 'connected' } : { ok: false, detail: attempt.code ?? attempt.message };
}

async function probeHttp(url: string, timeoutMs: number, runtimeId: string | undefined): Promise<ProbeResult> {
  try {
    // The endpoint sees which runtime asks (its logs; an allowlist that refuses a node answers 4xx).
    const headers = { 'user-agent': `scalegate-agent${runtimeId ? ` (runtime ${runtimeId})` : ''}` };
    const response = await fetch(url, { method: 'GET', headers, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel().catch(() => {});
    return response.status < 400 ? { ok: true, detail: `HTTP ${response.status}` } : { ok: false, detail: `HTTP ${response.status}` };
  } catch (error) {
    return { ok: false, detail: (error as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : fetchFailureOf(error) };
  }
}

/** Every requirement probed at once; the answer keeps their order and names each endpoint. */
export function probeRequirements(
  requires: Requirement[],
  { runtimeId, timeoutMs = REQUIREMENT_TIMEOUT_MS }: { runtimeId?: string; timeoutMs?: number } = {},
): Promise<(ProbeResult & { endpoint: string })[]> {
  return Promise.all(requires.map(async (requirement) => ({
    endpoint: endpointOf(requirement),
    ...('tcp' in requirement ? await probeTcp(requirement.tcp, timeoutMs) : await probeHttp(requirement.http, timeoutMs, runtimeId)),
  })));
}
