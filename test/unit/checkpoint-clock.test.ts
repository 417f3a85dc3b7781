// The checkpoint clock's pause: a hot rescale reads "paused, nothing in flight" and takes the job's
// next checkpoint id as its cutover barrier C, so no trigger may land after that answer. Found in a
// clean-clone run: the clock's own INSERT was under way when the pause came, the answer said
// nothing was in flight, and the cutover armed at C found C already passed.
import { CheckpointClock } from '../../agent/drivers/stream/checkpoint-clock';
import type { JobState } from '../../agent/drivers/stream/job-state';

/** A job state whose trigger INSERT is held until the test lets it land. */
function heldTriggers() {
  let release: (id: number) => void = () => undefined;
  let started: () => void = () => undefined;
  const triggerStarted = new Promise<void>((resolve) => { started = resolve; });
  const state = {
    trigger: () => new Promise<number>((resolve) => { release = resolve; started(); }),
    isCompleted: async () => false,
  } as unknown as JobState;
  return { state, triggerStarted, land: (id: number) => release(id) };
}

describe('checkpoint clock', () => {
  it('answers a pause only after a trigger it had begun has landed, naming it in flight', async () => {
    const { state, triggerStarted, land } = heldTriggers();
    const clock = new CheckpointClock(state, 'job', 1, () => 1, (error) => { throw error; });
    let active = true;
    const running = clock.run(() => active);
    try {
      await triggerStarted;
      const answer = clock.command({ state: 'paused' });
      land(28);
      await expect(answer).resolves.toEqual({ state: 'paused', lastTriggered: 28, inFlight: 28 });
    } finally {
      active = false;
      await running;
    }
  });

  it('triggers nothing while paused', async () => {
    const { state } = heldTriggers();
    const trigger = jest.spyOn(state, 'trigger');
    const clock = new CheckpointClock(state, 'job', 1, () => 1, (error) => { throw error; });
    await clock.command({ state: 'paused' });
    let loops = 0;
    await clock.run(() => ++loops <= 5);
    expect(trigger).not.toHaveBeenCalled();
    await expect(clock.command({ state: 'running' })).resolves.toEqual({ state: 'running', lastTriggered: 0, inFlight: null });
  });
});
