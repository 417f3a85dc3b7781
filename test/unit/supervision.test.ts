// Supervision's pure decisions (domain/supervision.ts): the restart backoff, its reset after a
// healthy run, what a crash loop is, and what the control plane shows about one. The driver with
// real processes is test/component/process-driver.test.ts ("process driver supervision").
import { crashLoopingTasks, decideCrashLoop, DEFAULT_RESTART_POLICY, supervisionCounts, freshSupervision, isCrashLooping, restartDelayMs, scheduleRestart, type RestartPolicy, type SupervisionRecord } from '../../domain/supervision';

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

  test('names each placed task its runtime reports crash-looping, with its restarts, last exit and that a decision is awaited', () => {
    const found = crashLoopingTasks(placements, [
      { id: 'a', status: 'READY', tasks: [report('web-0-g1', { crashLooping: true, lastExit: exit(7), nextRestartAt: '2026-12-03T00:01:00.000Z' })] },
      { id: 'b', status: 'READY', tasks: [report('web-1-g1')] },
    ]);
    expect(found).toEqual([{
      workload: 'web', taskId: 'web-0-g1', runtimeId: 'a', restarts: 6, lastExit: exit(7), nextRestartAt: '2026-12-03T00:01:00.000Z', decision: null,
      reason: 'crash-looping: task web-0-g1 on a restarted 6 time(s), last exit code 7; awaiting the decision of crash-loops:web, running with its backoff; next restart at 2026-12-03T00:01:00.000Z',
    }]);
  });

  test('shows the newest decision recorded about that task on that runtime', () => {
    const runtimes = [{ id: 'a', status: 'READY', tasks: [report('web-0-g1', { crashLooping: true })] }];
    const [found] = crashLoopingTasks(placements, runtimes, [
      { runtimeId: 'a', taskId: 'web-0-g1', action: 'leave', reason: 'left running with its backoff: the newest' },
      { runtimeId: 'a', taskId: 'web-0-g1', action: 'move', reason: 'an older one' },
      { runtimeId: 'b', taskId: 'web-0-g1', action: 'move', reason: 'of another runtime' },
    ]);
    expect(found).toMatchObject({ decision: 'leave', reason: 'crash-looping: task web-0-g1 on a restarted 6 time(s); left running with its backoff: the newest' });
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

describe('decideCrashLoop (handleCrashLoops: move or leave)', () => {
  const task = { workload: 'web', taskId: 'web-0-g1', runtimeId: 'a' };
  const three = [{ runtimeId: 'a', taskId: 'web-0-g1' }, { runtimeId: 'b', taskId: 'web-1-g1' }, { runtimeId: 'c', taskId: 'web-2-g1' }];
  const reportsOf = (looping: string[]) => new Map(three.map((a) => [`${a.runtimeId}\n${a.taskId}`, {
    state: looping.includes(a.taskId) ? 'restarting' : 'ready', crashLooping: looping.includes(a.taskId), lastExit: looping.includes(a.taskId) ? exit(3) : undefined,
  }]));
  const decide = (over: Partial<Parameters<typeof decideCrashLoop>[0]> = {}) => decideCrashLoop({
    task, workload: { kind: 'service' }, assignments: three, reports: reportsOf(['web-0-g1']), recentMoves: 0, roomElsewhere: true, ...over,
  });

  test('one replica crash-looping while the others run healthy elsewhere: moved off its runtime', () => {
    expect(decide()).toEqual({ action: 'move', reason: "task web-0-g1 on a crash-loops, last exit code 3 while 2 other replica(s) of web run healthy: moved off a through recovery's path" });
  });

  test('the fault follows the workload: every replica, replicas on two runtimes, or a move already in the window: left, saying why', () => {
    expect(decide({ reports: reportsOf(['web-0-g1', 'web-1-g1', 'web-2-g1']) })).toMatchObject({ action: 'leave', reason: expect.stringContaining('every replica of web crash-loops (3 of 3, last exit code 3)') });
    expect(decide({ assignments: [three[0]] })).toMatchObject({ action: 'leave', reason: expect.stringContaining('every replica of web crash-loops (1 of 1') });
    expect(decide({ reports: reportsOf(['web-0-g1', 'web-1-g1']) })).toMatchObject({ action: 'leave', reason: expect.stringContaining('crash-loop on 2 runtimes (a, b)') });
    expect(decide({ recentMoves: 1 })).toMatchObject({ action: 'leave', reason: expect.stringContaining('was moved already within the crash-loop window') });
  });

  test('no other eligible runtime with room, or a stream subtask: left', () => {
    expect(decide({ roomElsewhere: false })).toEqual({ action: 'leave', reason: 'left running with its backoff: no other eligible runtime has room for task web-0-g1 on a' });
    expect(decide({ workload: { kind: 'stream' } })).toMatchObject({ action: 'leave', reason: expect.stringContaining('only through the job\'s replan') });
  });

  test('nothing to decide: retired, not placed there any more, or not crash-looping now', () => {
    expect(decide({ workload: null }).action).toBe('none');
    expect(decide({ workload: { kind: 'service', retired: true } }).action).toBe('none');
    expect(decide({ assignments: three.slice(1) })).toMatchObject({ action: 'none', reason: expect.stringContaining('is not placed any more') });
    expect(decide({ reports: reportsOf([]) })).toMatchObject({ action: 'none', reason: 'task web-0-g1 on a is not crash-looping now (it reports ready)' });
  });
});
