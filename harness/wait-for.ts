// The one polling helper every test uses: ask `probe` again and again until it answers something
// truthy, or fail at a deadline with an error naming what was awaited and what the probe said last.
// A probe that throws is asked again (the thing it reads may not be up yet); its last error is
// reported at the deadline. A probe that knows waiting is pointless throws `GiveUp`, which ends the
// wait at once.

import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitForOptions {
  /** how long to keep asking (default 30 s) */
  timeoutMs?: number;
  /** pause between two asks (default 50 ms) */
  intervalMs?: number;
  /** more to say on a timeout, e.g. the last lines of the processes' logs */
  context?: () => string;
}

/** Thrown by a probe to stop waiting at once (e.g. the process it waits for has exited). */
export class GiveUp extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GiveUp';
  }
}

type Truthy<T> = Exclude<T, null | undefined | false | 0 | ''>;

const MAX_DESCRIBED_CHARS = 1_000;

function describe(value: unknown): string {
  let text: string;
  if (value instanceof Error) text = `${value.name}: ${value.message}`;
  else if (value === undefined) text = 'undefined';
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > MAX_DESCRIBED_CHARS ? `${text.slice(0, MAX_DESCRIBED_CHARS)}…` : text;
}

/**
 * Polls `probe` until it returns a truthy value and returns that value. After `timeoutMs` it
 * throws `timed out after N ms waiting for <what>` with the probe's last value or error.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, options: WaitForOptions | number = {}): Promise<Truthy<T>> {
  const { timeoutMs = 30_000, intervalMs = 50, context } = typeof options === 'number' ? { timeoutMs: options } : options;
  const startedAt = Date.now();
  const deadline = startedAt + timeoutMs;
  let last: { value: unknown } | { error: unknown } = { value: undefined };
  let attempts = 0;
  for (;;) {
    attempts += 1;
    try {
      const value = await probe();
      if (value) return value as Truthy<T>;
      last = { value };
    } catch (error) {
      if (error instanceof GiveUp) throw new Error(`gave up waiting for ${what}: ${error.message}`);
      last = { error };
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      const said = 'error' in last ? `last error: ${describe(last.error)}` : `last value: ${describe(last.value)}`;
      const more = context?.();
      throw new Error(`timed out after ${Date.now() - startedAt} ms (${attempts} attempts) waiting for ${what}; ${said}${more ? `\n${more}` : ''}`);
    }
    await sleep(Math.min(intervalMs, left));
  }
}
