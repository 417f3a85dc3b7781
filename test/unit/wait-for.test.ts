// The one polling helper the tests share (harness/wait-for.ts): what it answers, and what its
// failure says.
import { GiveUp, waitFor } from '../../harness/wait-for';

describe('waitFor', () => {
  test('answers the first truthy value the probe returns', async () => {
    let calls = 0;
    const value = await waitFor('the third call', () => (++calls >= 3 ? { calls } : null), { intervalMs: 1 });
    expect(value).toEqual({ calls: 3 });
  });

  test('a timeout names what was awaited and the last value', async () => {
    await expect(waitFor('the answer', () => false, { timeoutMs: 30, intervalMs: 5 })).rejects.toThrow(
      /timed out after \d+ ms \(\d+ attempts\) waiting for the answer; last value: false/,
    );
    await expect(waitFor('the answer', async () => 0, { timeoutMs: 10, intervalMs: 5 })).rejects.toThrow(/last value: 0$/);
  });

  test('a probe that throws is asked again; a timeout reports its last error, plus the context', async () => {
    let calls = 0;
    const recovered = await waitFor('a flaky probe', () => {
      if (++calls < 3) throw new Error(`not yet (${calls})`);
      return 'up';
    }, { intervalMs: 1 });
    expect(recovered).toBe('up');
    await expect(
      waitFor('a broken probe', () => {
        throw new Error('connection refused');
      }, { timeoutMs: 20, intervalMs: 5, context: () => 'recent logs' }),
    ).rejects.toThrow(/waiting for a broken probe; last error: Error: connection refused\nrecent logs/);
  });

  test('GiveUp ends the wait at once', async () => {
    let calls = 0;
    const started = Date.now();
    await expect(
      waitFor('a process that exited', () => {
        calls++;
        throw new GiveUp('it exited with code 1');
      }, { timeoutMs: 10_000 }),
    ).rejects.toThrow('gave up waiting for a process that exited: it exited with code 1');
    expect(calls).toBe(1);
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
