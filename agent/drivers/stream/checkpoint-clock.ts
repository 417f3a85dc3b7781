// The checkpoint clock of a stream job (DESIGN.md §5 "stream"): run by the job's coordinator, the
// first sink subtask. It triggers a checkpoint id every checkpointIntervalMs, one in flight at a
// time; a hot rescale pauses it and triggers its cutover barrier C by hand (rule 1).
import type { CheckpointClockAnswer, CheckpointClockCommand } from '../../../protocol';
import { SupersededError, type JobState } from './job-state';
import { setTimeout as sleep } from 'node:timers/promises';

export class CheckpointClock {
  private paused = false;
  private lastTriggered = 0;
  private inFlight: number | null = null;
  /** The clock's own trigger while its INSERT runs: a pause that lands meanwhile waits for it (see command). */
  private triggering: Promise<void> | null = null;

  constructor(
    private readonly state: JobState,
    private readonly job: string,
    private readonly generation: number,
    private readonly intervalMs: () => number,
    /** PostgreSQL away: no checkpoint now; the data keeps flowing and the clock tries again */
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Triggers checkpoints while `active()`; ends with SupersededError when the job moved past this generation. */
  async run(active: () => boolean): Promise<void> {
    let lastTriggerAt = Date.now();
    while (active()) {
      await sleep(Math.min(50, this.intervalMs()));
      if (!active()) return;
      try {
        if (this.inFlight !== null) {
          if (await this.state.isCompleted(this.inFlight)) this.inFlight = null;
          continue;
        }
        if (this.paused || Date.now() - lastTriggerAt < this.intervalMs()) continue;
        this.triggering = this.triggerNext();
        try {
          await this.triggering;
        } finally {
          this.triggering = null;
        }
        lastTriggerAt = Date.now();
      } catch (error) {
        if (error instanceof SupersededError) throw error;
        this.onError(error);
      }
    }
  }

  private async triggerNext(): Promise<void> {
    const id = await this.state.trigger(this.generation);
    if (id === null) throw new SupersededError(`job ${this.job} moved past generation ${this.generation}`);
    this.lastTriggered = id;
    this.inFlight = id;
  }

  /**
   * Pauses or resumes; `trigger` triggers that checkpoint id now, paused or not (a cutover barrier C).
   * A pause answers only after a trigger the clock had already begun has landed, so "paused, nothing
   * in flight" means no checkpoint id is taken behind the caller's back (the rescale's C is the next id).
   */
  async command(command: CheckpointClockCommand): Promise<CheckpointClockAnswer> {
    this.paused = command.state === 'paused';
    if (this.paused) await this.triggering?.catch(() => undefined);
    if (command.trigger !== undefined && this.lastTriggered !== command.trigger) {
      if (this.inFlight !== null) throw new Error(`checkpoint ${this.inFlight} is in flight; trigger ${command.trigger} once it completed`);
      const id = await this.state.trigger(this.generation, command.trigger);
      if (id === null) throw new Error(`checkpoint ${command.trigger} is not the job's next checkpoint id in generation ${this.generation}`);
      this.lastTriggered = id;
      this.inFlight = id;
    }
    return { state: this.paused ? 'paused' : 'running', lastTriggered: this.lastTriggered, inFlight: this.inFlight };
  }
}
