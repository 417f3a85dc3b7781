// A task's errors, counted twice (issue 22): since the task started, which the evidence compares
// before and after a change, and within the last window, which the scale-out baseline gate reads as
// the current error rate. One transient error long ago must not block every later scale-out; errors
// now must.

/** the window of "recent" errors unless the agent is told otherwise (SCALEGATE_ERROR_WINDOW_MS) */
export const DEFAULT_ERROR_WINDOW_MS = 60_000;
/** recent errors remembered at most: a task failing in a tight loop stays bounded in memory */
const MAX_REMEMBERED = 10_000;

export class ErrorCount {
  private count = 0;
  private readonly times: number[] = [];

  constructor(private readonly windowMs = DEFAULT_ERROR_WINDOW_MS) {}

  add(now = Date.now()): void {
    this.count += 1;
    this.times.push(now);
    if (this.times.length > MAX_REMEMBERED) this.times.shift();
  }

  /** every error since the task started */
  get total(): number {
    return this.count;
  }

  /** the errors of the last window */
  recent(now = Date.now()): number {
    const since = now - this.windowMs;
    while (this.times.length && this.times[0] <= since) this.times.shift();
    return this.times.length;
  }
}
