// The one place delays grow: every retry and poll that backs off (the agent's lease exchanges, a
// consumer's failed batches, a source reopening, a subtask's wiring, task readiness, a control-plane
// process waiting for its servers at start) takes its delay from here, so "doubling, capped" means
// the same thing everywhere.
import { setTimeout as sleep } from 'node:timers/promises';
import { messageOf } from './errors';

/** The delay after `doublings` doublings of `baseMs` (0: baseMs itself), capped at `maxMs`. */
export function exponentialDelayMs(doublings: number, baseMs: number, maxMs: number): number {
  // the exponent is bounded so that a long outage's count cannot overflow to Infinity or NaN
  return Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(doublings, 0), 30));
}

/**
 * The delay before retry number `failures` (1, 2, …): exponential from `baseMs`, capped at `maxMs`,
 * with ±20 % jitter, so that many clients that failed together do not retry together.
 */
export function retryDelayMs(failures: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.max(1, Math.round(exponentialDelayMs(failures - 1, baseMs, maxMs) * (0.8 + 0.4 * random())));
}

/**
 * Poll delays that start short and double up to `maxMs`: a condition met soon after the wait
 * begins (a process that starts in 100 ms) is seen soon after, and a long wait still polls at
 * `maxMs`, so the cost of waiting stays bounded.
 */
export function doublingDelays(firstMs: number, maxMs: number): () => number {
  let doublings = 0;
  return () => exponentialDelayMs(doublings++, firstMs, maxMs);
}

/**
 * How long a starting control-plane process (API, worker) waits for its PostgreSQL and Temporal:
 * compose starts them together, and a server frozen or restarting for a moment is no reason to exit.
 */
export const SERVER_WAIT_MS = 180_000;

/**
 * `attempt`'s answer once it succeeds, trying again (polls doubling from 250 ms to 1 s) for
 * `waitMs` while `retryable` says its failure is a server not there (yet); `onWait` is told once.
 */
export async function untilReachable<T>(server: string, attempt: () => Promise<T>, options: {
  waitMs?: number; retryable?: (error: unknown) => boolean; onWait?: (message: string, error: string) => void;
} = {}): Promise<T> {
  const deadline = Date.now() + (options.waitMs ?? SERVER_WAIT_MS);
  const nextDelay = doublingDelays(250, 1_000);
  let said = false;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (options.retryable && !options.retryable(error)) throw error;
      if (Date.now() > deadline) throw new Error(`${server} did not answer within ${Math.round((options.waitMs ?? SERVER_WAIT_MS) / 1000)} s: ${messageOf(error)}`);
      if (!said) options.onWait?.(`waiting for ${server}`, messageOf(error));
      said = true;
      await sleep(nextDelay());
    }
  }
}
