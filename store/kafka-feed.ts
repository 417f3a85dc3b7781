// The Kafka feed: what a producer writes into a consumer's topic, at a steady rate, keeping every
// record the broker acknowledged (its partition and offset), so a sink is counted against what was
// acked, not against what was meant to be sent. Keys and the key → partition mapping are the table
// feed's (source-feed.ts), so the same load reads the same either way. Tests and benches call it.
import { Partitioners, type Admin } from 'kafkajs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isUnknownTopic, kafkaClient, topicPartitionCount } from '../lib/kafka';
import { runPaced, type PacedLoad } from './source-feed';

export interface KafkaLoadOptions extends PacedLoad {
  brokers: string;
  topic: string;
}

export interface AckedRecord {
  partition: number;
  offset: number;
  key: string;
}

export interface KafkaLoadResult {
  written: number;
  perPartition: Record<string, number>;
  /** every acknowledged record */
  acked: AckedRecord[];
}

/** Creates the topic with `partitions` partitions unless it exists (then its count must agree). */
export async function ensureTopic(admin: Admin, topic: string, partitions: number, timeoutMs = 30_000): Promise<void> {
  // A broker that just started (KRaft, on a loaded machine) may answer a new topic's metadata as
  // unknown until the topic reaches its metadata cache: created, then read again until it is there.
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true }).catch((error: unknown) => {
    if (!isUnknownTopic(error)) throw error;
  });
  const deadline = Date.now() + timeoutMs;
  let count = await topicPartitionCount(admin, topic);
  while (count === 0 && Date.now() < deadline) {
    await sleep(200);
    count = await topicPartitionCount(admin, topic);
  }
  if (count !== partitions) throw new Error(`topic ${topic} has ${count} partitions, not ${partitions}`);
}

export async function runKafkaLoad(options: KafkaLoadOptions): Promise<KafkaLoadResult> {
  const { topic, partitions } = options;
  const kafka = kafkaClient(options.brokers, 'scalegate-feed');
  const admin = kafka.admin();
  // idempotent: a retried send never doubles a record, so what was acked is what is there
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
  const result: KafkaLoadResult = { written: 0, perPartition: {}, acked: [] };
  await admin.connect();
  try {
    await ensureTopic(admin, topic, partitions);
    await producer.connect();
    await runPaced(options, async (byPartition) => {
      const messages = [...byPartition].flatMap(([partition, records]) => records.map((r) => ({ key: r.key, value: r.payload, partition })));
      const metadata = await producer.send({ topic, acks: -1, messages });
      // Offsets are assigned in send order within a partition, from each partition's base offset.
      for (const [partition, records] of byPartition) {
        let offset = Number(metadata.find((m) => m.partition === partition)!.baseOffset);
        for (const record of records) result.acked.push({ partition, offset: offset++, key: record.key });
        result.written += records.length;
        result.perPartition[partition] = (result.perPartition[partition] ?? 0) + records.length;
      }
      return messages.length;
    });
    return result;
  } finally {
    await producer.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}
