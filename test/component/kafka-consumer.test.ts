// The consumer driver reading a real Kafka broker (the shared one of the global setup) into a real
// PostgreSQL sink: two replicas, then a drain and takeover under load, every record the producer
// had acknowledged in the sink exactly once, counted; the broker's partition count refuses a
// declared count that disagrees. Waits poll for conditions with a bounded deadline.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { createConsumerDriver, type ConsumerTaskStatus } from '../../agent/drivers/consumer';
import type { DriverContext, TaskDriver, TaskHandle, TaskStart } from '../../agent/drivers/driver';
import { kafkaSource } from '../../agent/drivers/sources/kafka-source';
import { kafkaClient } from '../../lib/kafka';
import { ensureTopic, runKafkaLoad } from '../../store/kafka-feed';
import { ownershipOverlaps, verifyAgainstAcked } from '../../store/sink-audit';
import { createTestDatabase } from '../../harness/database';
import { testEnv } from '../../harness/env';
import { waitFor as pollUntil } from '../../harness/wait-for';
import { setTimeout as sleep } from 'node:timers/promises';

jest.setTimeout(90_000);

let brokers: string;
let databaseUrl: string;
let pool: Pool;
let tmpDir: string;
const drivers: TaskDriver[] = [];
const waitFor = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 30_000) => pollUntil(what, probe, { timeoutMs, intervalMs: 50 });
const statusOf = (handle: TaskHandle) => handle.status() as ConsumerTaskStatus;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function newDriver(runtimeId: string): TaskDriver {
  const ctx: DriverContext = { runtimeId, stateDir: path.join(tmpDir, runtimeId), databaseUrl, kafkaBrokers: brokers, log: () => {} };
  const driver = createConsumerDriver(ctx, { pollMs: 20, batchSize: 100 });
  drivers.push(driver);
  return driver;
}

beforeAll(async () => {
  const env = testEnv();
  if (!env.kafkaBrokers) throw new Error(`the shared Kafka broker is not running: ${env.kafkaOff}`);
  brokers = env.kafkaBrokers;
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-kafka-consumer-'));
  databaseUrl = (await createTestDatabase('k')).databaseUrl;
  pool = new Pool({ connectionString: databaseUrl, max: 2 });
});

afterAll(async () => {
  await Promise.all(drivers.map((d) => d.close?.()));
  await pool?.end();
  fs.rmSync(tmpDir, { recursive: true, force: true });
});

describe('consumer driver, Kafka source', () => {
  test('two replicas, then a drain and takeover under load: every acknowledged record in the sink exactly once', async () => {
    const topic = `orders-${Date.now()}`;
    const spec = { partitions: 6, source: { kafka: { topic } }, sink: 'korders_out', workMs: 0 };
    const startFor = (taskId: string, index: number, partitions: number[]): TaskStart => ({
      taskId, workload: 'korders', kind: 'consumer', index, generation: 1, placementFence: 1, spec, partitions,
    });
    const first = await runKafkaLoad({ brokers, topic, partitions: 6, ratePerSec: 2_000, count: 1_000 });
    expect(first.acked).toHaveLength(1_000);
    const replicaA = await newDriver('rt-ka').start(startFor('korders-0', 0, range(0, 2)));
    const replicaB = await newDriver('rt-kb').start(startFor('korders-1', 1, range(3, 5)));
    await waitFor('the first 1,000 records in the sink', async () => (await verifyAgainstAcked({ databaseUrl, sink: 'korders_out', acked: first.acked })).missing === 0);
    expect(await verifyAgainstAcked({ databaseUrl, sink: 'korders_out', acked: first.acked })).toEqual({ acked: 1_000, sinkCount: 1_000, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
    expect(statusOf(replicaA).counts.processed + statusOf(replicaB).counts.processed).toBe(1_000);

    // Another 2,000 while B drains and A takes its partitions over.
    const second = runKafkaLoad({ brokers, topic, partitions: 6, ratePerSec: 800, count: 2_000 });
    await waitFor('both processing the second load', () => statusOf(replicaA).counts.processed + statusOf(replicaB).counts.processed > 1_200);
    const receipt = await replicaB.drain({ drainTimeoutMs: 15_000 });
    expect(receipt.releasedPartitions).toEqual([3, 4, 5]);
    await replicaA.update!(startFor('korders-0', 0, range(0, 5)));
    const secondLoad = await second;
    const acked = [...first.acked, ...secondLoad.acked];
    expect(acked).toHaveLength(3_000);
    await waitFor('every acknowledged record in the sink', async () => (await verifyAgainstAcked({ databaseUrl, sink: 'korders_out', acked })).missing === 0);
    expect(await verifyAgainstAcked({ databaseUrl, sink: 'korders_out', acked })).toEqual({ acked: 3_000, sinkCount: 3_000, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'korders' })).toEqual([]);
    // B's records end exactly at its receipt's committed offsets; A's on those partitions start right after.
    const { rows } = await pool.query<{ partition: number; b_max: string | null; a_min: string | null }>(
      `select partition, max("offset") filter (where task_id = 'korders-1') as b_max, min("offset") filter (where task_id = 'korders-0') as a_min
         from korders_out where partition >= 3 group by partition order by partition`,
    );
    for (const row of rows) {
      expect(Number(row.b_max)).toBe(receipt.committedOffsets![row.partition]);
      expect(Number(row.a_min)).toBe(receipt.committedOffsets![row.partition] + 1);
    }
    await waitFor('A reporting no backlog (the broker lag)', () => statusOf(replicaA).backlog === 0);
    expect(statusOf(replicaA).errors).toBe(0);
  });

  test('a source closed while a read is still opening its reader leaves no reader behind (no member, no heartbeat after the close)', async () => {
    const topic = `close-race-${Date.now()}`;
    const admin = kafkaClient(brokers).admin();
    await admin.connect();
    try {
      await ensureTopic(admin, topic, 2);
      const owner = `close-race-${Date.now()}`;
      const source = kafkaSource({ brokers, topic, partitions: 2, owner });
      // The first read opens the partition's reader (connect, subscribe, run); the close comes first.
      const reading = source.readAfter(0, -1, 10).then(() => 'read', (error: Error) => error.message);
      await source.close();
      expect(await reading).toMatch(/closed/);
      const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((id) => id.startsWith(`scalegate-transport-${owner}-`));
      const described = groups.length ? (await admin.describeGroups(groups)).groups : [];
      expect(described.filter((g) => g.members.length > 0).map((g) => g.groupId)).toEqual([]);
    } finally {
      await admin.disconnect();
    }
  });

  test('replicas mirror their offsets to the workload\'s group at the same time, and the broker holds every one', async () => {
    // Each replica mirrors the offsets of its own partitions to one group (scalegate-<workload>),
    // each on its own clock, so two often write at once. Committed as a client outside the group,
    // both land; KafkaJS's admin.setOffsets joined the group to commit, and a writer that met the
    // other's member failed ("must have no running instances"): its partitions stayed behind.
    const topic = `mirror-${Date.now()}`;
    const admin = kafkaClient(brokers).admin();
    await admin.connect();
    await ensureTopic(admin, topic, 4);
    const replicas = [0, 1, 2, 3].map((i) => kafkaSource({ brokers, topic, partitions: 4, owner: `mirror-${i}` }));
    try {
      for (let round = 1; round <= 3; round++) {
        // every replica within a second, each its own partition, as four tasks of one workload do
        const results = await Promise.allSettled(replicas.map(async (source, partition) => {
          await sleep(partition * 300);
          await source.mirrorProcessed('scalegate-mirrored', new Map([[partition, round * 10 + partition]]));
        }));
        expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
        const [committed] = await admin.fetchOffsets({ groupId: 'scalegate-mirrored', topics: [topic] });
        // Kafka's committed offset is the next one to read
        expect(committed.partitions.map((p) => [p.partition, Number(p.offset)]).sort(([a], [b]) => a - b)).toEqual([0, 1, 2, 3].map((p) => [p, round * 10 + p + 1]));
      }
      // the group has no member: nothing of scalegate's stays in it
      const described = await admin.describeGroups(['scalegate-mirrored']);
      expect(described.groups[0].members).toEqual([]);
    } finally {
      await Promise.all(replicas.map((source) => source.close()));
      await admin.disconnect();
    }
  });

  test('a declared partition count the broker does not have is refused, naming the broker figure', async () => {
    const topic = `mismatch-${Date.now()}`;
    const admin = kafkaClient(brokers).admin();
    await admin.connect();
    await ensureTopic(admin, topic, 3);
    await admin.disconnect();
    const spec = { partitions: 4, source: { kafka: { topic } }, sink: 'kmismatch_out', workMs: 0 };
    const driver = newDriver('rt-km');
    await expect(driver.start({ taskId: 'km-0', workload: 'km', kind: 'consumer', index: 0, generation: 1, placementFence: 1, spec, partitions: [0] }))
      .rejects.toMatchObject({ code: 'partitions-mismatch', message: expect.stringContaining('has 3 partitions on the broker; the workload declares 4') });
    const probe = await driver.probe!(spec);
    expect(probe.source).toMatchObject({ ok: false, detail: expect.stringContaining('has 3 partitions on the broker') });
  });
});
