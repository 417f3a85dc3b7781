import { doublingDelays, exponentialDelayMs, retryDelayMs } from '../../lib/backoff';

describe('doublingDelays', () => {
  it('starts at the first delay and doubles up to the maximum, then stays there', () => {
    const next = doublingDelays(10, 100);
    expect(Array.from({ length: 7 }, next)).toEqual([10, 20, 40, 80, 100, 100, 100]);
  });
});

describe('exponentialDelayMs', () => {
  it('doubles the base per doubling, caps at the maximum, and stays finite for any count', () => {
    expect([0, 1, 2, 3, 4].map((n) => exponentialDelayMs(n, 50, 500))).toEqual([50, 100, 200, 400, 500]);
    expect(exponentialDelayMs(-3, 50, 500)).toBe(50);
    expect(exponentialDelayMs(10_000, 50, Infinity)).toBe(50 * 2 ** 30);
  });
});

describe('retryDelayMs', () => {
  it('starts at the base for the first failure and keeps within ±20 % of the capped exponential', () => {
    expect([1, 2, 3, 9].map((n) => retryDelayMs(n, 250, 5_000, () => 0.5))).toEqual([250, 500, 1_000, 5_000]);
    expect(retryDelayMs(2, 250, 5_000, () => 0)).toBe(400);
    expect(retryDelayMs(2, 250, 5_000, () => 1)).toBe(600);
  });
});
