// The stream subtasks with inputs (DESIGN.md §5 "stream"): a keyed aggregate and a sink. Each
// takes messages from its upstream channels and aligns them on checkpoint barriers: when every
// input is held at barrier N, the aggregate snapshots the counts it changed and forwards N, the
// sink pre-commits its epoch (the last sink subtask's pre-commit completes the checkpoint). A
// cutover swaps the inputs at barrier C (downstream) or ends the subtask there (retiring).
import { blockOf, keyGroupOf, ownerOfKeyGroup, subtaskCount } from '../../../domain/stream';
import { BARRIER, COUNT_UPDATES, KEYED_RECORDS, RECORD, WATERMARK, type CountUpdate, type KeyedRecord, type StreamRecord, type StreamSpec, type WireEdge } from '../../../protocol';
import { CheckpointClock } from './checkpoint-clock';
import type { InputServer } from './exchange';
import type { CompletedCheckpoint } from './job-state';
import { KeyedCounts, SinkEpoch } from './operator-state';
import { StreamSubtask, type SubtaskDeps } from './subtask';
import type { TaskStart } from '../driver';
import { messageOf } from '../../../lib/errors';

/** A subtask whose inputs carry records R, taken in barrier alignment. */
abstract class AlignedSubtask<R extends StreamRecord> extends StreamSubtask {
  protected input: InputServer<R> | null = null;

  protected abstract readonly edge: WireEdge<R>;

  protected override async listen(): Promise<void> {
    this.input = await this.listenFor(this.edge);
  }

  /**
   * Takes messages from every input not held at a barrier, handing each round's records to
   * `records` in their order; when every input is held at the same barrier, calls `aligned` and
   * releases them all. Watermarks: the minimum over the inputs, passed on after the records.
   */
  protected async runAligned(handlers: { records: (batch: R[]) => void | Promise<void>; aligned: (checkpoint: number) => Promise<void> }): Promise<void> {
    const input = this.input;
    if (!input) throw new Error(`subtask ${this.identity.index} has no input server`);
    while (this.active) {
      // The members: the upstream subtasks of the current layout (a cutover swaps them at C).
      const members = this.upstream();
      for (const [from, channel] of input.channels) {
        // An input of the old layout that ended after barrier C, with nothing left to take, is gone (rule 4).
        if (channel.closed && channel.queued === 0 && channel.heldAt === null && !members.includes(from)) input.forget(from);
      }
      const channels = members.map((from) => input.channels.get(from));
      let taken = 0;
      const batch: R[] = [];
      for (const channel of channels) {
        if (!channel) continue;
        for (let n = 0; n < 512; n++) {
          const message = channel.next();
          if (!message) break;
          taken++;
          if (message[0] === RECORD) batch.push(message);
          else if (message[0] === BARRIER) channel.hold(message[1]);
          else if (message[0] === WATERMARK) channel.watermark = message[1];
        }
      }
      // Before the alignment check: a barrier held this round follows these records on its channel.
      if (batch.length) await handlers.records(batch);
      const watermark = Math.min(...channels.map((c) => c?.watermark ?? 0));
      if (watermark > this.counters.watermark) {
        this.counters.watermark = watermark;
        this.broadcast([WATERMARK, watermark]);
      }
      const held = channels.map((c) => c?.heldAt ?? null);
      if (held.every((h) => h !== null)) {
        const checkpoint = held[0]!;
        if (held.some((h) => h !== checkpoint)) throw new Error(`inputs hold different barriers (${held.join(', ')}): the channels are out of step`);
        await this.flushOutputs();
        await handlers.aligned(checkpoint);
        this.ack(checkpoint);
        if (this.cutover && checkpoint === this.cutover.checkpoint) {
          if (this.cutover.role === 'retiring') {
            await this.endAtCutover();
            return;
          }
          // Downstream: the new layout's inputs are the members from C+1 on; the old ones end with C (hold-open until they connect).
          this.spec = this.cutover.spec;
          this.counters.cutovers++;
        }
        for (const channel of channels) channel!.release();
        taken++; // the released inputs may hold queued messages already
      }
      await this.flushOutputs();
      this.backlog = [...input.channels.values()].reduce((sum, c) => sum + c.queued, 0);
      if (taken === 0) await this.idle(100);
    }
  }

  /** Rule 2: a retiring subtask processed through barrier C, snapshotted, forwarded it: it emits nothing more. */
  private async endAtCutover(): Promise<void> {
    this.ended = true;
    // Barrier C was forwarded (buffered by `aligned`): it reaches downstream before the close.
    await Promise.all([...this.outputs.values()].map((output) => output.end()));
    this.outputs.clear();
    this.phase = 'draining';
    this.detail = `ended at cutover checkpoint ${this.cutover!.checkpoint}; waiting to be stopped`;
    this.log('stream cutover: retired at the barrier', { checkpoint: this.cutover!.checkpoint });
  }
}

/** A keyed aggregate: counts per key, each new count sent to the sink subtask owning its key group. */
export class AggregateSubtask extends AlignedSubtask<KeyedRecord> {
  protected readonly edge = KEYED_RECORDS;

  protected async process(restorePoint: CompletedCheckpoint | null): Promise<void> {
    const { maxParallelism } = this.spec;
    const counts = new KeyedCounts(restorePoint !== null);
    if (restorePoint) await this.durably('adopt whole keyed snapshots', () => this.state.adoptWholeKeyedSnapshots(restorePoint));
    const sink = blockOf(this.spec, 'sink');
    await this.runAligned({
      records: async (batch) => {
        const unloaded = counts.unloaded(batch.map(([, key]) => key));
        if (unloaded.length) {
          // Only the keys this batch counts: a restore's cost follows the records, not the state.
          const loadStarted = Date.now();
          counts.load(unloaded, await this.durably('load restored counts', () => this.state.keyedCountsAt(restorePoint!, unloaded)));
          this.counters.restoreMs += Date.now() - loadStarted;
          this.counters.keysLoaded += unloaded.length;
        }
        for (const [, key, appendedAt] of batch) {
          const target = sink.base + ownerOfKeyGroup(keyGroupOf(key, maxParallelism), sink.parallelism, maxParallelism);
          this.outputs.get(target)!.push([RECORD, key, counts.increment(key), appendedAt]);
        }
        this.counters.recordsIn += batch.length;
        this.counters.recordsOut += batch.length;
      },
      aligned: async (checkpoint) => {
        const snapshotStarted = Date.now();
        const changed = counts.takeChanged();
        await this.durably(`snapshot checkpoint ${checkpoint}`, () => this.state.snapshotKeyedCounts({ checkpoint, generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, changed }));
        this.counters.snapshotMs = Date.now() - snapshotStarted;
        this.counters.stateKeys = counts.size;
        this.broadcast([BARRIER, checkpoint]);
      },
    });
  }
}

/** A sink: the newest count per key since the last checkpoint, pre-committed at each barrier; the first one runs the checkpoint clock. */
export class SinkSubtask extends AlignedSubtask<CountUpdate> {
  protected readonly edge = COUNT_UPDATES;
  private readonly coordinatorClock: CheckpointClock | null;

  constructor(deps: SubtaskDeps, start: TaskStart, spec: StreamSpec) {
    super(deps, start, spec);
    this.coordinatorClock = this.identity.operatorIndex === 0
      ? new CheckpointClock(this.state, start.workload, start.generation, () => this.spec.checkpointIntervalMs, (error) => {
        this.errors.add();
        this.log('checkpoint clock error', { error: messageOf(error) });
      })
      : null;
  }

  protected override get clock(): CheckpointClock | null {
    return this.coordinatorClock;
  }

  protected async process(): Promise<void> {
    await Promise.all([this.runSink(), this.coordinatorClock?.run(() => this.active)]);
  }

  private async runSink(): Promise<void> {
    await this.durably('abort older pre-commits', () => this.state.abortOlderPrecommits(this.start.generation));
    const epoch = new SinkEpoch();
    const sinkBlock = blockOf(this.spec, 'sink');
    await this.runAligned({
      records: (batch) => {
        for (const update of batch) epoch.add(update);
        this.counters.recordsIn += batch.length;
      },
      aligned: async (checkpoint) => {
        const { keys, counts, oldestAt } = epoch.take();
        const outcome = await this.durably(`pre-commit checkpoint ${checkpoint}`, () => this.state.precommitAndMaybeComplete({
          checkpoint, generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, sink: this.spec.sink,
          sinkSubtasks: sinkBlock.parallelism, totalSubtasks: subtaskCount(this.spec), keys, counts,
        }));
        this.counters.recordsOut += keys.length;
        if (outcome === 'completed') this.counters.commits++;
        // The oldest record of the epoch became visible now (or at the last sink's commit).
        if (oldestAt !== null) this.latency.add(Date.now() - oldestAt);
      },
    });
  }
}
