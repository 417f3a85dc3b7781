// The scale-out baseline reads the current error rate (issue 22): errors within the agents' error
// window block a scale-out, an old transient one does not; a snapshot recorded before the window
// existed is judged as it was then (every error counts). A task absent, unanswered or not ready
// makes the baseline unhealthy, naming it (DESIGN.md §3 "Evidence is a judgment").
import { ErrorCount } from '../../agent/drivers/error-count';
import { baselineHealth, type EvidenceSnapshot, type TaskEvidence } from '../../domain/evidence';

const snapshot = (errors: number, recentErrors?: number): EvidenceSnapshot => ({
  atMs: 0, tasks: [], ready: 2, processed: 100, ratePerSec: 10, latencyP50Ms: null, latencyP95Ms: null, backlog: 0, errors,
  ...(recentErrors === undefined ? {} : { recentErrors }),
});

describe('ErrorCount', () => {
  it('counts every error, and as recent only those within its window', () => {
    const errors = new ErrorCount(1_000);
    errors.add(10_000);
    errors.add(10_500);
    errors.add(11_200);
    expect(errors.total).toBe(3);
    expect(errors.recent(11_300)).toBe(2); // 10,000 is more than 1 s old
    expect(errors.recent(11_600)).toBe(1); // and so is 10,500
    expect(errors.recent(12_200)).toBe(0);
    expect(errors.total).toBe(3);
  });

  it('stays bounded under an error loop', () => {
    const errors = new ErrorCount(3_600_000);
    for (let i = 0; i < 20_000; i++) errors.add(1_000 + i);
    expect(errors.total).toBe(20_000);
    expect(errors.recent(30_000)).toBe(10_000);
  });
});

describe('baselineHealth', () => {
  it('passes a baseline whose errors are all older than the window', () => {
    expect(baselineHealth(snapshot(3, 0), 2)).toEqual({ ok: true, detail: 'baseline captured: 2 ready task(s)' });
  });

  it('refuses errors within the window, naming both counts', () => {
    expect(baselineHealth(snapshot(3, 1), 2)).toEqual({
      ok: false, detail: "baseline has 1 task error(s) within the agents' error window (3 since the tasks started)",
    });
  });

  it('judges a snapshot without a recent count (recorded before the window) by every error, as before', () => {
    expect(baselineHealth(snapshot(3), 2)).toEqual({ ok: false, detail: 'baseline has 3 task error(s)' });
    expect(baselineHealth(snapshot(0), 2).ok).toBe(true);
  });

  it('has nothing to judge from zero replicas', () => {
    expect(baselineHealth(snapshot(5, 5), 0).ok).toBe(true);
  });
});

describe('baselineHealth: every task placed measured and ready', () => {
  const task = (taskId: string, change: Partial<TaskEvidence> = {}): TaskEvidence => ({
    taskId, runtimeId: `rt-${taskId}`, incarnation: `${taskId}-i`, state: 'ready', processed: 10, errors: 0, backlog: 0, ownedPartitions: 1, inFlight: 0, ratePerSec: 1, ...change,
  });
  const withTasks = (tasks: TaskEvidence[]): EvidenceSnapshot => ({ ...snapshot(0, 0), tasks, ready: tasks.filter((t) => t.state === 'ready').length });

  it('is not healthy with a task its agent did not answer for, one absent, or one not ready, naming each', () => {
    const health = baselineHealth(withTasks([
      task('web-0-g1'),
      task('web-1-g1', { state: 'absent', incarnation: null, unmeasured: 'not measured: its agent did not answer (agent http://10.0.0.2:7000 unreachable: fetch failed)' }),
      task('web-2-g1', { state: 'absent', incarnation: null, unmeasured: 'absent from its agent' }),
      task('web-3-g1', { state: 'starting' }),
    ]), 4);
    expect(health).toEqual({
      ok: false,
      detail: 'baseline not healthy: 3 of 4 task(s) not ready or not measured: web-1-g1 on rt-web-1-g1 not measured: its agent did not answer (agent http://10.0.0.2:7000 unreachable: fetch failed); web-2-g1 on rt-web-2-g1 absent from its agent; web-3-g1 on rt-web-3-g1 starting',
    });
  });

  it('is healthy with every task measured and ready, and judged as before patch evidence-judged without', () => {
    expect(baselineHealth(withTasks([task('a'), task('b')]), 2).ok).toBe(true);
    expect(baselineHealth(withTasks([task('a'), task('b', { state: 'absent', unmeasured: 'absent from its agent' })]), 2, false).ok).toBe(true);
  });
});
