// The latency figures a task reports (p50, p95): the newest `size` samples, overwritten in turn, so
// a long-running task reports its recent latency in constant memory.

export class LatencyReservoir {
  private readonly samples: number[] = [];
  private cursor = 0;

  constructor(private readonly size: number) {}

  add(ms: number): void {
    if (this.samples.length < this.size) this.samples.push(ms);
    else this.samples[this.cursor] = ms;
    this.cursor = (this.cursor + 1) % this.size;
  }

  /** p50 and p95 of the samples held; undefined before the first. */
  percentiles(): { p50: number; p95: number } | undefined {
    if (this.samples.length === 0) return undefined;
    const sorted = [...this.samples].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
    return { p50: at(0.5), p95: at(0.95) };
  }
}
