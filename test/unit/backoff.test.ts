import { doublingDelays, exponentialDelayMs, retryDelayMs, untilReachable } from '../../lib/backoff';

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

describe('untilReachable', () => {
  const unavailable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const retryable = (error: unknown) => (error as { code?: string }).code === 'ECONNREFUSED';

  it('tries again while the server is not there, says so once, and answers the first success', async () => {
    let attempts = 0;
    const said: string[] = [];
    const answer = await untilReachable('PostgreSQL', async () => {
      attempts += 1;
      if (attempts < 3) throw unavailable();
      return 'migrated';
    }, { retryable, onWait: (message, error) => said.push(`${message}: ${error}`) });
    expect({ answer, attempts, said }).toEqual({ answer: 'migrated', attempts: 3, said: ['waiting for PostgreSQL: connect ECONNREFUSED 127.0.0.1:5432'] });
  });

  it('throws at once an error that is not the server missing (a migration that fails)', async () => {
    const said: string[] = [];
    await expect(untilReachable('PostgreSQL', async () => {
      throw new Error('migration 7_x failed: syntax error');
    }, { retryable, onWait: (message) => said.push(message) })).rejects.toThrow('migration 7_x failed');
    expect(said).toEqual([]);
  });

  it('gives up past its wait, naming the server and the last error', async () => {
    await expect(untilReachable('Temporal at 127.0.0.1:7233', async () => {
      throw unavailable();
    }, { waitMs: 0, retryable })).rejects.toThrow('Temporal at 127.0.0.1:7233 did not answer within 0 s: connect ECONNREFUSED 127.0.0.1:5432');
  });
});
