// The shared Kafka broker of the test run (test/support/global-setup.ts → embedded/kafka.ts) is a
// real one: a topic made through the admin client has the partitions asked for, and every record a
// producer had acknowledged (acks=all) is counted back in the broker's end offsets. Everything is
// read back from the broker, nothing is assumed from what was sent.
import crypto from 'node:crypto';
import type { Admin } from 'kafkajs';
import { kafkaClient } from '../../lib/kafka';
import { testEnv } from '../../harness/env';

const PARTITIONS = 6;
const RECORDS = 1_000;
const BATCH = 100;

function brokers(): string {
  const env = testEnv();
  if (!env.kafkaBrokers) throw new Error(`the test run has no Kafka broker: ${env.kafkaOff} (it needs Java 17, and mvn to fetch its jars: npm run kafka:install)`);
  return env.kafkaBrokers;
}

let admin: Admin;
const topic = `broker-test-${crypto.randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  admin = kafkaClient(brokers(), 'kafka-broker-test').admin();
  await admin.connect();
});
afterAll(async () => {
  await admin?.deleteTopics({ topics: [topic] }).catch(() => {});
  await admin?.disconnect();
});

test('a 6-partition topic takes 1,000 acknowledged keyed records, and the broker counts them back', async () => {
  expect(await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true })).toBe(true);

  const producer = kafkaClient(brokers(), 'kafka-broker-test-producer').producer({ allowAutoTopicCreation: false });
  await producer.connect();
  let acknowledged = 0;
  try {
    for (let sent = 0; sent < RECORDS; sent += BATCH) {
      const messages = Array.from({ length: BATCH }, (_, i) => ({ key: `key-${sent + i}`, value: JSON.stringify({ n: sent + i }) }));
      const acks = await producer.send({ topic, acks: -1, messages });
      // one result per partition the batch touched, each without an error code
      expect(acks.every((ack) => ack.errorCode === 0)).toBe(true);
      acknowledged += messages.length;
    }
  } finally {
    await producer.disconnect();
  }
  expect(acknowledged).toBe(RECORDS);

  const [metadata] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
  expect(metadata.partitions).toHaveLength(PARTITIONS);
  expect(metadata.partitions.map((p) => p.leader)).toEqual(Array(PARTITIONS).fill(1));

  const offsets = await admin.fetchTopicOffsets(topic);
  expect(offsets).toHaveLength(PARTITIONS);
  expect(offsets.every((o) => o.low === '0')).toBe(true);
  expect(offsets.reduce((sum, o) => sum + Number(o.high), 0)).toBe(RECORDS);
  // keys spread the records (murmur2 of 1,000 distinct keys leaves no partition empty)
  expect(offsets.filter((o) => Number(o.high) > 0)).toHaveLength(PARTITIONS);
});
