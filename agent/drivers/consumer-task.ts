// A consumer task (DESIGN.md §5 "consumer"): one replica of a partitioned consumer. It holds the
// partitions its start assigns (consumer-holdings.ts), processes each in exactly-once batches
// (consumer-batch.ts) from its source (sources/), reports its gauges, takes updates (a new fence
// or assignment) and drains: stop fetching, finish the batch in flight, release every partition.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { ConsumerSpecSchema, describeIssues, LATENCY_SAMPLES_REPORTED, THROUGHPUT_INTERVAL_MS, THROUGHPUT_SAMPLES_REPORTED, type ConsumerSpec, type DrainOptions } from '../../protocol';
import { commitBatch } from './consumer-batch';
import { PartitionHoldings, type OwnedPartition } from './consumer-holdings';
import { partitionOwnership } from './consumer-ownership';
import { quoteIdentifier } from './consumer-schema';
import { DriverError, type DrainReceipt, type DriverContext, type TaskHandle, type TaskStart, type TaskStatus } from './driver';
import { ErrorCount } from './error-count';
import type { SourcePort } from './sources';
import { IntervalCounts, LatencyReservoir, RateWindow } from './task-metrics';
import { messageOf } from '../../lib/errors';
import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialDelayMs } from '../../lib/backoff';

export interface ConsumerDriverOptions {
  /** idle wait between polls when there is nothing to do (default 50 ms) */
  pollMs?: number;
  /** records per batch transaction (default 100) */
  batchSize?: number;
  /** the broken build of SCALEGATE_TEST_BREAK=drain-skips-commit (agent/config.ts): tests only */
  drainSkipsCommit?: boolean;
  /** the broken build of SCALEGATE_TEST_BREAK=owner-fence-unchecked (agent/config.ts): batches skip the owner fence check; tests only */
  ownerFenceUnchecked?: boolean;
}

/** A consumer task's status: the common report plus the consumer's own gauges. */
export interface ConsumerTaskStatus extends TaskStatus {
  /** records committed per second over the last ~5 s */
  rate: number;
  /** records fetched but not yet committed */
  inFlight: number;
  /** max(offset) - committed, per owned partition */
  partitionBacklog: Record<string, number>;
  /** last committed offset per owned partition (-1 = none) */
  committedOffsets: Record<string, number>;
  /** assigned partitions not yet acquired (held by another task, or being fenced) */
  pendingPartitions: number[];
}

/**
 * Simulated work per batch is capped so a huge workMs cannot wedge a drain: a drain with the default
 * deadline (30 s) always outlasts one batch. Long enough that a test can hold a batch in flight
 * while a drain travels through the control plane (the drain-deadline tests).
 */
export const MAX_WORK_SLEEP_MS = 10_000;
const LATENCY_RESERVOIR_SIZE = 1_000;
const RATE_WINDOW_MS = 5_000;
const FAILED_AFTER_CONSECUTIVE_ERRORS = 5;
/** How long a batch transaction may idle beyond its own simulated work before the server ends the session. */
const BATCH_IDLE_MARGIN_MS = 3_000;
const MAX_ERROR_BACKOFF_MS = 2_000;
const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
const UPDATE_RELEASE_TIMEOUT_MS = 30_000;
/** how often the committed offsets are mirrored to the source's tooling (a Kafka group, for lag tools) */
const OFFSET_MIRROR_INTERVAL_MS = 2_000;

/** Parses a consumer start's spec and partitions, or throws DriverError('invalid-spec'). */
export function parseStart(start: TaskStart): { spec: ConsumerSpec; partitions: number[] } {
  const parsed = ConsumerSpecSchema.safeParse(start.spec);
  if (!parsed.success) throw new DriverError('invalid-spec', `consumer spec: ${describeIssues(parsed.error)}`);
  const spec = parsed.data;
  const partitions = [...new Set(start.partitions ?? [])].sort((a, b) => a - b);
  const outOfRange = partitions.filter((p) => !Number.isInteger(p) || p < 0 || p >= spec.partitions);
  if (outOfRange.length > 0) {
    throw new DriverError('invalid-spec', `partitions ${outOfRange.join(', ')} are outside 0..${spec.partitions - 1}`);
  }
  return { spec, partitions };
}

export class ConsumerTask implements TaskHandle {
  readonly taskId: string;
  readonly incarnation = randomUUID();
  private readonly workload: string;
  private readonly sink: string;
  private spec: ConsumerSpec;
  private workMs: number;
  private generation: number;
  private fence: number;

  private desired: Set<number>;
  private readonly holdings: PartitionHoldings;

  private phase: 'running' | 'draining' | 'stopped' = 'running';
  private loopDone: Promise<void> = Promise.resolve();
  private drainCompletion: Promise<DrainReceipt> | null = null;
  private drainStartedAt = 0;
  private wakeIdle: (() => void) | null = null;
  private progressWaiters: Array<() => void> = [];
  /** aborts the simulated work of the in-flight batch (drain deadline), which rolls the batch back */
  private workAbort: AbortController | null = null;

  private inFlight = 0;
  private readonly errors: ErrorCount;
  private consecutiveErrors = 0;
  private lastError: string | null = null;
  /** writesRefused: batches the owner fence refused (the offsets row names a newer owner): a superseded task's late writes */
  private readonly counts = { processed: 0, batches: 0, acquired: 0, released: 0, ownershipLost: 0, acquireDenied: 0, writesRefused: 0 };
  private readonly latency = new LatencyReservoir(LATENCY_RESERVOIR_SIZE);
  private readonly rate = new RateWindow(RATE_WINDOW_MS);
  private readonly throughput = new IntervalCounts(THROUGHPUT_INTERVAL_MS, THROUGHPUT_SAMPLES_REPORTED);
  /** the offsets mirrored last, per partition, and whether a mirror is on its way */
  private readonly mirrored = new Map<number, number>();
  private mirroring = false;
  private lastMirrorAt = 0;

  constructor(
    private readonly pool: Pool,
    private readonly ctx: DriverContext,
    private readonly options: Required<ConsumerDriverOptions>,
    start: TaskStart,
    spec: ConsumerSpec,
    partitions: number[],
    private readonly source: SourcePort,
    private readonly onStopped: (task: ConsumerTask) => void,
  ) {
    this.taskId = start.taskId;
    this.workload = start.workload;
    this.errors = new ErrorCount(ctx.errorWindowMs);
    this.sink = quoteIdentifier(spec.sink);
    this.workMs = spec.workMs;
    this.generation = start.generation;
    this.fence = start.placementFence;
    this.desired = new Set(partitions);
    this.spec = spec;
    this.holdings = new PartitionHoldings(
      partitionOwnership(pool, { workload: this.workload, taskId: this.taskId, incarnation: this.incarnation }), source,
      { taskId: this.taskId, workload: this.workload }, this.counts, options.pollMs, (event, fields) => ctx.log(event, fields),
    );
  }

  private get owned(): Map<number, OwnedPartition> {
    return this.holdings.owned;
  }

  begin(): void {
    this.loopDone = this.run();
  }

  // ---- status ------------------------------------------------------------------------------

  status(): ConsumerTaskStatus {
    const partitionBacklog: Record<string, number> = {};
    const committedOffsets: Record<string, number> = {};
    let backlog = 0;
    for (const [p, owned] of [...this.owned].sort(([a], [b]) => a - b)) {
      const behind = owned.maxOffset === null ? 0 : Math.max(0, owned.maxOffset - owned.committed);
      partitionBacklog[p] = behind;
      committedOffsets[p] = owned.committed;
      backlog += behind;
    }
    const pendingPartitions = this.pendingPartitions();
    const rate = this.rate.perSecond();
    const latencyMs = this.latency.percentiles();
    return {
      taskId: this.taskId,
      workload: this.workload,
      incarnation: this.incarnation,
      state: this.state(pendingPartitions),
      counts: { ...this.counts, inFlight: this.inFlight, ratePerSec: rate },
      ...(latencyMs ? { latencyMs, latencySamples: this.latency.newest(LATENCY_SAMPLES_REPORTED) } : {}),
      throughputSamples: this.throughput.samples(),
      backlog,
      errors: this.errors.total,
      recentErrors: this.errors.recent(),
      partitions: [...this.owned.keys()].sort((a, b) => a - b),
      generation: this.generation,
      detail: this.describe(partitionBacklog, pendingPartitions),
      rate,
      inFlight: this.inFlight,
      partitionBacklog,
      committedOffsets,
      pendingPartitions,
    };
  }

  private state(pending: number[]): TaskStatus['state'] {
    if (this.phase === 'stopped') return 'stopped';
    if (this.phase === 'draining') return 'draining';
    if (this.consecutiveErrors >= FAILED_AFTER_CONSECUTIVE_ERRORS) return 'failed';
    return pending.length === 0 ? 'ready' : 'starting';
  }

  private pendingPartitions(): number[] {
    if (this.phase !== 'running') return [];
    return this.holdings.pending(this.desired, this.fence);
  }

  private describe(partitionBacklog: Record<string, number>, pending: number[]): string {
    const parts = [
      `owns [${Object.keys(partitionBacklog).join(',')}] at fence ${this.fence}`,
      `backlog ${Object.entries(partitionBacklog).map(([p, n]) => `p${p}=${n}`).join(' ') || 'none'}`,
    ];
    if (pending.length > 0) {
      parts.push(`waiting for ${pending.map((p) => this.holdings.describeWaiting(p, this.fence)).join(', ')}`);
    }
    if (this.consecutiveErrors > 0) parts.push(`${this.consecutiveErrors} consecutive errors, last: ${this.lastError}; retrying`);
    return parts.join('; ');
  }

  // ---- the processing loop -------------------------------------------------------------------

  private async run(): Promise<void> {
    while (this.phase === 'running') {
      try {
        await this.holdings.reconcile(this.desired, this.fence);
        let processed = 0;
        for (const p of await this.partitionsWithNewRecords()) {
          if (this.phase !== 'running') break; // draining: stop fetching
          if (!this.desired.has(p)) continue; // being released: never start another batch on it
          processed += await this.processBatch(p);
        }
        this.consecutiveErrors = 0;
        this.notifyProgress();
        this.mirrorOffsetsIfDue();
        if (processed === 0) await this.idle(this.options.pollMs);
      } catch (error) {
        this.noteError('consumer.loop-error', error);
        this.notifyProgress();
        await this.idle(exponentialDelayMs(this.consecutiveErrors, this.options.pollMs, MAX_ERROR_BACKOFF_MS));
      }
    }
    this.notifyProgress();
  }

  noteSourceError(error: unknown): void {
    this.noteError('consumer.source-error', error);
  }

  private noteError(event: string, error: unknown): void {
    this.errors.add();
    this.consecutiveErrors += 1;
    this.lastError = messageOf(error);
    this.ctx.log(event, { taskId: this.taskId, incarnation: this.incarnation, error: this.lastError, consecutive: this.consecutiveErrors });
  }

  /** Sleeps up to `ms`, or until woken (an update, a drain). */
  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.wakeIdle === done) this.wakeIdle = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeIdle = done;
    });
  }

  private wake(): void {
    this.wakeIdle?.();
  }

  private notifyProgress(): void {
    const waiters = this.progressWaiters;
    this.progressWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private async waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await Promise.race([new Promise<void>((resolve) => this.progressWaiters.push(resolve)), sleep(Math.min(left, 200))]);
    }
    return true;
  }

  /** One exactly-once batch on one partition (consumer-batch.ts); returns how many records it committed. */
  private async processBatch(partition: number, commitOffset = true): Promise<number> {
    const owned = this.owned.get(partition);
    if (!owned) return 0;
    // Read before the batch transaction: a remote source (a Kafka reader reopening on a loaded
    // machine) can take seconds, and the offsets row lock must not idle that long: the server
    // would end the session mid-batch. The transaction proves the read started at the committed offset.
    const readFrom = owned.committed;
    const records = await this.source.readAfter(partition, readFrom, this.options.batchSize);
    if (records.length === 0) return 0;
    try {
      const outcome = await commitBatch(this.pool, {
        workload: this.workload, taskId: this.taskId, incarnation: this.incarnation, sink: this.sink, partition, fence: owned.fence,
        readFrom, records, commitOffset, checkOwner: !this.options.ownerFenceUnchecked,
        idleTimeoutMs: Math.min(this.workMs * this.options.batchSize, MAX_WORK_SLEEP_MS) + BATCH_IDLE_MARGIN_MS,
        work: async () => {
          this.inFlight = records.length;
          await this.simulateWork(records.length);
        },
      });
      if (outcome.kind === 'not-owner') {
        // A late write of a superseded owner (recovery moved the partition while this node was
        // partitioned): refused by the fence, nothing written. Counted, and logged for the checkers.
        this.counts.writesRefused += 1;
        this.ctx.log('consumer.write-refused', { taskId: this.taskId, workload: this.workload, partition, fence: owned.fence, records: records.length, from: records[0].offset });
        this.holdings.lose(partition, 'offsets row no longer names this task and fence');
        return 0;
      }
      owned.committed = outcome.committed;
      // the offset moved since the read: the next pass reads from where it is now
      if (outcome.kind === 'moved') return 0;
      this.counts.processed += records.length;
      this.counts.batches += 1;
      this.rate.add(records.length);
      this.throughput.add(records.length);
      for (const record of records) if (record.appendedMs !== null) this.latency.add(Math.max(0, outcome.processedMs - record.appendedMs));
      return records.length;
    } finally {
      this.inFlight = 0;
    }
  }

  private async simulateWork(records: number): Promise<void> {
    const ms = Math.min(this.workMs * records, MAX_WORK_SLEEP_MS);
    if (ms <= 0) return;
    const abort = new AbortController();
    this.workAbort = abort;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        abort.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(new Error('drain deadline passed: in-flight batch abandoned and rolled back'));
        });
      });
    } finally {
      this.workAbort = null;
    }
  }

  /**
   * Mirrors the committed offsets that changed to the source (a Kafka topic: group
   * scalegate-<workload>, so lag tools see this consumer), in the background: a broker that does
   * not answer must not hold the batches up, and a failed mirror only leaves lag tools behind, never
   * the sink or the offsets in PostgreSQL (where reading resumes).
   */
  private mirrorOffsetsIfDue(): void {
    if (this.mirroring || Date.now() - this.lastMirrorAt < OFFSET_MIRROR_INTERVAL_MS) return;
    this.lastMirrorAt = Date.now();
    const changed = new Map([...this.owned].filter(([p, o]) => o.committed >= 0 && this.mirrored.get(p) !== o.committed).map(([p, o]) => [p, o.committed]));
    if (changed.size === 0) return;
    this.mirroring = true;
    this.source.mirrorProcessed(`scalegate-${this.workload}`, changed).then(
      () => {
        for (const [p, committed] of changed) this.mirrored.set(p, committed);
      },
      (error: unknown) => this.ctx.log('consumer.offset-mirror-failed', { taskId: this.taskId, workload: this.workload, error: messageOf(error) }),
    ).finally(() => {
      this.mirroring = false;
    });
  }

  /**
   * Reads each owned partition's newest source offset (one cheap call for all): it refreshes the
   * backlog and tells which partitions are worth a batch transaction, so an idle consumer polls
   * without a locking transaction per partition.
   */
  private async partitionsWithNewRecords(): Promise<number[]> {
    if (this.owned.size === 0) return [];
    const newest = await this.source.newestOffsets([...this.owned.keys()]);
    const withWork: number[] = [];
    for (const [partition, offset] of [...newest].sort(([a], [b]) => a - b)) {
      const owned = this.owned.get(partition);
      if (!owned) continue;
      owned.maxOffset = offset;
      if (owned.maxOffset > owned.committed) withWork.push(partition);
    }
    return withWork;
  }

  // ---- update / drain ------------------------------------------------------------------------

  async update(start: TaskStart): Promise<void> {
    if (this.phase !== 'running') throw new DriverError('task-draining', `task ${this.taskId} is ${this.phase}; start a new one instead`);
    const { spec, partitions } = parseStart(start);
    if (JSON.stringify(spec.source) !== JSON.stringify(this.spec.source) || spec.sink !== this.spec.sink || spec.partitions !== this.spec.partitions) {
      throw new DriverError('restart-required', `task ${this.taskId}: a changed source, sink or partition count needs a restart, not an update`);
    }
    this.spec = spec;
    this.workMs = spec.workMs;
    this.generation = start.generation;
    this.fence = Math.max(this.fence, start.placementFence); // a raised fence re-fences owned partitions
    this.desired = new Set(partitions);
    this.holdings.retryNow();
    this.wake();
    // Resolve once unassigned partitions are released (so the caller may hand them on);
    // acquisitions proceed in the background and show as 'starting' until complete.
    const released = await this.waitUntil(() => [...this.owned.keys()].every((p) => this.desired.has(p)), UPDATE_RELEASE_TIMEOUT_MS);
    if (!released) {
      throw new DriverError('release-timeout', `task ${this.taskId} did not release partitions within ${UPDATE_RELEASE_TIMEOUT_MS} ms: ${this.lastError ?? 'no error seen'}`);
    }
  }

  drain(options: DrainOptions): Promise<DrainReceipt> {
    const deadlineAt = Date.now() + (options.drainTimeoutMs ?? options.graceMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    if (!this.drainCompletion) {
      this.drainStartedAt = Date.now();
      this.phase = this.phase === 'stopped' ? 'stopped' : 'draining';
      this.wake();
      this.drainCompletion = this.completeDrain();
    }
    const completion = this.drainCompletion;
    return new Promise<DrainReceipt>((resolve, reject) => {
      const timer = setTimeout(() => {
        const inFlight = this.inFlight;
        this.workAbort?.abort();
        reject(
          new DriverError(
            'drain-deadline',
            `task ${this.taskId}: drain deadline passed with ${inFlight} records in flight; that batch is rolled back, not committed, ` +
              `and owned partitions are released as soon as it ends`,
          ),
        );
      }, Math.max(0, deadlineAt - Date.now()));
      completion.then(
        (receipt) => {
          clearTimeout(timer);
          resolve(receipt);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /** Waits for the loop to finish its in-flight batch, then releases every owned partition (retrying until it can). */
  private async completeDrain(): Promise<DrainReceipt> {
    await this.loopDone;
    if (this.options.drainSkipsCommit) {
      this.ctx.log('consumer.test-break', { taskId: this.taskId, break: 'drain-skips-commit' });
      // its last batch of each partition (waiting briefly for one under load) reaches the sink; its offset does not
      const until = Date.now() + 2_000;
      for (const p of this.owned.keys()) {
        while ((await this.processBatch(p, false).catch(() => 0)) === 0 && Date.now() < until) await sleep(this.options.pollMs);
      }
    }
    const committedOffsets: Record<string, number> = {};
    const releasedPartitions: number[] = [];
    for (const p of [...this.owned.keys()].sort((a, b) => a - b)) {
      for (let attempt = 0; ; attempt++) {
        try {
          const committed = await this.holdings.release(p, this.fence);
          if (committed !== null) {
            committedOffsets[p] = committed;
            releasedPartitions.push(p);
          }
          this.owned.delete(p);
          break;
        } catch (error) {
          this.noteError('consumer.release-error', error);
          await sleep(exponentialDelayMs(attempt, this.options.pollMs, MAX_ERROR_BACKOFF_MS));
        }
      }
    }
    this.phase = 'stopped';
    await this.source.close().catch(() => {});
    this.notifyProgress();
    this.onStopped(this);
    const receipt: DrainReceipt = {
      taskId: this.taskId,
      incarnation: this.incarnation,
      inFlight: this.inFlight,
      committedOffsets,
      releasedPartitions,
      durationMs: Date.now() - this.drainStartedAt,
    };
    this.ctx.log('consumer.drained', { ...receipt });
    return receipt;
  }
}

