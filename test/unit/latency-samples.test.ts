// agent/drivers/task-metrics.ts: a consumer task's latency samples, reported with their ages (by the
// agent's own clock) so the evidence takes only the after window's into the Mann-Whitney test.
import { LatencyReservoir } from '../../agent/drivers/task-metrics';

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
