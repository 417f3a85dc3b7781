// One stream subtask (DESIGN.md §5 "stream"): a source, a keyed-aggregate or a sink of a job,
// running inside the agent, exchanging typed records with its peers over TCP (exchange.ts,
// protocol/stream-wire.ts) and keeping its checkpoints in PostgreSQL (job-state.ts). This file
// moves records and barriers and runs the hot-rescale cutover; what each operator keeps between
// checkpoints is in operator-state.ts, the coordinator's clock in checkpoint-clock.ts.
//
// Checkpoints: the job's coordinator (the clock in the first sink subtask) assigns ids every
// checkpointIntervalMs, one in flight at a time. A source injects barrier N between two batches:
// it snapshots the offsets it has emitted, then sends N on every output. An aggregate or sink
// holds each input at barrier N until every input delivered N (alignment); the aggregate then
// snapshots its counts per key group and forwards N; the sink pre-commits its output for N, and
// the last sink subtask to do so commits the checkpoint: sink rows and the completed mark in one
// transaction. Because every subtask snapshots before it forwards a barrier, a sink aligned on N
// knows every upstream snapshot of N is durable.
//
// Restore: every subtask of a generation starts from the newest completed checkpoint: sources seek
// to its offsets, aggregates load the key groups they own now, sinks drop pre-commits of older
// generations. A subtask cannot rejoin a dataflow that moved on without it: any failure (a peer's
// channel closing, PostgreSQL refusing a snapshot) marks it failed, and the control plane replans
// the job from the last completed checkpoint.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import {
  BARRIER,
  COUNT_UPDATES,
  describeIssues,
  KEYED_RECORDS,
  RECORD,
  sourceTableOf,
  StreamSpecSchema,
  WATERMARK,
  type CheckpointClockAnswer,
  type CheckpointClockCommand,
  type CountUpdate,
  type CutoverAnswer,
  type CutoverCommand,
  type KeyedRecord,
  type StreamRecord,
  type StreamSpec,
  type TaskState,
  type WireMessage,
} from '../../../protocol';
import { blockOf, indicesOf, keyGroupOf, keyGroupRange, operatorBlocks, ownerOfKeyGroup, sourcePartitions, subtaskAt, subtaskCount, type SubtaskIdentity } from '../../../domain/stream';
import { ErrorCount } from '../error-count';
import { LatencyReservoir } from '../latency-reservoir';
import { DriverError, type DrainReceipt, type DriverContext, type TaskHandle, type TaskStart, type TaskStatus } from '../driver';
import type { SourcePort } from '../sources';
import { CheckpointClock } from './checkpoint-clock';
import { InputServer, OutputChannel } from './exchange';
import { SupersededError, createJobState, type CompletedCheckpoint, type JobState } from './job-state';
import { KeyedCounts, SinkEpoch, SourceOffsets } from './operator-state';

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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
const LATENCY_SAMPLES = 256;
const BACKLOG_REFRESH_MS = 1_000;

export interface SubtaskDeps {
  ctx: DriverContext;
  pool: Pool;
  tuning: StreamTuning;
  /** the source port a source subtask reads (its table, or its Kafka topic); `onError` hears a reader's failures */
  openSource: (onError: (error: unknown) => void) => SourcePort;
}

export class StreamSubtask implements TaskHandle {
  readonly taskId: string;
  readonly incarnation = randomUUID();
  private readonly identity: SubtaskIdentity;
  private readonly state: JobState;
  private phase: TaskState = 'starting';
  private detail: string | undefined;
  private stopping = false;
  private readonly running: Promise<void>;
  private wakeLoop: (() => void) | null = null;

  /** an aggregate's inputs carry keyed records, a sink's count updates; a source has none */
  private keyedInput: InputServer<KeyedRecord> | null = null;
  private countInput: InputServer<CountUpdate> | null = null;
  /** outputs by the downstream subtask's job-global index */
  private readonly outputs = new Map<number, OutputChannel<StreamRecord>>();
  private secret = '';

  private readonly counters = { recordsIn: 0, recordsOut: 0, recordsRead: 0, lastCheckpoint: 0, checkpointsAcked: 0, restoredFrom: 0, watermark: 0, commits: 0, cutovers: 0, heldMs: 0, readPosition: 0 };
  /** upstream of a cutover: the barrier C this subtask holds the rescaled edge at, until the new peers listen */
  private holding: number | null = null;
  private readonly latency = new LatencyReservoir(LATENCY_SAMPLES);
  private backlog = 0;
  private readonly errors: ErrorCount;

  /** the coordinator's (the first sink subtask's) only */
  private readonly clock: CheckpointClock | null;

  /**
   * A hot rescale this subtask is armed for: at checkpoint C the job's layout becomes `spec`
   * (upstream: hold the rescaled edge after barrier C, then move to the new peers; retiring: end at
   * C; downstream: swap the input set at C). Null when none is.
   */
  private cutover: { checkpoint: number; operator: string; spec: StreamSpec; role: CutoverAnswer['role'] } | null = null;
  /** the layout before the armed cutover: the one whose old subtasks' inputs may end with barrier C */
  private layoutBefore: StreamSpec;
  /** the layout this subtask routes and aligns by: the spec, or the armed cutover's from C on */
  private spec: StreamSpec;
  /** a retiring subtask ended at C: nothing more is emitted or taken */
  private ended = false;

  constructor(
    private readonly deps: SubtaskDeps,
    private readonly start: TaskStart,
    spec: StreamSpec,
  ) {
    this.spec = spec;
    this.layoutBefore = spec;
    this.taskId = start.taskId;
    this.errors = new ErrorCount(deps.ctx.errorWindowMs);
    this.identity = subtaskAt(spec, start.index);
    this.state = createJobState(deps.pool, start.workload);
    const isCoordinator = this.identity.kind === 'sink' && this.identity.operatorIndex === 0;
    this.clock = isCoordinator
      ? new CheckpointClock(this.state, start.workload, start.generation, () => this.spec.checkpointIntervalMs, (error) => {
        this.errors.add();
        this.log('checkpoint clock error', { error: messageOf(error) });
      })
      : null;
    this.running = this.run();
  }

  /** The input server of an aggregate or a sink (null for a source). */
  private get input(): InputServer | null {
    return this.keyedInput ?? this.countInput;
  }

  private log(event: string, fields: Record<string, unknown> = {}): void {
    this.deps.ctx.log(event, { workload: this.start.workload, taskId: this.taskId, subtask: this.identity.index, operator: this.identity.operator, generation: this.start.generation, ...fields });
  }

  private fail(reason: string): void {
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

  private wake = (): void => {
    const wake = this.wakeLoop;
    this.wakeLoop = null;
    if (wake) wake();
    else this.woken = true;
  };

  /** Waits for a wake (new input, a release, a stop) or the timeout, whichever is first. */
  private idle(timeoutMs: number): Promise<void> {
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

  private get active(): boolean {
    return !this.stopping && this.phase !== 'failed';
  }

  private async run(): Promise<void> {
    try {
      await this.durably('create the tables', () => this.state.ensureTables(sourceTableOf(this.spec), this.spec.sink));
      this.secret = await this.durably('join the generation', () => this.state.joinGeneration(this.start.generation));
      await this.listenIfDownstream();
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
      if (this.identity.kind === 'source') await this.runSource(restorePoint);
      else if (this.identity.kind === 'keyed-aggregate') await this.runAggregate(restorePoint);
      else await Promise.all([this.runSink(), this.clock?.run(() => this.active)]);
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
  private async durably<T>(what: string, step: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await step();
      } catch (error) {
        if (error instanceof SupersededError || error instanceof DriverError || !this.active) throw error;
        this.errors.add();
        if (attempt === 1 || attempt % 10 === 0) this.log('stream step failed; retrying', { what, attempt, error: messageOf(error) });
        await sleep(Math.min(2_000, 50 * 2 ** Math.min(attempt, 6)));
      }
    }
  }

  // -- wiring ----------------------------------------------------------------------------------

  /** The upstream subtasks whose channels this subtask reads. */
  private upstream(): number[] {
    const kind = this.identity.kind === 'keyed-aggregate' ? 'source' : this.identity.kind === 'sink' ? 'keyed-aggregate' : null;
    if (!kind) return [];
    const block = blockOf(this.spec, kind);
    return Array.from({ length: block.parallelism }, (_, i) => block.base + i);
  }

  /** The downstream operator's block, whose every subtask this one sends to. */
  private downstreamBlock() {
    if (this.identity.kind === 'source') return blockOf(this.spec, 'keyed-aggregate');
    if (this.identity.kind === 'keyed-aggregate') return blockOf(this.spec, 'sink');
    return null;
  }

  private async listenIfDownstream(): Promise<void> {
    const expected = this.upstream();
    if (expected.length === 0) return;
    const options = {
      host: this.deps.ctx.dataBindHost ?? '127.0.0.1', job: this.start.workload, generation: this.start.generation, secret: this.secret,
      expected: new Set(expected), wake: this.wake, log: (event: string, fields?: Record<string, unknown>) => this.log(event, fields),
      onClose: (from: number, lastBarrier: number) => {
        // Inputs end after the cutover barrier C by design: a retiring subtask's (rule 2) and, downstream,
        // the rescaled operator's old subtasks' (rule 4). Any other end is a failure.
        const cutover = this.cutover;
        const endedWithC = cutover !== null && lastBarrier >= cutover.checkpoint;
        if (endedWithC && (cutover.role === 'retiring' || this.operatorBefore(from) === cutover.operator)) return;
        this.fail(`input from subtask ${from} ended (after barrier ${lastBarrier})`);
      },
    };
    if (this.identity.kind === 'keyed-aggregate') this.keyedInput = await InputServer.listen({ ...options, edge: KEYED_RECORDS });
    else this.countInput = await InputServer.listen({ ...options, edge: COUNT_UPDATES });
  }

  /**
   * The operator subtask `index` belonged to before the cutover; null for a subtask the cutover
   * added (its input ending is a failure like any other, never an exception in a socket handler).
   */
  private operatorBefore(index: number): string | null {
    const old = operatorBlocks(this.layoutBefore).find((b) => index >= b.base && index < b.base + b.parallelism);
    return old?.id ?? null;
  }

  /** Waits (durably) until checkpoint `id` completed; answers it as a restore point. */
  private async awaitCompleted(id: number): Promise<CompletedCheckpoint | null> {
    while (this.active) {
      if (await this.durably(`await checkpoint ${id}`, () => this.state.isCompleted(id))) return { id, generation: this.start.generation };
      await this.idle(50);
    }
    return null;
  }

  private async connectOutputs(): Promise<void> {
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

  private async flushOutputs(): Promise<void> {
    await Promise.all([...this.outputs.values()].map((o) => o.flush()));
  }

  private broadcast(message: WireMessage<StreamRecord>): void {
    for (const output of this.outputs.values()) output.push(message);
  }

  private ack(checkpoint: number): void {
    this.counters.lastCheckpoint = checkpoint;
    this.counters.checkpointsAcked++;
  }

  // -- source ----------------------------------------------------------------------------------

  private async runSource(restorePoint: CompletedCheckpoint | null): Promise<void> {
    const source = this.deps.openSource((error) => {
      // a Kafka reader KafkaJS gave up on: counted; the next read reopens it
      this.errors.add();
      this.log('stream source reader failed; it reopens at the next read', { error: messageOf(error) });
    });
    try {
      await this.durably(`prepare ${source.description}`, () => source.prepare());
      await this.readSource(source, restorePoint);
    } finally {
      await source.close().catch(() => {});
    }
  }

  private async readSource(source: SourcePort, restorePoint: CompletedCheckpoint | null): Promise<void> {
    const offsets = new SourceOffsets(sourcePartitions(this.identity.operatorIndex, this.identity.parallelism, this.spec.partitions));
    if (restorePoint) offsets.restore(await this.durably('load source offsets', () => this.state.snapshotStates<{ offsets: Record<string, number> }>(restorePoint, 'source')));
    let aggregate = blockOf(this.spec, 'keyed-aggregate');
    let injected = restorePoint?.id ?? 0;
    let lastTriggerPoll = 0;
    let lastBacklog = 0;
    while (this.active) {
      const now = Date.now();
      if (now - lastTriggerPoll >= this.deps.tuning.triggerPollMs) {
        lastTriggerPoll = now;
        for (const checkpoint of await this.durably('read checkpoint triggers', () => this.state.triggeredAfter(this.start.generation, injected))) {
          const state = offsets.snapshot();
          await this.durably(`snapshot checkpoint ${checkpoint}`, () => this.state.snapshot({ checkpoint, generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, kind: 'source', state }));
          this.broadcast([BARRIER, checkpoint]);
          await this.flushOutputs();
          injected = checkpoint;
          this.ack(checkpoint);
          if (this.cutover?.role === 'upstream' && checkpoint === this.cutover.checkpoint) {
            await this.holdThenMoveToNewPeers();
            aggregate = blockOf(this.spec, 'keyed-aggregate');
          }
        }
      }
      if (now - lastBacklog >= BACKLOG_REFRESH_MS) {
        lastBacklog = now;
        const newest = await this.durably('read the backlog', () => source.newestOffsets(offsets.partitions));
        this.backlog = offsets.backlog(newest);
      }
      const records = await this.durably(`read ${source.description}`, () => source.readEach(offsets.offsets, this.deps.tuning.batchPerPartition));
      if (!this.active) return;
      let watermark = 0;
      const readAt = Date.now();
      for (const record of records) {
        // a source that does not say when a record was appended: latency counts from the read
        const at = record.appendedMs ?? readAt;
        const target = aggregate.base + ownerOfKeyGroup(keyGroupOf(record.key, this.spec.maxParallelism), aggregate.parallelism, this.spec.maxParallelism);
        this.outputs.get(target)!.push([RECORD, record.key, at]);
        offsets.advance(record.partition, record.offset);
        if (at > watermark) watermark = at;
      }
      this.counters.recordsRead += records.length;
      this.counters.readPosition = offsets.position;
      this.counters.recordsIn += records.length;
      this.counters.recordsOut += records.length;
      if (watermark > this.counters.watermark) {
        this.counters.watermark = watermark;
        this.broadcast([WATERMARK, watermark]);
      }
      await this.flushOutputs();
      if (records.length === 0) await this.idle(this.deps.tuning.idlePollMs);
    }
  }

  /**
   * Rule 3: after forwarding barrier C into the rescaled edge, that edge holds (nothing more is read
   * or emitted) until C completed and the new subtasks listen; then it moves to them and re-emits
   * the current watermark, so downstream time resumes at once. The old channels end with barrier C.
   */
  private async holdThenMoveToNewPeers(): Promise<void> {
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

  // -- aligned inputs (aggregate and sink) -----------------------------------------------------

  /**
   * Takes messages from every input not held at a barrier; when every input is held at the same
   * barrier, calls `aligned` and releases them all. Watermarks: the minimum over the inputs.
   */
  private async runAligned<R extends StreamRecord>(input: InputServer<R>, handlers: { record: (message: R) => void; aligned: (checkpoint: number) => Promise<void> }): Promise<void> {
    while (this.active) {
      // The members: the upstream subtasks of the current layout (a cutover swaps them at C).
      const members = this.upstream();
      for (const [from, channel] of input.channels) {
        // An input of the old layout that ended after barrier C, with nothing left to take, is gone (rule 4).
        if (channel.closed && channel.queued === 0 && channel.heldAt === null && !members.includes(from)) input.forget(from);
      }
      const channels = members.map((from) => input.channels.get(from));
      let taken = 0;
      for (const channel of channels) {
        if (!channel) continue;
        for (let n = 0; n < 512; n++) {
          const message = channel.next();
          if (!message) break;
          taken++;
          if (message[0] === RECORD) handlers.record(message);
          else if (message[0] === BARRIER) channel.hold(message[1]);
          else if (message[0] === WATERMARK) channel.watermark = message[1];
        }
      }
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

  private async runAggregate(restorePoint: CompletedCheckpoint | null): Promise<void> {
    const { maxParallelism } = this.spec;
    const counts = new KeyedCounts(maxParallelism, keyGroupRange(this.identity.operatorIndex, this.identity.parallelism, maxParallelism));
    if (restorePoint) counts.restore(await this.durably('load key groups', () => this.state.snapshotStates<{ groups: Record<string, Record<string, number>> }>(restorePoint, 'keyed-aggregate')));
    const sink = blockOf(this.spec, 'sink');
    await this.runAligned(this.keyedInput!, {
      record: ([, key, appendedAt]) => {
        const target = sink.base + ownerOfKeyGroup(keyGroupOf(key, maxParallelism), sink.parallelism, maxParallelism);
        this.outputs.get(target)!.push([RECORD, key, counts.increment(key), appendedAt]);
        this.counters.recordsIn++;
        this.counters.recordsOut++;
      },
      aligned: async (checkpoint) => {
        const state = counts.snapshot();
        await this.durably(`snapshot checkpoint ${checkpoint}`, () => this.state.snapshot({ checkpoint, generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, kind: 'keyed-aggregate', state }));
        this.broadcast([BARRIER, checkpoint]);
      },
    });
  }

  private async runSink(): Promise<void> {
    await this.durably('abort older pre-commits', () => this.state.abortOlderPrecommits(this.start.generation));
    const epoch = new SinkEpoch();
    const sinkBlock = blockOf(this.spec, 'sink');
    await this.runAligned(this.countInput!, {
      record: (update) => {
        epoch.add(update);
        this.counters.recordsIn++;
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

  /**
   * Pauses or resumes the checkpoint clock (the coordinator only): no trigger while paused. `trigger`
   * triggers that checkpoint id now, paused or not: a hot rescale's cutover barrier C (rule 1).
   */
  async checkpointClock(command: CheckpointClockCommand): Promise<CheckpointClockAnswer> {
    if (!this.clock) throw new Error(`task ${this.taskId} is not its job's checkpoint coordinator (the first sink subtask is)`);
    return this.clock.command(command);
  }

  // -- lifecycle ---------------------------------------------------------------------------------

  private closeChannels(): void {
    for (const output of this.outputs.values()) output.close();
    void this.input?.close();
  }

  status(): TaskStatus {
    const latencyMs = this.latency.percentiles();
    const { recordsRead, readPosition, ...common } = this.counters;
    const counts: Record<string, number> = { ...common, generation: this.start.generation, subtask: this.identity.index, operatorIndex: this.identity.operatorIndex };
    // Reads are a source's: other subtasks do not report them (a 0 would read as "read nothing").
    if (this.identity.kind === 'source') Object.assign(counts, { recordsRead, readPosition });
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
