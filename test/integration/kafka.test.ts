// A consumer reading a real Kafka broker (the shared one of the global setup), on the real stack:
// defined against the broker's partition count (a declaration it disagrees with is a 422), scaled
// 1 → 3 → 1 under load with every record the producer had acknowledged in the sink exactly once,
// and a scale past the topic's partitions refused, naming the broker's figure. A stream job reading
// a topic: hot-rescaled 2 → 4 → 2 under load without re-reading an offset, then replanned (stop
// the world) from its checkpoint's offsets, every key counted against what the producer acked. A
// service in its own consumer group (the fixture consumer): scaled 2 → 4 → 2 under load with the
// group's members, assignment and lag as the evidence, and every acknowledged record in its sink. A
// tier that pulls a slow consumer's Kafka lag itself scales it up while the lag is high and back
// down once it drained.
import path from 'node:path';
import { CPU_JUDGED_AFTER_SOAK_MS } from '../../domain/evidence';
import { kafkaClient, kafkaMetadata } from '../../lib/kafka';
import { ensureTopic, runKafkaLoad, type KafkaLoadResult } from '../../store/kafka-feed';
import { auditStreamCheckpoint, ownershipOverlaps, verifyAgainstAcked, verifyStreamAgainstAcked } from '../../store/sink-audit';
import { createStreamJobStore } from '../../store/stream-jobs';
import type { RescaleStatus } from '../../workflows/rescale-operator';
import { testEnv } from '../../harness/env';
import { runCli } from '../support/cli';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, scaleAndWait, tasksOf } from '../../harness/workloads';

let stack: Stack;
let brokers: string;
const TOPIC = `scalegate-orders-${process.pid}`;
const STREAM_TOPIC = `scalegate-clicks-${process.pid}`;
const GROUP_TOPIC = `scalegate-payments-${process.pid}`;
const LAG_TOPIC = `scalegate-backlog-${process.pid}`;
const CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
/**
 * The consumer's scale-out soak, instead of the default 5 s: the shortest that judges every row the
 * default would (CPU is judged from this soak on). A consumer's rows rest on counts (errors per
 * record, tasks ready, backlog), not on samples: its latency is not judged, and its throughput only
 * when saturated. Not for the service below: its latency is judged over the soak's samples, and a
 * 2 s window held too few to outweigh a new replica's first slow answers (p50 1.7 → 126 ms, a
 * false regression on a loaded machine).
 */
const CONSUMER_SOAK_MS = CPU_JUDGED_AFTER_SOAK_MS;
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
  await ensureTopic(admin, STREAM_TOPIC, 4);
  await ensureTopic(admin, GROUP_TOPIC, 4);
  await ensureTopic(admin, LAG_TOPIC, 6);
  await admin.disconnect();
  // slots for the stream job's subtasks (a consumer runs one task per runtime whatever the slots)
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `kafka-${zone}`, labels: { zone }, slots: 8 })) });
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
      const out = await scaleAndWait(stack, 'kafka-orders', { replicas: 3, soakMs: CONSUMER_SOAK_MS }, 'scaleOut');
      // the comparison's reasons in the failure message: a transient broker or database state on a
      // loaded machine must not read as a regression (a reader reopened inside the batch
      // transaction once idled it past its timeout; a coordinator still loading once counted as an error)
      expect({ status: out.status, kind: out.kind, regression: out.evidence?.comparison?.reasons }).toEqual({ status: 'completed', kind: 'scaleOut', regression: [] });
      const refused = await scaleAndWait(stack, 'kafka-orders', { replicas: 7 }, 'scaleOut');
      expect(refused.status).toBe('refused');
      const ownership = refused.gates.rows.find((r: { gate: string }) => r.gate === 'input-ownership');
      expect(ownership).toMatchObject({ passed: false, detail: `target 7 above the 6 partitions kafka topic ${TOPIC} has on the broker would leave replicas idle` });
      const back = await scaleAndWait(stack, 'kafka-orders', { replicas: 1, drainTimeoutMs: 30_000 }, 'scaleIn');
      expect({ status: back.status, kind: back.kind, regression: back.evidence?.comparison?.reasons }).toEqual({ status: 'completed', kind: 'scaleIn', regression: [] });
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
    // Lag tools see the consumer: its committed offsets are mirrored to group scalegate-kafka-orders, up to every record.
    const ackedPerPartition = [0, 1, 2, 3, 4, 5].map((p) => acked.filter((a) => a.partition === p).length);
    const mirrored = async () => {
      const admin = kafkaClient(brokers).admin();
      await admin.connect();
      try {
        const [offsets] = await admin.fetchOffsets({ groupId: 'scalegate-kafka-orders', topics: [TOPIC] });
        return [...offsets.partitions].sort((a, b) => a.partition - b.partition).map((p) => Number(p.offset));
      } finally {
        await admin.disconnect();
      }
    };
    await stack.waitFor('the committed offsets mirrored to the broker', async () => JSON.stringify(await mirrored()) === JSON.stringify(ackedPerPartition), { timeoutMs: 30_000 });
  });
});

describe('a stream job reading a Kafka topic', () => {
  const JOB = 'kafka-clicks';
  const SINK = 'kafka_clicks_out';
  const sum = (tasks: any[], counter: string) => tasks.reduce((total, t) => total + (t.counts[counter] ?? 0), 0);
  const sources = async () => (await tasksOf(stack, JOB)).filter((t) => t.state === 'ready' && t.counts.recordsRead !== undefined);

  async function rescale(parallelism: number): Promise<RescaleStatus> {
    const started = await stack.api('POST', `/v1/jobs/${JOB}/operators/agg/rescale`, { body: { parallelism } });
    expect(started).toMatchObject({ status: 202, body: { workflowId: `rescale:${JOB}` } });
    return (await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result()) as RescaleStatus;
  }

  it('is hot-rescaled 2 → 4 → 2 under load without re-reading an offset, and a replan restores its checkpoint\'s offsets: every acknowledged record counted once per key', async () => {
    const mismatch = await stack.api('PUT', `/v1/workloads/${JOB}`, { body: { kind: 'stream', contract: streamContract(6), spec: streamSpec(6) } });
    expect(mismatch).toMatchObject({ status: 422, body: { error: 'partitions-mismatch' } });
    await defineWorkload(stack, JOB, { kind: 'stream', selector: {}, contract: streamContract(4), spec: streamSpec(4) }, 5);
    const stop = new AbortController();
    const load = runKafkaLoad({ brokers, topic: STREAM_TOPIC, partitions: 4, ratePerSec: 400, keySpace: 300, signal: stop.signal });
    let loaded: KafkaLoadResult | null = null;
    let readBeforeReplan = 0;
    try {
      await stack.waitFor('the sources reading the topic', async () => sum(await sources(), 'recordsRead') > 200, { timeoutMs: 60_000 });
      const startedSources = (await sources()).map((t) => t.incarnation).sort();
      for (const [from, to] of [[2, 4], [4, 2]]) {
        const status = await rescale(to);
        expect(status).toMatchObject({ outcome: 'completed', hot: true, from, to, compensation: null });
      }
      // The same source incarnations throughout, each having read every offset once: records read = the offsets' positions.
      const running = await sources();
      expect(running.map((t) => t.incarnation).sort()).toEqual(startedSources);
      expect(running.every((t) => t.counts.cutovers === 2)).toBe(true);
      expect(sum(running, 'recordsRead')).toBe(sum(running, 'readPosition'));
      readBeforeReplan = sum(running, 'recordsRead');
      // 2 → 3 is no integer factor: the stop-the-world replan, every subtask restored from the last completed checkpoint.
      const replanned = await rescale(3);
      expect(replanned).toMatchObject({ outcome: 'replanned', hot: false, from: 2, to: 3 });
    } finally {
      stop.abort();
      loaded = await load;
    }
    const restarted = await sources();
    const restoredFrom = restarted[0].counts.restoredFrom;
    expect(restoredFrom).toBeGreaterThan(0);
    expect(restarted.every((t) => t.counts.restoredFrom === restoredFrom)).toBe(true);
    // The new sources began exactly at that checkpoint's offsets: position − records read is what it covered, not 0.
    const offsets = await createStreamJobStore(stack.db).sourceOffsetsAt(JOB, restoredFrom);
    const coveredAtRestore = Object.values(offsets).reduce((n, offset) => n + offset + 1, 0);
    expect(coveredAtRestore).toBeGreaterThan(readBeforeReplan / 2);
    expect(sum(restarted, 'readPosition') - sum(restarted, 'recordsRead')).toBe(coveredAtRestore);

    const acked = loaded.acked;
    await stack.waitFor(`a completed checkpoint covering all ${acked.length} acknowledged records`, async () =>
      (await auditStreamCheckpoint(stack.db, { job: JOB, source: null, sink: SINK })).coveredSourceRows === acked.length, { timeoutMs: 90_000 });
    expect(await verifyStreamAgainstAcked({ databaseUrl: stack.databaseUrl, sink: SINK, acked }))
      .toEqual({ acked: acked.length, sinkTotal: acked.length, keys: 300, mismatchedKeys: 0, extraKeys: 0, exact: true });
  });

  function streamContract(partitions: number) {
    return { ownership: 'partitioned', partitions, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' };
  }
  function streamSpec(partitions: number) {
    return {
      source: { kafka: { topic: STREAM_TOPIC } }, sink: SINK, partitions, checkpointIntervalMs: 300, maxParallelism: 64,
      operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    };
  }
});

describe('a service in its own Kafka consumer group', () => {
  const NAME = 'kafka-payments';
  const GROUP = `payments-svc-${process.pid}`;
  const SINK = 'kafka_payments_out';
  const service = (replicas: number, partitions = 4) => ({
    kind: 'service', replicas,
    contract: { ownership: 'partitioned', partitions, state: 'none', ordering: 'per-partition', delivery: 'at-least-once', recovery: 'reassign', downstream: 'none' },
    spec: {
      command: [process.execPath, path.resolve(__dirname, '../fixtures/kafka-group-consumer.js')],
      env: { DATABASE_URL: stack.databaseUrl, SINK_TABLE: SINK }, readiness: { http: '/healthz' }, graceMs: 15_000,
      kafka: { topic: GROUP_TOPIC, group: GROUP },
    },
  });

  it('is scaled 2 → 4 → 2 under load, converging on the broker\'s view of its group; every acknowledged record reaches its sink', async () => {
    const mismatch = await stack.api('PUT', `/v1/workloads/${NAME}`, { body: service(2, 6) });
    expect(mismatch).toMatchObject({ status: 422, body: { error: 'partitions-mismatch' } });
    expect(mismatch.body.message).toContain(`kafka topic ${GROUP_TOPIC} has 4 partitions on the broker; contract.partitions declares 6`);
    await stack.db.query(`create table ${SINK} (partition int, "offset" bigint, key text, deliveries int not null default 1, primary key (partition, "offset"))`);
    const stop = new AbortController();
    const load = runKafkaLoad({ brokers, topic: GROUP_TOPIC, partitions: 4, ratePerSec: 200, signal: stop.signal });
    let loaded: KafkaLoadResult | null = null;
    const group = () => kafkaMetadata(brokers).consumerGroup(GROUP, GROUP_TOPIC);
    try {
      await defineWorkload(stack, NAME, service(2), 2);
      const out = await scaleAndWait(stack, NAME, { replicas: 4 }, 'scaleOut');
      expect({ status: out.status, regression: out.evidence?.comparison?.reasons }).toEqual({ status: 'completed', regression: [] });
      // The evidence is the broker's: the group before and after, and its lag as the backlog.
      expect(out.evidence.baseline.group).toMatchObject({ group: GROUP, topic: GROUP_TOPIC, members: 2, partitions: 4 });
      expect(out.evidence.after.group).toMatchObject({ state: 'Stable', members: 4, partitions: 4, unassigned: [] });
      expect(out.evidence.after.backlog).toBe(out.evidence.after.group.lag);
      const members = (await group()).members;
      const placed = (await tasksOf(stack, NAME)).map((t) => t.taskId).sort();
      expect(members.map((m) => m.clientId).sort()).toEqual(placed);
      expect(members.every((m) => m.partitions.length === 1)).toBe(true);

      const refused = await scaleAndWait(stack, NAME, { replicas: 5 }, 'scaleOut');
      expect(refused.status).toBe('refused');
      expect(refused.gates.rows.find((r: { gate: string }) => r.gate === 'input-ownership')).toMatchObject({
        passed: false, detail: `target 5 above the 4 partitions kafka topic ${GROUP_TOPIC} has on the broker would leave replicas idle`,
      });

      const back = await scaleAndWait(stack, NAME, { replicas: 2 }, 'scaleIn');
      expect({ status: back.status, kind: back.kind, regression: back.evidence?.comparison?.reasons }).toEqual({ status: 'completed', kind: 'scaleIn', regression: [] });
      // The drain is confirmed by the group: the drained members left, the survivors hold every partition.
      expect(back.scaleIn.confirmation.group).toMatch(new RegExp(`consumer group ${GROUP} on topic ${GROUP_TOPIC}: 2 member\\(s\\), 2 owning partitions, all 4 assigned`));
      const survivors = (await tasksOf(stack, NAME)).filter((t) => t.state === 'ready').map((t) => t.taskId).sort();
      expect((await group()).members.map((m) => m.clientId).sort()).toEqual(survivors);
      expect(back.evidence.after.group).toMatchObject({ state: 'Stable', members: 2, unassigned: [] });
    } finally {
      stop.abort();
      loaded = await load;
    }
    const acked = loaded.acked;
    await stack.waitFor('the group caught up (lag 0)', async () => (await group()).lag === 0, { timeoutMs: 60_000 });
    expect(await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: SINK, acked }))
      .toEqual({ acked: acked.length, sinkCount: acked.length, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
  });
});

describe('a tier observing a workload\'s Kafka lag', () => {
  const TIER = 'kafka-lag';
  const NAME = 'kafka-backlog';
  const SINK = 'kafka_backlog_out';
  const policy = (workload: string, targets: Record<string, number> = { queueDepthPerInstance: 300 }) => ({
    workloads: [workload], minReplicas: 1, maxReplicas: 3, targets, tolerance: 0.1, scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0,
    cooldownMs: 0, maxStep: 4, soakMs: 1_000, drainTimeoutMs: 30_000, observe: { kafkaLag: { workload, intervalMs: 1_000 } },
  });
  const decisions = async () => ((await stack.api('GET', `/v1/ledger?kind=autoscale&workload=${NAME}&limit=200`, { role: 'viewer' })).body.events as any[]).filter((r) => r.tier === TIER);

  it('scales a slow consumer up while its lag is high and back down once it drained; a workload with no topic is refused', async () => {
    // Refused before anything runs: no queueDepth target, and a workload that reads a table.
    const noTarget = await stack.api('PUT', `/v1/tiers/${TIER}/policy`, { body: policy(NAME, { qpsPerInstance: 10 }) });
    expect(noTarget.status).toBe(422);
    expect(noTarget.body.message).toMatch(/set targets\.queueDepthPerInstance/);
    await defineWorkload(stack, 'kafka-table-reader', {
      kind: 'consumer', replicas: 1, contract: { ...CONTRACT, partitions: 2 }, spec: { partitions: 2, source: 'lag_table_in', sink: 'lag_table_out', workMs: 0 },
    }, 1);
    const tableReader = await stack.api('PUT', `/v1/tiers/${TIER}/policy`, { body: policy('kafka-table-reader') });
    expect(tableReader.status).toBe(422);
    expect(tableReader.body.message).toMatch(/observe\.kafkaLag\.workload: kafka-table-reader reads no Kafka topic/);

    // 10 ms of work per record: one replica takes about 100 records/s, so a burst of 1,500 is a
    // backlog (15 s of one replica's work; the lag stays above the 600 that asks for 3 replicas for
    // the first 9 s), and 3 replicas drain it in a few seconds.
    const slow = consumer(1, 6, LAG_TOPIC);
    await defineWorkload(stack, NAME, { ...slow, spec: { ...slow.spec, sink: SINK, workMs: 10 } }, 1);
    const loaded = await runKafkaLoad({ brokers, topic: LAG_TOPIC, partitions: 6, ratePerSec: 3_000, count: 1_500 });
    expect(loaded.acked).toHaveLength(1_500);
    try {
      expect((await stack.api('PUT', `/v1/tiers/${TIER}/policy`, { body: policy(NAME) })).status).toBe(201);
      const up = await stack.waitFor('a scale-out on the pulled lag', async () => (await decisions()).find((r) => r.inputs.decision === 'scale-out') ?? null, { timeoutMs: 60_000 });
      expect(up).toMatchObject({ fromReplicas: 1, toReplicas: 3 });
      expect(up.inputs.observation.pulled).toMatch(new RegExp(`^kafka lag of ${NAME} on topic ${LAG_TOPIC} \\(committed offsets\\)$`));
      expect(up.inputs.observation.queueDepth).toBeGreaterThan(600);
      // Down as the lag drains (3 → 2 on the way when a reading falls between 300 and 600), to the minimum once it is gone.
      const down = await stack.waitFor('a scale-in to 1 once the lag drained', async () => (await decisions()).find((r) => r.inputs.decision === 'scale-in' && r.toReplicas === 1) ?? null, { timeoutMs: 90_000 });
      expect(down.inputs.observation.queueDepth).toBeLessThanOrEqual(300);
      const scaleIns = (await decisions()).filter((r) => r.inputs.decision === 'scale-in');
      expect(scaleIns[scaleIns.length - 1].fromReplicas).toBe(3); // newest first: the first scale-in came from the scaled-out size
      const outcomes = (await decisions()).filter((r) => r.outcome !== 'no-change' && r.outcome !== 'started').map((r) => r.outcome);
      expect(outcomes).not.toContain('refused');
      const tier = (await stack.api('GET', `/v1/tiers/${TIER}`, { role: 'viewer' })).body;
      expect(tier.pull).toMatchObject({ workload: NAME, intervalMs: 1_000, error: null });
      expect(typeof tier.pull.lastLag).toBe('number');
      // What a person sees: the pull on the tier, and which observations were pulled.
      const shown = await runCli(stack, ['tiers', 'show', TIER]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(new RegExp(`pulls:\\s+kafka lag of ${NAME} every 1000 ms; last \\d+ \\(`));
      expect(shown.stdout).toMatch(new RegExp(`queueDepth \\d+ \\(pulled: kafka lag of ${NAME} on topic`)); // the table cuts the rest
    } finally {
      await stack.temporal.workflow.getHandle(`autoscale:${TIER}`).terminate('test over').catch(() => undefined);
    }
    await stack.waitFor('every acknowledged record in the sink', async () =>
      (await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: SINK, acked: loaded.acked })).missing === 0, { timeoutMs: 60_000 });
    expect(await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: SINK, acked: loaded.acked }))
      .toEqual({ acked: 1_500, sinkCount: 1_500, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
  });
});
