// One stream subtask (DESIGN.md §5 "stream"): a source, a keyed-aggregate or a sink of a job,
// running inside the agent, exchanging typed records with its peers over TCP (exchange.ts,
// protocol/stream-wire.ts) and keeping its checkpoints in PostgreSQL (job-state.ts). This file is
// what every subtask shares: joining, wiring, restoring, the hot-rescale cutover, status and stop.
// Each operator's loop is its own class: source-subtask.ts, aligned-subtask.ts (aggregate, sink);
// what an operator keeps between checkpoints is in operator-state.ts, the coordinator's clock in
// checkpoint-clock.ts.
//
// Checkpoints: the job's coordinator (the clock in the first sink subtask) assigns ids every
// checkpointIntervalMs, one in flight at a time. A source injects barrier N between two batches:
// it snapshots the offsets it has emitted, then sends N on every output. An aggregate or sink
// holds each input at barrier N until every input delivered N (alignment); the aggregate then
// snapshots the counts it changed since N-1 and forwards N; the sink pre-commits its output for N,
// and the last sink subtask to do so commits the checkpoint: sink rows and the completed mark in
// one transaction. Because every subtask snapshots before it forwards a barrier, a sink aligned on
// N knows every upstream snapshot of N is durable.
//
// Restore: every subtask of a generation starts from the newest completed checkpoint: sources seek
// to its offsets, aggregates load each key's count at it when the key's first record arrives, sinks
// drop pre-commits of older generations. A subtask cannot rejoin a dataflow that moved on without
// it: any failure (a peer's channel closing, PostgreSQL refusing a snapshot) marks it failed, and
// the control plane replans the job from the last completed checkpoint.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import {
  describeIssues,
  sourceTableOf,
  StreamSpecSchema,
  WATERMARK,
  type CheckpointClockAnswer,
  type CheckpointClockCommand,
  type CutoverAnswer,
  type CutoverCommand,
  type StreamRecord,
  type StreamSpec,
  type TaskState,
  type WireEdge,
  type WireMessage,
} from '../../../protocol';
import { blockOf, indicesOf, operatorBlocks, subtaskAt, type SubtaskIdentity } from '../../../domain/stream';
import { ErrorCount } from '../error-count';
import { LatencyReservoir } from '../task-metrics';
import { DriverError, type DrainReceipt, type DriverContext, type TaskHandle, type TaskStart, type TaskStatus } from '../driver';
import type { SourcePort } from '../sources';
import { CheckpointClock } from './checkpoint-clock';
import { InputServer, OutputChannel } from './exchange';
import { SupersededError, createJobState, type CompletedCheckpoint, type JobState } from './job-state';
import { messageOf } from '../../../lib/errors';
import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialDelayMs } from '../../../lib/backoff';

export interface StreamTuning {
  /** records read per partition per source batch */
  batchPerPartition: number;
  /** how often a source asks for new checkpoint triggers */
  triggerPollMs: number;
  /** a source's pause when its partitions have nothing new */
  idlePollMs: number;
  /** how long a subtask waits for its peers' addresses and channels before it fails */
  wiringTimeoutMs: number;
}

export const DEFAULT_STREAM_TUNING: StreamTuning = { batchPerPartition: 500, triggerPollMs: 50, idlePollMs: 20, wiringTimeoutMs: 60_000 };

const LATENCY_SAMPLES = 256;

export interface SubtaskDeps {
  ctx: DriverContext;
  pool: Pool;
  tuning: StreamTuning;
  /** the source port a source subtask reads (its table, or its Kafka topic); `onError` hears a reader's failures */
  openSource: (onError: (error: unknown) => void) => SourcePort;
}

/**
 * What every subtask does, whatever its operator: join its generation, wire its channels, restore,
 * take part in checkpoints and cutovers, report and stop. Each operator's own loop is a subclass:
 * SourceSubtask (source-subtask.ts), AggregateSubtask and SinkSubtask (aligned-subtask.ts).
 */
export abstract class StreamSubtask implements TaskHandle {
  readonly taskId: string;
  readonly incarnation = randomUUID();
  protected readonly identity: SubtaskIdentity;
  protected readonly state: JobState;
  protected phase: TaskState = 'starting';
  protected detail: string | undefined;
  private stopping = false;
  private running: Promise<void> = Promise.resolve();
  private wakeLoop: (() => void) | null = null;

  /** outputs by the downstream subtask's job-global index */
  protected readonly outputs = new Map<number, OutputChannel<StreamRecord>>();
  private secret = '';

  protected readonly counters = { recordsIn: 0, recordsOut: 0, recordsRead: 0, lastCheckpoint: 0, checkpointsAcked: 0, restoredFrom: 0, watermark: 0, commits: 0, cutovers: 0, heldMs: 0, readPosition: 0, restoreMs: 0, snapshotMs: 0, stateKeys: 0, keysLoaded: 0 };
  /** upstream of a cutover: the barrier C this subtask holds the rescaled edge at, until the new peers listen */
  protected holding: number | null = null;
  protected readonly latency = new LatencyReservoir(LATENCY_SAMPLES);
  protected backlog = 0;
  protected readonly errors: ErrorCount;

  /**
   * A hot rescale this subtask is armed for: at checkpoint C the job's layout becomes `spec`
   * (upstream: hold the rescaled edge after barrier C, then move to the new peers; retiring: end at
   * C; downstream: swap the input set at C). Null when none is.
   */
  protected cutover: { checkpoint: number; operator: string; spec: StreamSpec; role: CutoverAnswer['role'] } | null = null;
  /** the layout before the armed cutover: the one whose old subtasks' inputs may end with barrier C */
  protected layoutBefore: StreamSpec;
  /** the layout this subtask routes and aligns by: the spec, or the armed cutover's from C on */
  protected spec: StreamSpec;
  /** a retiring subtask ended at C: nothing more is emitted or taken */
  protected ended = false;

  constructor(
    protected readonly deps: SubtaskDeps,
    protected readonly start: TaskStart,
    spec: StreamSpec,
  ) {
    this.spec = spec;
    this.layoutBefore = spec;
    this.taskId = start.taskId;
    this.errors = new ErrorCount(deps.ctx.errorWindowMs);
    this.identity = subtaskAt(spec, start.index);
    this.state = createJobState(deps.pool, start.workload);
  }

  /** Starts the subtask (called once, after construction, so every subclass field is set). */
  begin(): void {
    this.running = this.run();
  }

  /** The operator's own loop, from the restore point on, until the subtask stops or fails. */
  protected abstract process(restorePoint: CompletedCheckpoint | null): Promise<void>;

  /** An aggregate's or a sink's input server (a source has none): listening before the directory entry. */
  protected abstract readonly input: InputServer | null;

  /** Opens the input server, for subtasks that have inputs. */
  protected async listen(): Promise<void> {}

  /** The checkpoint clock, on the job's coordinator (the first sink subtask) only. */
  protected get clock(): CheckpointClock | null {
    return null;
  }

  protected log(event: string, fields: Record<string, unknown> = {}): void {
    this.deps.ctx.log(event, { workload: this.start.workload, taskId: this.taskId, subtask: this.identity.index, operator: this.identity.operator, generation: this.start.generation, ...fields });
  }

  protected fail(reason: string): void {
    if (this.stopping || this.ended || this.phase === 'failed') return;
    this.phase = 'failed';
    this.detail = reason;
    this.errors.add();
    this.log('stream subtask failed', { reason });
    // Peers notice at once (their channels close) and fail too: the job is replanned as a whole.
    this.closeChannels();
    this.wake();
  }

  /** A wake that came while the loop was busy: the next idle() returns at once. */
  private woken = false;

  protected wake = (): void => {
    const wake = this.wakeLoop;
    this.wakeLoop = null;
    if (wake) wake();
    else this.woken = true;
  };

  /** Waits for a wake (new input, a release, a stop) or the timeout, whichever is first. */
  protected idle(timeoutMs: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeLoop = null;
        resolve();
      }, timeoutMs);
      this.wakeLoop = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  protected get active(): boolean {
    return !this.stopping && this.phase !== 'failed';
  }

  private async run(): Promise<void> {
    try {
      await this.durably('create the tables', () => this.state.ensureTables(sourceTableOf(this.spec), this.spec.sink));
      this.secret = await this.durably('join the generation', () => this.state.joinGeneration(this.start.generation));
      await this.listen();
      // A subtask a hot rescale adds restores from the cutover checkpoint C, once C completed.
      const restorePoint = this.start.joinAt !== undefined
        ? await this.awaitCompleted(this.start.joinAt)
        : await this.durably('find the restore point', () => this.state.latestCompleted());
      this.counters.restoredFrom = restorePoint?.id ?? 0;
      const entered = await this.durably('enter the directory', () => this.state.enterDirectory({
        generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, operatorIndex: this.identity.operatorIndex,
        runtimeId: this.deps.ctx.runtimeId, taskId: this.taskId, incarnation: this.incarnation,
        host: this.input ? (this.deps.ctx.dataHost ?? '127.0.0.1') : null, port: this.input?.port ?? null,
      }));
      if (!entered) throw new Error(`subtask ${this.identity.index} ran in generation ${this.start.generation} before (an earlier incarnation); it cannot rejoin the running dataflow: the job must be replanned`);
      await this.connectOutputs();
      await this.awaitInputs();
      if (!this.active) return;
      this.phase = 'ready';
      this.log('stream subtask ready', { restoredFrom: this.counters.restoredFrom, incarnation: this.incarnation });
      await this.process(restorePoint);
    } catch (error) {
      if (error instanceof SupersededError) this.fail(`superseded: ${error.message}`);
      else this.fail(messageOf(error));
    }
  }

  /**
   * Runs a PostgreSQL or broker step until it succeeds (static stability: a database or broker
   * outage stalls the job, it never stops it). The dataflow waits meanwhile, which upstream feels as
   * backpressure. Only a superseded generation, a refusal no retry can change (a DriverError: the
   * topic's partitions are not the spec's), or this subtask stopping, ends the wait.
   */
  protected async durably<T>(what: string, step: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await step();
      } catch (error) {
        if (error instanceof SupersededError || error instanceof DriverError || !this.active) throw error;
        this.errors.add();
        if (attempt === 1 || attempt % 10 === 0) this.log('stream step failed; retrying', { what, attempt, error: messageOf(error) });
        await sleep(exponentialDelayMs(attempt, 50, 2_000));
      }
    }
  }

  // -- wiring ----------------------------------------------------------------------------------

  /** The upstream subtasks whose channels this subtask reads. */
  protected upstream(): number[] {
    const kind = this.identity.kind === 'keyed-aggregate' ? 'source' : this.identity.kind === 'sink' ? 'keyed-aggregate' : null;
    if (!kind) return [];
    const block = blockOf(this.spec, kind);
    return Array.from({ length: block.parallelism }, (_, i) => block.base + i);
  }

  /** The downstream operator's block, whose every subtask this one sends to. */
  protected downstreamBlock() {
    if (this.identity.kind === 'source') return blockOf(this.spec, 'keyed-aggregate');
    if (this.identity.kind === 'keyed-aggregate') return blockOf(this.spec, 'sink');
    return null;
  }

  /** An input server for this subtask's upstream subtasks, checking every line against `edge`. */
  protected listenFor<R extends StreamRecord>(edge: WireEdge<R>): Promise<InputServer<R>> {
    return InputServer.listen({
      edge, host: this.deps.ctx.dataBindHost ?? '127.0.0.1', job: this.start.workload, generation: this.start.generation, secret: this.secret,
      expected: new Set(this.upstream()), wake: this.wake, log: (event, fields) => this.log(event, fields),
      onClose: (from, lastBarrier) => {
        // Inputs end after the cutover barrier C by design: a retiring subtask's (rule 2) and, downstream,
        // the rescaled operator's old subtasks' (rule 4). Any other end is a failure.
        const cutover = this.cutover;
        const endedWithC = cutover !== null && lastBarrier >= cutover.checkpoint;
        if (endedWithC && (cutover.role === 'retiring' || this.operatorBefore(from) === cutover.operator)) return;
        this.fail(`input from subtask ${from} ended (after barrier ${lastBarrier})`);
      },
    });
  }

  /**
   * The operator subtask `index` belonged to before the cutover; null for a subtask the cutover
   * added (its input ending is a failure like any other, never an exception in a socket handler).
   */
  protected operatorBefore(index: number): string | null {
    const old = operatorBlocks(this.layoutBefore).find((b) => index >= b.base && index < b.base + b.parallelism);
    return old?.id ?? null;
  }

  /** Waits (durably) until checkpoint `id` completed; answers it as a restore point. */
  protected async awaitCompleted(id: number): Promise<CompletedCheckpoint | null> {
    while (this.active) {
      if (await this.durably(`await checkpoint ${id}`, () => this.state.isCompleted(id))) return { id, generation: this.start.generation };
      await this.idle(50);
    }
    return null;
  }

  protected async connectOutputs(): Promise<void> {
    const block = this.downstreamBlock();
    if (!block) return;
    const wanted = Array.from({ length: block.parallelism }, (_, i) => block.base + i).filter((to) => !this.outputs.has(to));
    const deadline = Date.now() + this.deps.tuning.wiringTimeoutMs;
    for (;;) {
      if (!this.active) return;
      const addresses = await this.durably('read the directory', () => this.state.addresses(this.start.generation, wanted));
      if (addresses.length === wanted.length) {
        for (const address of addresses.sort((a, b) => a.subtask - b.subtask)) {
          const hello = { job: this.start.workload, generation: this.start.generation, from: this.identity.index, secret: this.secret };
          const output = await OutputChannel.connect<StreamRecord>(address.subtask, address.host, address.port, hello, (to, reason) => this.fail(`output to subtask ${to} broke: ${reason}`));
          this.outputs.set(address.subtask, output);
        }
        return;
      }
      if (Date.now() > deadline) throw new Error(`downstream subtasks ${wanted.join(', ')} did not all listen within ${this.deps.tuning.wiringTimeoutMs} ms`);
      await sleep(50);
    }
  }

  private async awaitInputs(): Promise<void> {
    if (!this.input) return;
    const deadline = Date.now() + this.deps.tuning.wiringTimeoutMs;
    while (this.active && !this.input.connected(this.upstream())) {
      if (Date.now() > deadline) throw new Error(`upstream subtasks did not all connect within ${this.deps.tuning.wiringTimeoutMs} ms`);
      await this.idle(100);
    }
  }

  protected async flushOutputs(): Promise<void> {
    await Promise.all([...this.outputs.values()].map((o) => o.flush()));
  }

  protected broadcast(message: WireMessage<StreamRecord>): void {
    for (const output of this.outputs.values()) output.push(message);
  }

  protected ack(checkpoint: number): void {
    this.counters.lastCheckpoint = checkpoint;
    this.counters.checkpointsAcked++;
  }

  /**
   * Rule 3: after forwarding barrier C into the rescaled edge, that edge holds (nothing more is read
   * or emitted) until C completed and the new subtasks listen; then it moves to them and re-emits
   * the current watermark, so downstream time resumes at once. The old channels end with barrier C.
   */
  protected async holdThenMoveToNewPeers(): Promise<void> {
    const cutover = this.cutover!;
    const heldAt = Date.now();
    // The old channels end with barrier C (written, then closed).
    await Promise.all([...this.outputs.values()].map((output) => output.end()));
    this.outputs.clear();
    this.holding = cutover.checkpoint;
    await this.awaitCompleted(cutover.checkpoint);
    this.spec = cutover.spec;
    await this.connectOutputs();
    this.broadcast([WATERMARK, this.counters.watermark]);
    await this.flushOutputs();
    this.holding = null;
    this.counters.cutovers++;
    this.counters.heldMs += Date.now() - heldAt;
    this.log('stream cutover: moved to the new peers', { checkpoint: cutover.checkpoint, heldMs: Date.now() - heldAt, peers: [...this.outputs.keys()] });
  }

  /** Arms this subtask for a hot rescale at checkpoint C (idempotent for the same C). */
  armCutover(command: CutoverCommand): CutoverAnswer {
    const parsed = StreamSpecSchema.safeParse(command.spec);
    if (!parsed.success) throw new Error(`cutover spec: ${describeIssues(parsed.error)}`);
    if (this.cutover) {
      if (this.cutover.checkpoint === command.checkpoint && this.cutover.operator === command.operator) return { role: this.cutover.role, checkpoint: command.checkpoint };
      // An earlier cutover that has not passed yet holds; one that passed is history.
      if (this.counters.lastCheckpoint <= this.cutover.checkpoint || this.holding !== null) throw new Error(`armed for a cutover at checkpoint ${this.cutover.checkpoint} already`);
    }
    if (this.phase !== 'ready') throw new Error(`subtask ${this.identity.index} is ${this.phase}, not ready: it cannot take part in a cutover`);
    if (this.counters.lastCheckpoint >= command.checkpoint) throw new Error(`checkpoint ${command.checkpoint} has passed here (at ${this.counters.lastCheckpoint})`);
    const spec = parsed.data;
    const rescaled = operatorBlocks(spec).find((b) => b.id === command.operator);
    if (!rescaled) throw new Error(`the cutover spec has no operator ${command.operator}`);
    const role: CutoverAnswer['role'] =
      this.identity.operator === command.operator ? 'retiring'
        : this.downstreamBlock()?.id === command.operator ? 'upstream'
          : this.upstream().some((from) => subtaskAt(this.spec, from).operator === command.operator) ? 'downstream'
            : 'unaffected';
    // Downstream admits the new subtasks' channels from now on (they connect once C completed).
    if (role === 'downstream') this.input!.expect(indicesOf(rescaled));
    this.layoutBefore = this.spec;
    this.cutover = { checkpoint: command.checkpoint, operator: command.operator, spec, role };
    this.log('stream cutover armed', { checkpoint: command.checkpoint, role, rescaled: command.operator });
    return { role, checkpoint: command.checkpoint };
  }

  /**
   * Pauses or resumes the checkpoint clock (the coordinator only): no trigger while paused. `trigger`
   * triggers that checkpoint id now, paused or not: a hot rescale's cutover barrier C (rule 1).
   */
  async checkpointClock(command: CheckpointClockCommand): Promise<CheckpointClockAnswer> {
    const clock = this.clock;
    if (!clock) throw new Error(`task ${this.taskId} is not its job's checkpoint coordinator (the first sink subtask is)`);
    return clock.command(command);
  }

  // -- lifecycle ---------------------------------------------------------------------------------

  private closeChannels(): void {
    for (const output of this.outputs.values()) output.close();
    void this.input?.close();
  }

  status(): TaskStatus {
    const latencyMs = this.latency.percentiles();
    const { recordsRead, readPosition, stateKeys, keysLoaded, ...common } = this.counters;
    const counts: Record<string, number> = { ...common, generation: this.start.generation, subtask: this.identity.index, operatorIndex: this.identity.operatorIndex };
    // Reads are a source's, keys an aggregate's: other subtasks do not report them (a 0 would read as "none").
    if (this.identity.kind === 'source') Object.assign(counts, { recordsRead, readPosition });
    if (this.identity.kind === 'keyed-aggregate') Object.assign(counts, { stateKeys, keysLoaded });
    if (this.holding !== null) counts.holdingAt = this.holding;
    // Held window proof: a retired subtask's inputs carry nothing after barrier C (upstream held the edge).
    if (this.ended && this.input) counts.receivedAfterCutover = [...this.input.channels.values()].reduce((sum, c) => sum + c.queued, 0);
    return {
      taskId: this.taskId,
      workload: this.start.workload,
      incarnation: this.incarnation,
      state: this.phase,
      counts,
      ...(latencyMs ? { latencyMs } : {}),
      backlog: this.backlog,
      errors: this.errors.total,
      recentErrors: this.errors.recent(),
      generation: this.start.generation,
      ...(this.detail ? { detail: this.detail } : {}),
    };
  }

  /**
   * Stops the subtask: its output since the last completed checkpoint is dropped, not flushed: the
   * replan that follows restores from that checkpoint, and replays it exactly once.
   */
  async drain(): Promise<DrainReceipt> {
    const startedAt = Date.now();
    const counts = this.status().counts;
    this.stopping = true;
    this.closeChannels();
    this.wake();
    await this.running.catch(() => {});
    if (this.phase !== 'failed') this.phase = 'stopped';
    return { taskId: this.taskId, incarnation: this.incarnation, inFlight: 0, durationMs: Date.now() - startedAt, counts };
  }
}
