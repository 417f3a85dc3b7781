// Supervision's pure decisions (domain/supervision.ts): the restart backoff, its reset after a
// healthy run, what a crash loop is, and what the control plane shows about one. The driver with
// real processes is test/component/process-driver.test.ts ("process driver supervision").
import { crashLoopingTasks, DEFAULT_RESTART_POLICY, supervisionCounts, freshSupervision, isCrashLooping, restartDelayMs, scheduleRestart, type RestartPolicy, type SupervisionRecord } from '../../domain/supervision';

const policy: RestartPolicy = { baseMs: 1_000, maxMs: 300_000, healthyAfterMs: 60_000, crashLoopRestarts: 5, crashLoopWindowMs: 600_000 };
const exit = (code: number | null = 1, signal: string | null = null) => ({ code, signal, at: '2026-12-03T00:00:00.000Z' });

/** `n` exits of runs that never became ready, one every `everyMs`, from t = 0. */
function crashes(n: number, everyMs: number, from: SupervisionRecord = freshSupervision()): { record: SupervisionRecord; delays: number[]; atMs: number } {
  let record = from;
  const delays: number[] = [];
  let atMs = 0;
  for (let i = 0; i < n; i++) {
    atMs = i * everyMs;
    const next = scheduleRestart(record, policy, exit(), null, atMs);
    record = next.record;
    delays.push(next.delayMs);
  }
  return { record, delays, atMs };
}

describe('restart backoff', () => {
  test('1 s doubling to 5 min by default', () => {
    expect(DEFAULT_RESTART_POLICY).toMatchObject({ baseMs: 1_000, maxMs: 300_000 });
    expect([1, 2, 3, 4, 9, 10, 11, 100, 5_000].map((n) => restartDelayMs(policy, n))).toEqual([1_000, 2_000, 4_000, 8_000, 256_000, 300_000, 300_000, 300_000, 300_000]);
  });

  test('each exit of a run that never became ready waits twice as long, and counts a restart', () => {
    const { record, delays } = crashes(6, 10);
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000]);
    expect(record).toMatchObject({ restarts: 6, consecutive: 6, lastExit: exit() });
  });

  test('a run ready for the healthy stretch resets the backoff (the restart count goes on)', () => {
    const { record } = crashes(4, 10);
    const healthy = scheduleRestart(record, policy, exit(null, 'SIGKILL'), 60_000, 100_000);
    expect(healthy.delayMs).toBe(1_000);
    expect(healthy.record).toMatchObject({ restarts: 5, consecutive: 1, recentRestartsAtMs: [100_000], lastExit: { signal: 'SIGKILL' } });
    // ready, but not for long enough: no reset
    expect(scheduleRestart(record, policy, exit(), 59_999, 100_000).delayMs).toBe(16_000);
  });
});

describe('crash loop', () => {
  test('crashLoopRestarts restarts within the window make one; fewer do not', () => {
    expect(isCrashLooping(crashes(4, 1_000).record, policy, 5_000, null)).toBe(false);
    expect(isCrashLooping(crashes(5, 1_000).record, policy, 5_000, null)).toBe(true);
  });

  test('restarts that aged out of the window no longer count', () => {
    const { record } = crashes(5, 1_000);
    expect(isCrashLooping(record, policy, 600_000 - 1, null)).toBe(true); // restarts at 0, 1, 2, 3, 4 s
    expect(isCrashLooping(record, policy, 600_000 + 1, null)).toBe(false); // the one at 0 s aged out
  });

  test('a run that has been ready for the healthy stretch ends it; a shorter one does not', () => {
    const { record } = crashes(5, 1_000);
    expect(isCrashLooping(record, policy, 70_000, 59_000)).toBe(true);
    expect(isCrashLooping(record, policy, 70_000, 60_000)).toBe(false);
  });
});

describe('crashLoopingTasks (what state shows)', () => {
  const report = (taskId: string, extra: Record<string, unknown> = {}) => ({ taskId, workload: 'web', state: 'restarting', counts: { restarts: 6 }, ...extra });
  const placements = [{ workload: 'web', assignments: [{ runtimeId: 'a', taskId: 'web-0-g1' }, { runtimeId: 'b', taskId: 'web-1-g1' }] }];

  test('names each placed task its runtime reports crash-looping, with its restarts, last exit and the decision', () => {
    const found = crashLoopingTasks(placements, [
      { id: 'a', status: 'READY', tasks: [report('web-0-g1', { crashLooping: true, lastExit: exit(7), nextRestartAt: '2026-12-03T00:01:00.000Z' })] },
      { id: 'b', status: 'READY', tasks: [report('web-1-g1')] },
    ]);
    expect(found).toEqual([{
      workload: 'web', taskId: 'web-0-g1', runtimeId: 'a', restarts: 6, lastExit: exit(7), nextRestartAt: '2026-12-03T00:01:00.000Z',
      reason: 'crash-looping: task web-0-g1 on a restarted 6 time(s), last exit code 7; left running with its backoff; next restart at 2026-12-03T00:01:00.000Z',
    }]);
  });

  test('ignores LOST runtimes, tasks no placement holds, and reports of the task from another runtime', () => {
    expect(crashLoopingTasks(placements, [
      { id: 'a', status: 'LOST', tasks: [report('web-0-g1', { crashLooping: true })] },
      { id: 'b', status: 'READY', tasks: [report('web-0-g1', { crashLooping: true }), report('web-9-g1', { crashLooping: true })] },
    ])).toEqual([]);
  });
});

describe('supervisionCounts (the metrics)', () => {
  test('sums the restarts and counts the crash-looping tasks of each workload\'s placed tasks, as reported', () => {
    const placements = [
      { workload: 'web', assignments: [{ runtimeId: 'a', taskId: 'web-0-g1' }, { runtimeId: 'b', taskId: 'web-1-g1' }] },
      { workload: 'api', assignments: [{ runtimeId: 'a', taskId: 'api-0-g1' }] },
    ];
    const task = (taskId: string, restarts: number, crashLooping = false) => ({ taskId, workload: taskId.split('-')[0], state: 'ready', counts: { restarts }, crashLooping });
    expect(supervisionCounts([{ name: 'web' }, { name: 'api' }, { name: 'idle' }], placements, [
      { id: 'a', status: 'READY', tasks: [task('web-0-g1', 6, true), task('api-0-g1', 1), task('web-7-g1', 40)] },
      { id: 'b', status: 'READY', tasks: [task('web-1-g1', 2)] },
    ])).toEqual({ web: { restarts: 8, crashLooping: 1 }, api: { restarts: 1, crashLooping: 0 }, idle: { restarts: 0, crashLooping: 0 } });
  });
});
