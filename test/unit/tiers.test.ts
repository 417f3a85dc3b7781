// The tier policy and signal schemas (protocol/tiers.ts) and the cron change-window expansion.
import { cronProblem, expandChangeWindows } from '../../domain/change-windows';
import { describeIssues } from '../../protocol';
import { TierPolicySchema, TierSignalSchema } from '../../protocol/tiers';

const base = { workloads: ['web'], targets: { qpsPerInstance: 100 } };

describe('TierPolicySchema', () => {
  it('fills the documented defaults', () => {
    expect(TierPolicySchema.parse(base)).toMatchObject({
      minReplicas: 1, maxReplicas: 20, tolerance: 0.1, scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 300000, cooldownMs: 30000, maxStep: 4, changeWindows: [],
    });
  });
  it('accepts the example of DESIGN.md §6', () => {
    const example = {
      workloads: ['web'], minReplicas: 1, maxReplicas: 20,
      targets: { qpsPerInstance: 100, activeUsersPerInstance: 500, cpuUtilization: 0.6, queueDepthPerInstance: 50 },
      tolerance: 0.1, scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 300000, cooldownMs: 30000, maxStep: 4,
      changeWindows: [{ cron: '0 9 * * 1-5', durationMs: 28800000, forbid: 'scale-in' }],
    };
    expect(TierPolicySchema.safeParse(example).success).toBe(true);
  });
  it.each([
    [{ ...base, minReplicas: 5, maxReplicas: 2 }, /maxReplicas: minReplicas must be ≤ maxReplicas/],
    [{ ...base, targets: {} }, /targets: at least one target/],
    [{ ...base, targets: { qpsPerInstance: 0 } }, /targets.qpsPerInstance: qpsPerInstance must be > 0/],
    [{ ...base, extra: 1 }, /extra/],
    [{ ...base, targets: { qps: 3 } }, /qps/],
    [{ ...base, changeWindows: [{ cron: '0 9 * * *', durationMs: 8 * 24 * 3600000 }] }, /changeWindows.0.durationMs: a change window lasts at most 7 days/],
    [{ ...base, minReplicas: 0 }, /minReplicas/],
  ])('refuses %j naming the field', (body, message) => {
    const result = TierPolicySchema.safeParse(body);
    expect(result.success).toBe(false);
    expect(describeIssues(result.error!)).toMatch(message);
  });
});

describe('steps in a tier policy', () => {
  it('are passed to its scale-outs: the request shape of steps, refused otherwise', () => {
    expect(TierPolicySchema.parse({ ...base, steps: [1, 'rest'] }).steps).toEqual([1, 'rest']);
    expect(TierPolicySchema.safeParse({ ...base, steps: [] }).success).toBe(false);
  });
});

describe('a pulled Kafka lag (policy.observe)', () => {
  const observing = (change: Record<string, unknown> = {}) => ({ workloads: ['orders'], targets: { queueDepthPerInstance: 500 }, observe: { kafkaLag: { workload: 'orders' } }, ...change });
  const problems = (body: unknown) => {
    const result = TierPolicySchema.safeParse(body);
    return result.success ? null : describeIssues(result.error);
  };

  it('reads every 15 s unless told, at least every second', () => {
    expect(TierPolicySchema.parse(observing()).observe).toEqual({ kafkaLag: { workload: 'orders', intervalMs: 15_000 } });
    expect(problems(observing({ observe: { kafkaLag: { workload: 'orders', intervalMs: 500 } } }))).toMatch(/observe\.kafkaLag\.intervalMs/);
  });

  it('is the queueDepth signal: a policy without a queueDepth target is refused, saying so', () => {
    expect(problems(observing({ targets: { qpsPerInstance: 10 } }))).toMatch(/observe\.kafkaLag: a pulled Kafka lag is the tier's queueDepth: set targets\.queueDepthPerInstance/);
  });

  it('observes one of the tier\'s own workloads, and nothing but a Kafka lag', () => {
    expect(problems(observing({ observe: { kafkaLag: { workload: 'payments' } } }))).toMatch(/observe\.kafkaLag\.workload: .* one of the tier's workloads/);
    expect(problems(observing({ observe: { kafkaLag: { workload: 'orders' }, prometheus: {} } }))).toMatch(/prometheus/);
  });
});

describe('TierSignalSchema', () => {
  it('takes any of the four figures and an optional time, nothing else', () => {
    expect(TierSignalSchema.safeParse({ qps: 10, at: '2030-01-01T00:00:00Z' }).success).toBe(true);
    expect(TierSignalSchema.safeParse({}).success).toBe(false);
    expect(TierSignalSchema.safeParse({ qps: -1 }).success).toBe(false);
    expect(TierSignalSchema.safeParse({ qps: 1, cpu: 3 }).success).toBe(false);
    expect(TierSignalSchema.safeParse({ qps: 1e13 }).success).toBe(false);
  });
});

describe('cron change windows', () => {
  it('parses with cron-parser and names what is wrong', () => {
    expect(cronProblem('0 9 * * 1-5')).toBeNull();
    expect(cronProblem('61 * * * *')).toMatch(/61/);
  });
  it('expands the occurrences overlapping a range into merged intervals (UTC)', () => {
    const at = (d: number, h: number, m = 0) => Date.UTC(2024, 0, d, h, m);
    // Wednesday 2024-01-03 10:00: the 09:00 window (8 h) is open; Thursday's opens inside a 2-day range
    const intervals = expandChangeWindows([{ cron: '0 9 * * 1-5', durationMs: 8 * 3600000, forbid: 'scale-in' }], at(3, 10), at(5, 0));
    expect(intervals.map((i) => [i.startMs, i.endMs])).toEqual([[at(3, 9), at(3, 17)], [at(4, 9), at(4, 17)]]);
    // every minute for an hour: one merged interval
    const merged = expandChangeWindows([{ cron: '* * * * *', durationMs: 3600000, forbid: 'scale-in' }], at(3, 10), at(3, 10, 5));
    expect(merged).toHaveLength(1);
    expect(merged[0].startMs).toBeLessThanOrEqual(at(3, 9, 1));
    expect(merged[0].endMs).toBe(at(3, 10, 5) + 3600000);
  });
});
