// bench/stream: `npm run bench:stream` (tsx bench/stream.ts [records]) prints one JSON object.
//
// On a real stack (Temporal dev server, PostgreSQL, API, worker, 3 agent processes with 8 slots):
// 1. end to end: the stream job of issue 14 (source 2 → keyed-aggregate 2 → sink 1, 4 partitions,
//    checkpoints every 1 s) against the consumer driver (2 replicas, workMs 0, same 4 partitions) on
//    the same records (N, default 200,000, keys key-0..999, written into the source table in one
//    statement before the workload is defined, as the data contract lets any producer). Timed from the workload's tasks all ready until its sink holds all N:
//    for the stream job, a completed checkpoint covering all N (what its sink commits), for the
//    consumer, N sink rows. Records/s for each and their ratio (the consumer is the reference).
// 2. checkpoint overhead: the same stream job on 5 N records with checkpoints every 1 s against every 60 s,
//    timed from ready until the aggregates took in all N (their recordsIn, from the agents): with
//    60 s no checkpoint completes in time, so the sink cannot be the measure. The ratio of the two
//    rates is what checkpointing costs the dataflow.
// Every run is audited for exactly-once at its end; a run that is not exact fails the bench.
import os from 'node:os';
import { auditStreamCheckpoint, auditStreamSink, verifyExactlyOnce } from '../store/sink-audit';
import { quoteIdentifier, sourceTableDdl } from '../protocol/consumer-tables';
import { partitionForKey } from '../store/source-feed';
import { startStack, type Stack } from '../test/support/stack';
import { startSharedServers } from '../test/support/shared-servers';
import { tasksOf } from '../test/support/workloads';

const PARTITIONS = 4;
const KEYS = 1000;
const STREAM_CONTRACT = { ownership: 'partitioned', partitions: PARTITIONS, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint' };
const CONSUMER_CONTRACT = { ownership: 'partitioned', partitions: PARTITIONS, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign' };

const streamJob = (table: string, checkpointIntervalMs: number) => ({
  kind: 'stream', contract: STREAM_CONTRACT,
  spec: {
    source: `${table}_in`, sink: `${table}_out`, partitions: PARTITIONS, checkpointIntervalMs, maxParallelism: 128,
    operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
  },
});

/**
 * N records into a source table in one statement, as any producer may under the data contract:
 * keys key-0..999 in turn, each in its load-generator partition (partitionForKey), offsets 0.. per partition.
 */
async function preload(stack: Stack, source: string, records: number): Promise<void> {
  await stack.db.query(sourceTableDdl(source));
  const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
  const { rowCount } = await stack.db.query(
    `insert into ${quoteIdentifier(source)} (partition, "offset", key)
     select k.partition, row_number() over (partition by k.partition order by n.i, k.key) - 1, k.key
       from unnest($1::text[], $2::int[]) as k(key, partition)
       cross join generate_series(1, $3) as n(i)`,
    [keys, keys.map((key) => partitionForKey(key, PARTITIONS)), records / KEYS],
  );
  if (rowCount !== records) throw new Error(`${source}: loaded ${rowCount} of ${records}`);
}

/** Loads N records, defines the workload, and answers the moment all its tasks are ready. */
async function prepare(stack: Stack, name: string, source: string, definition: unknown, tasks: number, records: number): Promise<number> {
  await preload(stack, source, records);
  const put = await stack.api('PUT', `/v1/workloads/${name}`, { body: definition });
  if (put.status >= 300) throw new Error(`PUT ${name}: ${put.status} ${JSON.stringify(put.body)}`);
  await stack.waitFor(`${tasks} ready tasks of ${name}`, async () => (await tasksOf(stack, name)).filter((t) => t.state === 'ready').length === tasks, { timeoutMs: 120_000, intervalMs: 20 });
  return Date.now();
}

async function retire(stack: Stack, name: string): Promise<void> {
  const retired = await stack.api('DELETE', `/v1/workloads/${name}`);
  await stack.temporal.workflow.getHandle(retired.body.workflowId, retired.body.runId).result();
}

const rate = (records: number, ms: number) => Math.round((records * 1000) / ms);

async function main() {
  const records = Number(process.argv[2] ?? 200_000);
  // Checkpoint overhead needs runs of several seconds: several checkpoints must complete during them.
  const overheadRecords = records * 5;
  if (records % KEYS !== 0) throw new Error(`records must be a multiple of ${KEYS}`);
  const servers = await startSharedServers({ prefix: 'scalegate-bench-stream' });
  const stack = await startStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `bench-${zone}`, labels: { zone }, slots: 8 })) });
  try {
    // 1. end to end: the stream job against the consumer driver on the same records
    const streamReady = await prepare(stack, 'bench-stream', 'bench_stream_in', streamJob('bench_stream', 1_000), 5, records);
    await stack.waitFor('the stream sink holds every record', async () => {
      const audit = await auditStreamCheckpoint(stack.db, { job: 'bench-stream', source: 'bench_stream_in', sink: 'bench_stream_out' });
      return audit.coveredSourceRows === records && audit.sinkTotal === records;
    }, { timeoutMs: 300_000, intervalMs: 20 });
    const streamMs = Date.now() - streamReady;
    const streamAudit = await auditStreamSink(stack.db, { source: 'bench_stream_in', sink: 'bench_stream_out' });
    await retire(stack, 'bench-stream');

    const consumerReady = await prepare(stack, 'bench-consumer', 'bench_consumer_in', {
      kind: 'consumer', replicas: 2, contract: CONSUMER_CONTRACT, spec: { partitions: PARTITIONS, source: 'bench_consumer_in', sink: 'bench_consumer_out', workMs: 0 },
    }, 2, records);
    await stack.waitFor('the consumer sink holds every record', async () =>
      (await stack.db.query<{ n: number }>('select count(*)::int as n from bench_consumer_out')).rows[0].n === records, { timeoutMs: 300_000, intervalMs: 20 });
    const consumerMs = Date.now() - consumerReady;
    const consumerAudit = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'bench_consumer_in', sink: 'bench_consumer_out' });
    await retire(stack, 'bench-consumer');

    // 2. checkpoint overhead: every 1 s against every 60 s, records through the aggregates
    const throughAggregates = async (name: string, table: string, intervalMs: number) => {
      const ready = await prepare(stack, name, `${table}_in`, streamJob(table, intervalMs), 5, overheadRecords);
      await stack.waitFor(`${name}: the aggregates took in every record`, async () => {
        const aggregates = (await tasksOf(stack, name)).filter((t) => t.counts.subtask === 2 || t.counts.subtask === 3);
        return aggregates.reduce((n, t) => n + t.counts.recordsIn, 0) === overheadRecords;
      }, { timeoutMs: 300_000, intervalMs: 20 });
      const ms = Date.now() - ready;
      const checkpoints = (await stack.db.query<{ n: number }>(
        `select count(*)::int as n from scalegate_stream_checkpoints where job = $1 and state = 'completed'`, [name])).rows[0].n;
      // With 1 s the job checkpoints; wait for one to cover everything and audit it.
      let exact: boolean | null = null;
      if (intervalMs <= 1_000) {
        await stack.waitFor(`${name}: a checkpoint covering every record`, async () =>
          (await auditStreamCheckpoint(stack.db, { job: name, source: `${table}_in`, sink: `${table}_out` })).coveredSourceRows === overheadRecords, 120_000);
        exact = (await auditStreamSink(stack.db, { source: `${table}_in`, sink: `${table}_out` })).exact;
      }
      await retire(stack, name);
      return { ms, checkpoints, exact };
    };
    const every1s = await throughAggregates('bench-cp-1s', 'bench_cp_1s', 1_000);
    const every60s = await throughAggregates('bench-cp-60s', 'bench_cp_60s', 60_000);

    const exactly = streamAudit.exact && consumerAudit.missing === 0 && consumerAudit.duplicates === 0 && every1s.exact === true;
    const result = {
      bench: 'stream', node: process.version, cpus: os.cpus().length, records, partitions: PARTITIONS, keys: KEYS,
      endToEnd: {
        stream: { what: 'source 2 → keyed-aggregate 2 → sink 1, checkpoints every 1 s: ready → a completed checkpoint covers all', ms: streamMs, recordsPerSec: rate(records, streamMs), exactlyOnce: streamAudit.exact },
        consumer: { what: 'consumer driver, 2 replicas, workMs 0 (the reference): ready → every sink row', ms: consumerMs, recordsPerSec: rate(records, consumerMs), exactlyOnce: consumerAudit.missing === 0 && consumerAudit.duplicates === 0 },
        ratioStreamToConsumer: +(consumerMs / streamMs).toFixed(2),
      },
      checkpointOverhead: {
        records: overheadRecords,
        every1s: { ms: every1s.ms, recordsPerSec: rate(overheadRecords, every1s.ms), checkpointsCompleted: every1s.checkpoints, exactlyOnce: every1s.exact },
        every60s: { ms: every60s.ms, recordsPerSec: rate(overheadRecords, every60s.ms), checkpointsCompleted: every60s.checkpoints },
        ratio1sTo60s: +(every60s.ms / every1s.ms).toFixed(2),
      },
      note: 'records/s from all tasks ready until done; the stream job counts as done when its sink commits a checkpoint covering every record (so up to one checkpoint interval is in its time), the consumer when its sink has every row; checkpoint overhead counts records through the aggregates (records/s with checkpoints every 1 s ÷ every 60 s: 1.0 = no cost)',
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (!exactly) process.exitCode = 1;
  } finally {
    await stack.stop();
    await servers.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
