// agent/drivers/task-metrics.ts: a consumer task's latency samples, reported with their ages (by the
// agent's own clock) so the evidence takes only the after window's into the Mann-Whitney test.
import { IntervalCounts, LatencyReservoir } from '../../agent/drivers/task-metrics';

describe('LatencyReservoir', () => {
  it('reports its newest samples oldest first, each with its age at the time asked', () => {
    const reservoir = new LatencyReservoir(3);
    reservoir.add(10, 1_000);
    reservoir.add(20, 2_000);
    expect(reservoir.newest(5, 2_500)).toEqual([[1_500, 10], [500, 20]]);
    reservoir.add(30, 3_000);
    reservoir.add(40, 4_000); // overwrites the oldest
    expect(reservoir.newest(5, 4_000)).toEqual([[2_000, 20], [1_000, 30], [0, 40]]);
    expect(reservoir.newest(2, 4_000)).toEqual([[1_000, 30], [0, 40]]);
    expect(reservoir.percentiles()).toEqual({ p50: 30, p95: 40 });
  });

  it('has no samples and no percentiles before the first', () => {
    const reservoir = new LatencyReservoir(3);
    expect(reservoir.newest(3)).toEqual([]);
    expect(reservoir.percentiles()).toBeUndefined();
  });
});

describe('IntervalCounts (throughput samples)', () => {
  it('reports each whole interval since the task started, oldest first, with its age and records; never the one under way', () => {
    const counts = new IntervalCounts(500, 4, 1_200); // its first whole interval is [1500, 2000)
    counts.add(7, 1_300); // before its first whole interval: not reported
    counts.add(3, 1_600);
    counts.add(2, 1_900);
    counts.add(5, 2_700);
    counts.add(9, 3_100); // the interval under way at 3 200
    expect(counts.samples(3_200)).toEqual([[1_200, 5], [700, 0], [200, 5]]);
  });

  it('keeps only the newest intervals', () => {
    const counts = new IntervalCounts(500, 2, 0);
    for (let at = 0; at < 5_000; at += 500) counts.add(1, at);
    expect(counts.samples(5_000)).toEqual([[500, 1], [0, 1]]);
  });
});
