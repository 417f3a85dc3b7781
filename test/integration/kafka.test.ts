// A consumer reading a real Kafka broker (the shared one of the global setup), on the real stack:
// defined against the broker's partition count (a declaration it disagrees with is a 422), scaled
// 1 → 3 → 1 under load with every record the producer had acknowledged in the sink exactly once,
// and a scale past the topic's partitions refused, naming the broker's figure.
import { kafkaClient } from '../../lib/kafka';
import { ensureTopic, runKafkaLoad, type KafkaLoadResult } from '../../store/kafka-feed';
import { ownershipOverlaps, verifyAgainstAcked } from '../../store/sink-audit';
import { testEnv } from '../support/env';
import { startStack, type Stack } from '../support/stack';
import { defineWorkload, scaleAndWait } from '../support/workloads';

let stack: Stack;
let brokers: string;
const TOPIC = `scalegate-orders-${process.pid}`;
const CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const consumer = (replicas: number, partitions: number, topic = TOPIC) => ({
  kind: 'consumer', replicas, contract: { ...CONTRACT, partitions },
  spec: { partitions, source: { kafka: { topic } }, sink: 'kafka_orders_out', workMs: 0 },
});

beforeAll(async () => {
  const env = testEnv();
  if (!env.kafkaBrokers) throw new Error(`the shared Kafka broker is not running: ${env.kafkaOff}`);
  brokers = env.kafkaBrokers;
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  await ensureTopic(admin, TOPIC, 6);
  await admin.disconnect();
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `kafka-${zone}`, labels: { zone } })) });
});
afterAll(async () => {
  await stack?.stop();
});

describe('a consumer of a Kafka topic', () => {
  it('is refused when its declared partitions are not the broker\'s, and when its topic does not exist', async () => {
    const mismatch = await stack.api('PUT', '/v1/workloads/kafka-mismatch', { body: consumer(1, 4) });
    expect(mismatch).toMatchObject({ status: 422, body: { error: 'partitions-mismatch' } });
    expect(mismatch.body.message).toContain(`kafka topic ${TOPIC} has 6 partitions on the broker; spec.partitions declares 4`);
    const missing = await stack.api('PUT', '/v1/workloads/kafka-missing', { body: consumer(1, 6, 'no-such-topic') });
    expect(missing).toMatchObject({ status: 422, body: { error: 'invalid-spec' } });
    expect(missing.body.message).toContain('kafka topic no-such-topic does not exist on the broker');
    expect((await stack.api('GET', '/v1/workloads/kafka-mismatch', { role: 'viewer' })).status).toBe(404);
  });

  it('scales 1 → 3 → 1 under load: every acknowledged record in the sink exactly once; past the partitions it is refused', async () => {
    await defineWorkload(stack, 'kafka-orders', consumer(1, 6), 1);
    const stop = new AbortController();
    const load = runKafkaLoad({ brokers, topic: TOPIC, partitions: 6, ratePerSec: 300, signal: stop.signal });
    let loaded: KafkaLoadResult | null = null;
    try {
      const out = await scaleAndWait(stack, 'kafka-orders', { replicas: 3 }, 'scaleOut');
      // the comparison's reasons in the failure message: a transient broker or database state on a
      // loaded machine must not read as a regression (a reader reopened inside the batch
      // transaction once idled it past its timeout; a coordinator still loading once counted as an error)
      expect({ status: out.status, kind: out.kind, regression: out.evidence?.comparison?.reasons }).toEqual({ status: 'completed', kind: 'scaleOut', regression: [] });
      const refused = await scaleAndWait(stack, 'kafka-orders', { replicas: 7 }, 'scaleOut');
      expect(refused.status).toBe('refused');
      const ownership = refused.gates.rows.find((r: { gate: string }) => r.gate === 'input-ownership');
      expect(ownership).toMatchObject({ passed: false, detail: `target 7 above the 6 partitions kafka topic ${TOPIC} has on the broker would leave replicas idle` });
      const back = await scaleAndWait(stack, 'kafka-orders', { replicas: 1, drainTimeoutMs: 30_000 }, 'scaleIn');
      expect(back).toMatchObject({ status: 'completed', kind: 'scaleIn' });
    } finally {
      stop.abort();
      loaded = await load;
    }
    const acked = loaded.acked;
    expect(acked.length).toBeGreaterThan(300);
    await stack.waitFor('every acknowledged record in the sink', async () =>
      (await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: 'kafka_orders_out', acked })).missing === 0, { timeoutMs: 60_000 });
    expect(await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: 'kafka_orders_out', acked }))
      .toEqual({ acked: acked.length, sinkCount: acked.length, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
    expect(await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: 'kafka-orders' })).toEqual([]);
  });
});
