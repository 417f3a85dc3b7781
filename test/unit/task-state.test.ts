// The process driver's task state machine, as a pure function (the driver with real processes and
// ports is test/component/process-driver.test.ts).
import { nextTaskState } from '../../agent/drivers/process-lifecycle';

describe('nextTaskState', () => {
  test('an exit is a failure unless a drain asked for it', () => {
    expect(nextTaskState('starting', 'probe-passed')).toBe('ready');
    expect(nextTaskState('draining', 'probe-passed')).toBe('draining');
    expect(nextTaskState('ready', 'exited')).toBe('failed');
    expect(nextTaskState('starting', 'exited')).toBe('failed');
    expect(nextTaskState('ready', 'drain-requested')).toBe('draining');
    expect(nextTaskState('draining', 'exited')).toBe('stopped');
    expect(nextTaskState('failed', 'drain-requested')).toBe('failed');
  });

  test('supervision restarts only a failure; a task waiting for its restart is stopped by a drain', () => {
    const after = (state: Parameters<typeof nextTaskState>[0], event: Parameters<typeof nextTaskState>[1]) => nextTaskState(state, event);
    expect(['failed', 'stopped', 'draining'].map((state) => after(state as 'failed', 'restart-scheduled'))).toEqual(['restarting', 'stopped', 'draining']);
    expect(['restarting', 'stopped'].map((state) => after(state as 'failed', 'relaunched'))).toEqual(['starting', 'stopped']);
    expect(after('restarting', 'drain-requested')).toBe('stopped');
  });
});
