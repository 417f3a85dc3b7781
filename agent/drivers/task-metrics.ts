// The figures a task reports about its own work: latency (p50, p95) over its newest samples, its
// throughput over a short window, and its records per interval (the samples evidence tests
// throughput over). Constant memory, however long the task runs.

/** The newest `size` latency samples, overwritten in turn, each with when it was taken. */
export class LatencyReservoir {
  private readonly samples: { at: number; ms: number }[] = [];
  private cursor = 0;

  constructor(private readonly size: number) {}

  add(ms: number, at = Date.now()): void {
    if (this.samples.length < this.size) this.samples.push({ at, ms });
    else this.samples[this.cursor] = { at, ms };
    this.cursor = (this.cursor + 1) % this.size;
  }

  /** The newest `count` samples held, oldest first, each [age in ms at `now`, latency in ms]. */
  newest(count: number, now = Date.now()): [number, number][] {
    const ordered = this.samples.length < this.size ? this.samples : [...this.samples.slice(this.cursor), ...this.samples.slice(0, this.cursor)];
    return ordered.slice(-count).map((sample) => [Math.max(0, now - sample.at), sample.ms]);
  }

  /** p50 and p95 of the samples held; undefined before the first. */
  percentiles(): { p50: number; p95: number } | undefined {
    if (this.samples.length === 0) return undefined;
    const sorted = this.samples.map((sample) => sample.ms).sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
    return { p50: at(0.5), p95: at(0.95) };
  }
}

/** Records per second over the last `windowMs`; a task younger than the window divides by its age (at least 1 s). */
export class RateWindow {
  private readonly events: { at: number; records: number }[] = [];
  private readonly startedAt = Date.now();

  constructor(private readonly windowMs: number) {}

  add(records: number): void {
    this.events.push({ at: Date.now(), records });
  }

  /** to one decimal */
  perSecond(): number {
    const now = Date.now();
    while (this.events.length > 0 && this.events[0].at < now - this.windowMs) this.events.shift();
    const records = this.events.reduce((sum, e) => sum + e.records, 0);
    const windowMs = Math.min(this.windowMs, Math.max(1_000, now - this.startedAt));
    return Math.round((records / windowMs) * 1000 * 10) / 10;
  }
}

/**
 * Records per fixed interval (`intervalMs`, aligned to the clock), for the newest `intervals`
 * whole intervals since the task started: throughput samples. The interval under way is never
 * reported (it is not whole), nor any that began before the task.
 */
export class IntervalCounts {
  private readonly counts = new Map<number, number>();
  private readonly firstInterval: number;

  constructor(private readonly intervalMs: number, private readonly intervals: number, startedAt = Date.now()) {
    this.firstInterval = Math.ceil(startedAt / intervalMs);
  }

  add(records: number, at = Date.now()): void {
    const interval = Math.floor(at / this.intervalMs);
    this.counts.set(interval, (this.counts.get(interval) ?? 0) + records);
    for (const key of this.counts.keys()) if (key <= interval - this.intervals) this.counts.delete(key);
  }

  /** Oldest first, each [age in ms at `now` of the interval's end, records in it]. */
  samples(now = Date.now()): [number, number][] {
    const current = Math.floor(now / this.intervalMs);
    const out: [number, number][] = [];
    for (let interval = Math.max(this.firstInterval, current - this.intervals); interval < current; interval++) {
      out.push([now - (interval + 1) * this.intervalMs, this.counts.get(interval) ?? 0]);
    }
    return out;
  }
}
