// bench/kafka: `npm run bench:kafka` (tsx bench/kafka.ts [N]) prints one JSON object.
//
// The consumer driver (agent/drivers/consumer.ts) against a real Kafka broker and PostgreSQL (their
// own, started here), nothing mocked:
// 1. throughput: N (default 20,000) records, the same keys and partitions (store/source-feed.ts's
//    mapping), written before the task starts into a 4-partition topic and into a source table;
//    one task owning all 4 partitions; timed from its start until its sink holds all N. Records/s
//    for each and their ratio (the table is the reference); 3 runs each, alternating which goes
//    first, medians compared.
// 2. hand-over on Kafka under load (1,000 records/s): replicas A (partitions 0-1) and B (2-3); B
//    drains and A takes 2-3 over. Reported: the time from the drain request until A committed a
//    record of every moved partition, and the pause of the partitions that did not move (the
//    largest gap between two commits of partitions 0-1 around the hand-over) against the largest
//    gap in the same partitions during the steady seconds before it (the reference).
// Every run is audited against the acknowledged records; a run that is not exact fails the bench.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { createConsumerDriver, type ConsumerTaskStatus } from '../agent/drivers/consumer';
import type { DrainReceipt, TaskDriver, TaskHandle, TaskStart } from '../agent/drivers/driver';
import { runKafkaLoad } from '../store/kafka-feed';
import { verifyAgainstAcked, verifyExactlyOnce } from '../store/sink-audit';
import { runLoad } from '../store/source-feed';
import { createTestDatabase } from '../harness/database';
import { startSharedServers } from '../harness/shared-servers';
import { waitFor } from '../harness/wait-for';
import { setTimeout as sleep } from 'node:timers/promises';

const PARTITIONS = 4;
const N = Number(process.argv[2] ?? 20_000);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const rate = (records: number, ms: number) => Math.round((records * 1000) / ms);

async function main(): Promise<void> {
  const servers = await startSharedServers({ prefix: 'scalegate-bench-kafka', kafka: true });
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-bench-kafka-'));
  const drivers: TaskDriver[] = [];
  let pool: Pool | null = null;
  try {
    if (!servers.kafka) throw new Error('no Kafka broker could run here (it needs Java 17 and mvn)');
    const brokers = servers.kafka.brokers;
    const { databaseUrl } = await createTestDatabase('bk');
    const db = new Pool({ connectionString: databaseUrl, max: 2 });
    db.on('error', () => {}); // an idle client losing its server at the end must not crash the bench
    pool = db;
    const driver = (id: string) => {
      const created = createConsumerDriver({ runtimeId: id, stateDir: path.join(tmpDir, id), databaseUrl, kafkaBrokers: brokers, log: () => {} }, { pollMs: 20, batchSize: 500 });
      drivers.push(created);
      return created;
    };
    const startOf = (workload: string, source: TaskStart['spec'], taskId: string, partitions: number[], index = 0): TaskStart => ({
      taskId, workload, kind: 'consumer', index, generation: 1, placementFence: 1, partitions,
      spec: { partitions: PARTITIONS, source, sink: `${workload.replace(/-/g, '_')}_out`, workMs: 0 },
    });
    const sinkCount = async (sink: string) => (await db.query<{ n: number }>(`select count(*)::int as n from ${sink}`)).rows[0].n;
    const all = [...Array(PARTITIONS).keys()];

    // 1. throughput, Kafka against the table on the same records
    const runs: Record<'kafka' | 'table', number[]> = { kafka: [], table: [] };
    for (let run = 0; run < 3; run++) {
      for (const kind of (run % 2 === 0 ? ['table', 'kafka'] : ['kafka', 'table']) as ('kafka' | 'table')[]) {
        const workload = `bench-${kind}-${run}`;
        const sink = `${workload.replace(/-/g, '_')}_out`;
        let audit: () => Promise<boolean>;
        let source: TaskStart['spec'];
        if (kind === 'kafka') {
          const loaded = await runKafkaLoad({ brokers, topic: workload, partitions: PARTITIONS, ratePerSec: 1_000_000, count: N, keySpace: 1000 });
          source = { kafka: { topic: workload } };
          audit = async () => { const a = await verifyAgainstAcked({ databaseUrl, sink, acked: loaded.acked }); return a.missing === 0 && a.duplicates === 0 && a.extra === 0; };
        } else {
          const table = `${workload.replace(/-/g, '_')}_in`;
          await runLoad({ databaseUrl, source: table, partitions: PARTITIONS, ratePerSec: 1_000_000, count: N, keySpace: 1000 });
          source = table;
          audit = async () => { const a = await verifyExactlyOnce({ databaseUrl, source: table, sink }); return a.missing === 0 && a.duplicates === 0 && a.extra === 0; };
        }
        const started = Date.now();
        const task = await driver(`rt-${workload}`).start(startOf(workload, source, `${workload}-0`, all));
        await waitFor(`${workload}: all ${N} in the sink`, async () => (await sinkCount(sink).catch(() => 0)) >= N, { timeoutMs: 300_000, intervalMs: 20 });
        runs[kind].push(Date.now() - started);
        await task.drain({ drainTimeoutMs: 10_000 });
        if (!(await audit())) throw new Error(`${workload}: the sink is not exactly the source`);
      }
    }

    // 2. hand-over under load on Kafka
    const topic = 'bench-handover';
    const stop = new AbortController();
    const load = runKafkaLoad({ brokers, topic, partitions: PARTITIONS, ratePerSec: 1_000, signal: stop.signal });
    await sleep(500); // the topic exists once the load wrote its first tick
    const a = await driver('rt-a').start(startOf('bench-handover', { kafka: { topic } }, 'handover-0', [0, 1]));
    const b = await driver('rt-b').start(startOf('bench-handover', { kafka: { topic } }, 'handover-1', [2, 3], 1));
    const ready = (h: TaskHandle) => (h.status() as ConsumerTaskStatus).state === 'ready';
    await waitFor('both replicas ready', () => ready(a) && ready(b), { timeoutMs: 60_000 });
    await sleep(4_000);
    const handoverAt = Date.now();
    const receipt: DrainReceipt = await b.drain({ drainTimeoutMs: 15_000 });
    await a.update!(startOf('bench-handover', { kafka: { topic } }, 'handover-0', all));
    const movedAfter = receipt.committedOffsets ?? {};
    await waitFor('A committed a record of every moved partition', async () => {
      const { rows } = await db.query<{ n: number }>(
        `select count(distinct partition)::int as n from bench_handover_out where task_id = 'handover-0' and partition = any($1::int[]) and "offset" > ($2::jsonb ->> partition::text)::bigint`,
        [[2, 3], JSON.stringify(movedAfter)],
      );
      return rows[0].n === 2;
    }, { timeoutMs: 60_000, intervalMs: 10 });
    const movedConsumedMs = Date.now() - handoverAt;
    await sleep(2_000);
    stop.abort();
    const loaded = await load;
    await waitFor('every acknowledged hand-over record in the sink', async () => (await verifyAgainstAcked({ databaseUrl, sink: 'bench_handover_out', acked: loaded.acked })).missing === 0, { timeoutMs: 60_000 });
    const exact = await verifyAgainstAcked({ databaseUrl, sink: 'bench_handover_out', acked: loaded.acked });
    if (exact.duplicates || exact.extra) throw new Error(`hand-over: not exact ${JSON.stringify(exact)}`);
    // Largest gap between consecutive commits (processed_at) of the partitions that did not move.
    const maxGap = async (fromMs: number, toMs: number) => (await db.query<{ gap: number | null }>(
      `select max(gap)::float8 as gap from (
         select extract(epoch from processed_at - lag(processed_at) over (partition by partition order by "offset")) * 1000 as gap
           from bench_handover_out where partition in (0, 1) and processed_at between to_timestamp($1 / 1000.0) and to_timestamp($2 / 1000.0)) g`,
      [fromMs, toMs],
    )).rows[0].gap ?? 0;
    const steadyGapMs = Math.round(await maxGap(handoverAt - 3_500, handoverAt));
    const handoverGapMs = Math.round(await maxGap(handoverAt, handoverAt + movedConsumedMs + 1_000));

    const kafkaMs = median(runs.kafka);
    const tableMs = median(runs.table);
    process.stdout.write(`${JSON.stringify({
      bench: 'kafka', cpus: os.cpus().length, records: N, partitions: PARTITIONS,
      throughput: {
        kafkaRecordsPerSec: rate(N, kafkaMs), tableRecordsPerSec: rate(N, tableMs), kafkaToTable: Math.round((tableMs / kafkaMs) * 100) / 100,
        runsMs: runs,
      },
      handover: {
        loadPerSec: 1_000, movedPartitions: [2, 3], movedConsumedMs,
        unmovedPartitions: [0, 1], unmovedMaxGapMs: handoverGapMs, steadyMaxGapMs: steadyGapMs,
        pauseOverSteadyMs: Math.max(0, handoverGapMs - steadyGapMs), acked: loaded.acked.length, exact,
      },
    }, null, 2)}\n`);
  } finally {
    await Promise.all(drivers.map((d) => d.close?.().catch(() => {})));
    await pool?.end().catch(() => {});
    await servers.stop().catch(() => {});
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:kafka: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
