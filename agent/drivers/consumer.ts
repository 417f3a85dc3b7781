// The consumer driver (DESIGN.md §5): a partitioned consumer of a source (a PostgreSQL table or a
// Kafka topic, behind the source port of sources/) into a PostgreSQL sink table. A replica
// (consumer-task.ts) owns the partitions in its start, fenced by the placement fence
// (consumer-holdings.ts); each batch locks the partition's offsets row, writes sink rows and
// advances the offset in ONE transaction (consumer-batch.ts), so a record is in the sink exactly
// once whoever processes it, and only the current owner can commit. The tables are plain SQL
// (consumer-schema.ts) so anyone can feed and audit them. This file: the driver (start, probe, close).
import { Pool } from 'pg';
import { ConsumerSpecSchema, describeIssues, sourceTableOf } from '../../protocol';
import { createPool } from '../../lib/pg';
import { ConsumerTask, MAX_WORK_SLEEP_MS, parseStart, type ConsumerDriverOptions } from './consumer-task';
import { ensureConsumerTables } from './consumer-schema';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from './driver';
import { openSource, probeSourceAndSink } from './sources';
import { messageOf } from '../../lib/errors';

export { MAX_WORK_SLEEP_MS, type ConsumerDriverOptions, type ConsumerTaskStatus } from './consumer-task';

const POOL_SIZE = 4; // one connection per task at a time suffices; several tasks may share a driver

/** The consumer driver. One small pool per driver (per agent), created on first use. */
export function createConsumerDriver(ctx: DriverContext, options: ConsumerDriverOptions = {}): TaskDriver {
  const resolved: Required<ConsumerDriverOptions> = {
    pollMs: options.pollMs ?? 50,
    batchSize: options.batchSize ?? 100,
    drainSkipsCommit: options.drainSkipsCommit ?? false,
    ownerFenceUnchecked: options.ownerFenceUnchecked ?? false,
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
