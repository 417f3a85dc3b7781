// The consumer driver (DESIGN.md §5): a partitioned consumer of a source (a PostgreSQL table or a
// Kafka topic, behind the source port of sources/source.ts) into a PostgreSQL sink table. A replica
// owns the partitions in its start, fenced by the placement fence; each batch locks the partition's
// offsets row, reads past the committed offset, writes sink rows and advances the offset in ONE
// transaction, so a record is in the sink exactly once whoever processes it, and only the current
// owner can commit. The tables are plain SQL (consumer-schema.ts) so anyone can feed and audit them.
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { ConsumerSpecSchema, describeIssues, sourceTableOf, type ConsumerSpec, type DrainOptions } from '../../protocol';
import { createPool } from '../../lib/pg';
import { partitionOwnership, type AcquireOutcome, type PartitionOwnership } from './consumer-ownership';
import { OFFSETS_TABLE, ensureConsumerTables, quoteIdentifier } from './consumer-schema';
import type {
  DrainReceipt,
  DriverContext,
  TaskDriver,
  TaskHandle,
  TaskStart,
  TaskStatus,
} from './driver';
import { DriverError } from './driver';
import { ErrorCount } from './error-count';
import { openSource, probeSourceAndSink, type SourcePort } from './sources';

export interface ConsumerDriverOptions {
  /** idle wait between polls when there is nothing to do (default 50 ms) */
  pollMs?: number;
  /** records per batch transaction (default 100) */
  batchSize?: number;
  /** the broken build of SCALEGATE_TEST_BREAK=drain-skips-commit (agent/config.ts): tests only */
  drainSkipsCommit?: boolean;
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

const POOL_SIZE = 4; // one connection per task at a time suffices; several tasks may share a driver
/**
 * Simulated work per batch is capped so a huge workMs cannot wedge a drain: a drain with the default
 * deadline (30 s) always outlasts one batch. Long enough that a test can hold a batch in flight
 * while a drain travels through the control plane (the drain-deadline tests).
 */
export const MAX_WORK_SLEEP_MS = 10_000;
const LATENCY_RESERVOIR_SIZE = 1_000;
const RATE_WINDOW_MS = 5_000;
const ACQUIRE_RETRY_MS = 100;
/**
 * A partition held under a NEWER fence than this task's means this task's placement is superseded
 * (e.g. recovery moved the work while this agent was unreachable): it can commit nothing there, and
 * asks again only with a growing pause, up to this, until the holder lets go, an update raises its
 * fence, or the control plane revokes the task.
 */
const FENCED_OUT_RETRY_MAX_MS = 2_000;
const FAILED_AFTER_CONSECUTIVE_ERRORS = 5;
/** How long a batch transaction may idle beyond its own simulated work before the server ends the session. */
const BATCH_IDLE_MARGIN_MS = 3_000;
const MAX_ERROR_BACKOFF_MS = 2_000;
const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
const UPDATE_RELEASE_TIMEOUT_MS = 30_000;

interface OwnedPartition {
  fence: number;
  committed: number;
  /** highest offset in the source at the last backlog refresh; null until the first one */
  maxOffset: number | null;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
const percentile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

/** Parses a consumer start's spec and partitions, or throws DriverError('invalid-spec'). */
function parseStart(start: TaskStart): { spec: ConsumerSpec; partitions: number[] } {
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

class ConsumerTask implements TaskHandle {
  readonly taskId: string;
  readonly incarnation = randomUUID();
  private readonly workload: string;
  private readonly sink: string;
  private spec: ConsumerSpec;
  private workMs: number;
  private generation: number;
  private fence: number;

  private desired: Set<number>;
  private readonly ownership: PartitionOwnership;
  private readonly owned = new Map<number, OwnedPartition>();
  /** partition → who holds it, for partitions we are waiting to acquire */
  private readonly waitingOn = new Map<number, string>();
  private readonly nextAcquireAttemptAt = new Map<number, number>();
  /** partition → refused acquisitions in a row by a holder with a newer fence (fenced out) */
  private readonly fencedOut = new Map<number, number>();

  private phase: 'running' | 'draining' | 'stopped' = 'running';
  private loopDone: Promise<void> = Promise.resolve();
  private drainCompletion: Promise<DrainReceipt> | null = null;
  private drainStartedAt = 0;
  private wakeIdle: (() => void) | null = null;
  private progressWaiters: Array<() => void> = [];
  /** aborts the simulated work of the in-flight batch (drain deadline), which rolls the batch back */
  private workAbort: AbortController | null = null;

  private readonly startedAt = Date.now();
  private inFlight = 0;
  private readonly errors: ErrorCount;
  private consecutiveErrors = 0;
  private lastError: string | null = null;
  private readonly counts = { processed: 0, batches: 0, acquired: 0, released: 0, ownershipLost: 0, acquireDenied: 0 };
  private readonly latencies: number[] = [];
  private latencyCursor = 0;
  private readonly commitsForRate: Array<{ at: number; records: number }> = [];

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
    this.ownership = partitionOwnership(pool, { workload: this.workload, taskId: this.taskId, incarnation: this.incarnation });
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
    const rate = this.rate();
    const sorted = [...this.latencies].sort((a, b) => a - b);
    return {
      taskId: this.taskId,
      workload: this.workload,
      incarnation: this.incarnation,
      state: this.state(pendingPartitions),
      counts: { ...this.counts, inFlight: this.inFlight, ratePerSec: rate },
      ...(sorted.length > 0 ? { latencyMs: { p50: percentile(sorted, 0.5), p95: percentile(sorted, 0.95) } } : {}),
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
    return [...this.desired].filter((p) => this.owned.get(p)?.fence !== this.fence).sort((a, b) => a - b);
  }

  private describe(partitionBacklog: Record<string, number>, pending: number[]): string {
    const parts = [
      `owns [${Object.keys(partitionBacklog).join(',')}] at fence ${this.fence}`,
      `backlog ${Object.entries(partitionBacklog).map(([p, n]) => `p${p}=${n}`).join(' ') || 'none'}`,
    ];
    if (pending.length > 0) {
      parts.push(`waiting for ${pending.map((p) => `p${p}${this.waitingOn.has(p) ? ` (held by ${this.waitingOn.get(p)}${this.fencedOut.has(p) ? `, newer than this task's fence ${this.fence}: fenced out, nothing is committed there` : ''})` : ''}`).join(', ')}`);
    }
    if (this.consecutiveErrors > 0) parts.push(`${this.consecutiveErrors} consecutive errors, last: ${this.lastError}; retrying`);
    return parts.join('; ');
  }

  private rate(): number {
    const now = Date.now();
    while (this.commitsForRate.length > 0 && this.commitsForRate[0].at < now - RATE_WINDOW_MS) this.commitsForRate.shift();
    const records = this.commitsForRate.reduce((sum, c) => sum + c.records, 0);
    // A young task divides by its age (at least 1 s) rather than the full window.
    const windowMs = Math.min(RATE_WINDOW_MS, Math.max(1_000, now - this.startedAt));
    return Math.round((records / windowMs) * 1000 * 10) / 10;
  }

  private recordLatency(ms: number): void {
    if (this.latencies.length < LATENCY_RESERVOIR_SIZE) this.latencies.push(ms);
    else this.latencies[this.latencyCursor] = ms;
    this.latencyCursor = (this.latencyCursor + 1) % LATENCY_RESERVOIR_SIZE;
  }

  // ---- the processing loop -------------------------------------------------------------------

  private async run(): Promise<void> {
    while (this.phase === 'running') {
      try {
        await this.reconcileOwnership();
        let processed = 0;
        for (const p of await this.partitionsWithNewRecords()) {
          if (this.phase !== 'running') break; // draining: stop fetching
          if (!this.desired.has(p)) continue; // being released: never start another batch on it
          processed += await this.processBatch(p);
        }
        this.consecutiveErrors = 0;
        this.notifyProgress();
        if (processed === 0) await this.idle(this.options.pollMs);
      } catch (error) {
        this.noteError('consumer.loop-error', error);
        this.notifyProgress();
        await this.idle(Math.min(MAX_ERROR_BACKOFF_MS, this.options.pollMs * 2 ** this.consecutiveErrors));
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

  /** Between batches (nothing in flight): release what is no longer assigned, acquire (or re-fence) what is. */
  private async reconcileOwnership(): Promise<void> {
    for (const p of [...this.owned.keys()]) {
      if (!this.desired.has(p)) {
        await this.release(p);
        this.owned.delete(p);
      }
    }
    const now = Date.now();
    for (const p of [...this.desired].sort((a, b) => a - b)) {
      const owned = this.owned.get(p);
      if (owned && owned.fence === this.fence) continue;
      if ((this.nextAcquireAttemptAt.get(p) ?? 0) > now) continue;
      const fence = this.fence;
      const outcome = await this.acquire(p, fence);
      if (outcome.granted) {
        this.owned.set(p, { fence, committed: outcome.committed, maxOffset: owned?.maxOffset ?? null });
        this.waitingOn.delete(p);
        this.nextAcquireAttemptAt.delete(p);
        this.fencedOut.delete(p);
      } else {
        // Held by another task at a fence ≥ ours: it is being drained/released, or we are stale. Poll.
        if (owned) this.loseOwnership(p, `held by ${outcome.holder} at fence ${outcome.holderFence}`);
        this.counts.acquireDenied += 1;
        this.waitingOn.set(p, `${outcome.holder} at fence ${outcome.holderFence}`);
        let retryMs = Math.max(ACQUIRE_RETRY_MS, this.options.pollMs);
        if (outcome.holderFence > fence) {
          // Superseded, not a handover in progress: back off, and say so once.
          const refusals = (this.fencedOut.get(p) ?? 0) + 1;
          this.fencedOut.set(p, refusals);
          if (refusals === 1) {
            this.ctx.log('consumer.fenced-out', { taskId: this.taskId, workload: this.workload, partition: p, fence, holder: outcome.holder, holderFence: outcome.holderFence });
          }
          retryMs = Math.min(FENCED_OUT_RETRY_MAX_MS, Math.max(retryMs, ACQUIRE_RETRY_MS * 2 ** Math.min(refusals, 10)));
        } else {
          this.fencedOut.delete(p);
        }
        this.nextAcquireAttemptAt.set(p, now + retryMs);
      }
    }
  }

  private async acquire(partition: number, fence: number): Promise<AcquireOutcome> {
    const outcome = await this.ownership.acquire(partition, fence);
    if (outcome.granted) {
      this.counts.acquired += 1;
      this.ctx.log('consumer.acquired', { taskId: this.taskId, workload: this.workload, partition, fence, from: outcome.from });
    }
    return outcome;
  }

  /** Clears our ownership of a partition; returns its committed offset, or null if we no longer held it. */
  private async release(partition: number): Promise<number | null> {
    const committed = await this.ownership.release(partition, this.owned.get(partition)?.fence ?? this.fence);
    if (committed !== null) this.counts.released += 1;
    await this.source.forget(partition).catch(() => {});
    this.ctx.log('consumer.released', { taskId: this.taskId, workload: this.workload, partition, committed });
    return committed;
  }

  private loseOwnership(partition: number, why: string): void {
    this.owned.delete(partition);
    this.counts.ownershipLost += 1;
    this.ctx.log('consumer.ownership-lost', { taskId: this.taskId, workload: this.workload, partition, why });
  }

  /** One exactly-once batch on one partition; returns how many records it committed. */
  private async processBatch(partition: number, commitOffset = true): Promise<number> {
    const owned = this.owned.get(partition);
    if (!owned) return 0;
    // Read before the batch transaction: a remote source (a Kafka reader reopening on a loaded
    // machine) can take seconds, and the offsets row lock must not idle that long: the server
    // would end the session mid-batch. The lock below proves the read started at the committed offset.
    const readFrom = owned.committed;
    const records = await this.source.readAfter(partition, readFrom, this.options.batchSize);
    if (records.length === 0) return 0;
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // The server ending this session while no query is in flight reaches the client as an event:
    // without a listener it would be an uncaught exception of the agent.
    const onClientError = (error: Error) => { broken = error; };
    client.on('error', onClientError);
    try {
      await client.query('begin');
      // A frozen agent (SIGSTOP) holding this row lock would keep a new owner waiting: the server
      // ends the session once it idles in this transaction longer than the batch's work plus a margin.
      await client.query(`set local idle_in_transaction_session_timeout = ${Math.ceil(Math.min(this.workMs * this.options.batchSize, MAX_WORK_SLEEP_MS)) + BATCH_IDLE_MARGIN_MS}`);
      // The row lock serialises us with any takeover: we write only while we demonstrably still
      // own the partition, and nobody can take it until we commit or roll back.
      const ownership = await client.query<{ committed_offset: string }>(
        `select committed_offset from ${OFFSETS_TABLE}
          where workload = $1 and partition = $2 and owner_task = $3 and owner_fence = $4
          for update`,
        [this.workload, partition, this.taskId, owned.fence],
      );
      if (ownership.rowCount === 0) {
        await client.query('rollback');
        this.loseOwnership(partition, 'offsets row no longer names this task and fence');
        return 0;
      }
      const committed = Number(ownership.rows[0].committed_offset);
      owned.committed = committed;
      if (committed !== readFrom) {
        // the offset moved since the read: the next pass reads from where it is now
        await client.query('rollback');
        return 0;
      }
      this.inFlight = records.length;
      await this.simulateWork(records.length);
      // No "on conflict": a duplicate sink row must fail the batch loudly, never be hidden.
      const inserted = await client.query<{ processed_ms: number; inserted: number }>(
        `with inserted as (
           insert into ${this.sink} (partition, "offset", key, payload, task_id, incarnation, processed_at)
           select $1::int, u.record_offset, u.record_key, u.record_payload::jsonb, $5::text, $6::text, statement_timestamp()
             from unnest($2::bigint[], $3::text[], $4::text[]) as u(record_offset, record_key, record_payload)
           returning processed_at)
         select extract(epoch from max(processed_at))::float8 * 1000 as processed_ms, count(*)::int as inserted from inserted`,
        [partition, records.map((r) => r.offset), records.map((r) => r.key), records.map((r) => r.payload), this.taskId, this.incarnation],
      );
      const lastOffset = records[records.length - 1].offset;
      if (commitOffset) {
        await client.query(`update ${OFFSETS_TABLE} set committed_offset = $3 where workload = $1 and partition = $2`, [
          this.workload,
          partition,
          lastOffset,
        ]);
      }
      await client.query('commit');

      if (commitOffset) owned.committed = lastOffset;
      this.counts.processed += records.length;
      this.counts.batches += 1;
      this.commitsForRate.push({ at: Date.now(), records: records.length });
      const processedMs = inserted.rows[0].processed_ms;
      for (const record of records) if (record.appendedMs !== null) this.recordLatency(Math.max(0, processedMs - record.appendedMs));
      return records.length;
    } catch (error) {
      await client.query('rollback').catch((rollbackError: Error) => {
        broken = rollbackError;
      });
      throw error;
    } finally {
      this.inFlight = 0;
      client.off('error', onClientError);
      client.release(broken);
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
    this.nextAcquireAttemptAt.clear();
    this.fencedOut.clear();
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
          const committed = await this.release(p);
          if (committed !== null) {
            committedOffsets[p] = committed;
            releasedPartitions.push(p);
          }
          this.owned.delete(p);
          break;
        } catch (error) {
          this.noteError('consumer.release-error', error);
          await sleep(Math.min(MAX_ERROR_BACKOFF_MS, this.options.pollMs * 2 ** attempt));
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

/** The consumer driver. One small pool per driver (per agent), created on first use. */
export function createConsumerDriver(ctx: DriverContext, options: ConsumerDriverOptions = {}): TaskDriver {
  const resolved: Required<ConsumerDriverOptions> = {
    pollMs: options.pollMs ?? 50,
    batchSize: options.batchSize ?? 100,
    drainSkipsCommit: options.drainSkipsCommit ?? false,
  };
  const tasks = new Set<ConsumerTask>();
  let pool: Pool | null = null;

  function databaseUrl(): string {
    if (!ctx.databaseUrl) {
      throw new DriverError('placement-unavailable', `runtime ${ctx.runtimeId} has no database URL; the consumer driver needs PostgreSQL`);
    }
    return ctx.databaseUrl;
  }

  function sharedPool(): Pool {
    if (!pool) {
      // A frozen agent (SIGSTOP) must not hold an offsets row lock forever: its session ends after
      // the longest batch (MAX_WORK_SLEEP_MS) plus a margin, and a new owner takes the partition over.
      pool = createPool(databaseUrl(), { max: POOL_SIZE, connectTimeoutMs: 5_000, idleInTransactionTimeoutMs: MAX_WORK_SLEEP_MS + 5_000 });
      pool.on('error', () => {}); // an idle client losing its server must not crash the agent
    }
    return pool;
  }

  return {
    kind: 'consumer',

    async start(start: TaskStart): Promise<TaskHandle> {
      const { spec, partitions } = parseStart(start);
      const db = sharedPool();
      let task: ConsumerTask | null = null;
      // a Kafka reader's crash (the broker away): counted and shown in the task's detail; the reader retries
      const source = openSource(spec, { ctx, pool: db, owner: `${start.workload}-${start.taskId}`, who: `consumer ${start.taskId}`, onError: (error) => task?.noteSourceError(error) });
      try {
        // The source table (when the source is one), the sink and the bookkeeping, in one DDL pass.
        await ensureConsumerTables(db, sourceTableOf(spec), spec.sink);
        await source.prepare();
      } catch (error) {
        await source.close().catch(() => {});
        if (error instanceof DriverError) throw error;
        throw new DriverError(
          typeof spec.source === 'string' ? 'source-unreachable' : 'broker-unavailable',
          `consumer ${start.taskId}: cannot prepare ${source.description} and sink table ${spec.sink}: ${messageOf(error)}`,
        );
      }
      task = new ConsumerTask(db, ctx, resolved, start, spec, partitions, source, (stopped) => tasks.delete(stopped));
      tasks.add(task);
      task.begin();
      ctx.log('consumer.started', { taskId: task.taskId, incarnation: task.incarnation, partitions, fence: start.placementFence });
      return task;
    },

    async probe(spec: unknown) {
      const parsed = ConsumerSpecSchema.safeParse(spec);
      return probeSourceAndSink(ctx, parsed.success ? parsed.data : { invalid: `invalid consumer spec: ${describeIssues(parsed.error)}` });
    },

    async close(): Promise<void> {
      await Promise.all([...tasks].map((task) => task.drain({ drainTimeoutMs: 10_000 }).catch(() => null)));
      tasks.clear();
      const closing = pool;
      pool = null;
      await closing?.end().catch(() => {});
    },
  };
}
