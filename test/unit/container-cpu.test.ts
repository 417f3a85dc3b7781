// The container driver's CPU evidence (agent/drivers/container.ts): a container's CPU time over the
// wall time between two stats samples, the same on dockerd and podman (whose system_cpu_usage
// counts only the host's busy time). Pure.
import { cpuPercentBetween } from '../../agent/drivers/container';

describe('cpuPercentBetween', () => {
  it('is the CPU time over the wall time between the samples, in percent of one CPU', () => {
    expect(cpuPercentBetween({ total: 0, atMs: 1_000 }, { total: 500_000_000, atMs: 2_000 })).toBe(50);
    expect(cpuPercentBetween({ total: 1e9, atMs: 0 }, { total: 5e9, atMs: 2_000 })).toBe(200);
    expect(cpuPercentBetween({ total: 7, atMs: 0 }, { total: 7, atMs: 1_500 })).toBe(0);
  });
});
