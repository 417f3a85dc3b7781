// Nodes on hosts of their own, partitioned (issue 35 acceptance): three agents, each in its own
// network namespace on a bridge (harness/host-stack.ts).
// 1. A consumer under load on all three. The host of one replica is cut from the control plane,
//    both ways, past two leases, while its task keeps running and keeps reaching PostgreSQL: the
//    control plane declares it LOST and moves its partitions under a higher owner fence, the
//    stranded task's late batches are refused by that fence (counted), and once the link heals the
//    node stops exactly the task recovery moved; the sink then holds every source record exactly
//    once, and no partition was ever written by two live owners. Two of the hosts run with their
//    agents' clocks 30 s ahead and behind all along: they are never declared LOST, and no lease
//    reaches past the control plane's clock.
// 2. A hot rescale of a stream job whose new subtask's host is cut from the control plane
//    mid-window: the job is replanned once, off that host, the rescale compensated by that replan,
//    the stranded subtasks stopped once healed, every key exactly once.
// 3. A consumer reading Kafka on the hosts (a forwarder on each host's loopback carries its reads
//    across the link to the shared broker): its host isolated past two leases, the sink holds every
//    acknowledged record exactly once.
// The broken build (SCALEGATE_TEST_BREAK=owner-fence-unchecked) is caught by the chaos checker under
// the same partitions: `npm run chaos -- --network --break owner-fence-unchecked --seeds 1-20`.
// Real namespaces, veth, bridge and iptables; real API, worker, agents, Temporal and PostgreSQL.
import { execFileSync } from 'node:child_process';
import { OFFSETS_TABLE } from '../../protocol/consumer-tables';
import { kafkaClient } from '../../lib/kafka';
import { ensureTopic, runKafkaLoad } from '../../store/kafka-feed';
import { createSourceFeed, runLoad } from '../../store/source-feed';
import { auditStreamCheckpoint, auditStreamSink, ownershipOverlaps, sinkWriterInterleavings, verifyAgainstAcked, verifyExactlyOnce } from '../../store/sink-audit';
import type { RecoveryStatus } from '../../workflows/recover-runtime';
import { rescaleOperator, rescaleStatusQuery, type RescaleStatus } from '../../workflows/rescale-operator';
import { startHostStack, type HostStack } from '../../harness/host-stack';
import { testEnv } from '../../harness/env';
import { hostNetworkSupportMissing } from '../../harness/hosts';
import { defineWorkload, retireAndWait, tasksOf } from '../../harness/workloads';

const LEASE = 2000;
const PARTITIONS = 6;
const consumer = (name: string, replicas: number, selector: Record<string, string>) => ({
  kind: 'consumer', replicas, selector,
  contract: { ownership: 'partitioned', partitions: PARTITIONS, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
  spec: { partitions: PARTITIONS, source: `${name}_in`, sink: `${name}_out`, workMs: 1 },
});
/** Two of the consumer's hosts run with their agents' wall clocks skewed by ± 30 s for the whole first case. */
const SKEWS: Record<string, number> = { h2: 30, h3: -30 };

let hs: HostStack;

beforeAll(async () => {
  // Root and iproute2/iptables are required: a machine without them fails here, loudly.
  const missing = hostNetworkSupportMissing();
  if (missing) throw new Error(`the multi-host tests need network namespaces: ${missing}`);
  hs = await startHostStack({ nodes: 3, leaseTtlMs: LEASE, skewableClocks: true });
});
afterAll(async () => {
  await hs?.stop();
});
/** Stops the load once the operation under test is over; a test that fails first has it stopped here. */
let stopLoad: AbortController;
beforeEach(() => {
  stopLoad = new AbortController();
});
afterEach(() => stopLoad.abort());

/** The recovery of `runtime` that started at or after `since`, once it ended. */
async function recoveryAfter(runtime: string, since: number): Promise<RecoveryStatus> {
  const handle = hs.stack.temporal.workflow.getHandle(`recover:${runtime}`);
  await hs.stack.waitFor(`recover:${runtime} started after ${new Date(since).toISOString()} and ended`, async () => {
    const d = await handle.describe().catch(() => null);
    return d !== null && d.startTime.getTime() >= since && d.status.name !== 'RUNNING';
  }, 120_000);
  return (await handle.result()) as RecoveryStatus;
}

/** The JSON events agent `id` logged (its output reaches the test over a pipe, not the network). */
const agentEvents = (id: string, event: string): Record<string, any>[] =>
  hs.stack.logs
    .filter((line) => line.startsWith(`[agent:${id}] `) && line.includes(`"event":"${event}"`))
    .map((line) => JSON.parse(line.slice(line.indexOf(' ') + 1)));

test('a consumer host cut from the control plane past two leases: its partitions move, its late writes are refused by the fence, and once healed it stops exactly the moved task; the sink holds every record exactly once', async () => {
  const { stack, network } = hs;
  // Every agent is reached at its own host's address, not loopback.
  for (const [id, host] of Object.entries(hs.hosts)) expect(stack.agents[id]!.url).toBe(`http://${host.address}:${hs.agentPort(id)}`);
  const runtimes = (await stack.db.query<{ id: string; endpoint: string }>('select id, endpoint from runtimes order by id')).rows;
  expect(runtimes).toEqual(Object.entries(hs.hosts).map(([id, host]) => ({ id, endpoint: `http://${host.address}:${hs.agentPort(id)}` })));

  // Leases and fences never depend on an agent's clock: two of the three hosts run 30 s ahead and behind.
  for (const [id, seconds] of Object.entries(SKEWS)) network.skew(hs.hosts[id]!, seconds);
  const skewedAt = Date.now();
  for (const [id, seconds] of Object.entries(SKEWS)) {
    // what the agent's node (and its tasks) read as the time under libfaketime, on its host
    const seen = Number(execFileSync(hs.hosts[id]!.wrap[0]!, [...hs.hosts[id]!.wrap.slice(1), process.execPath, '-e', 'console.log(Date.now())'], { env: { ...process.env, ...hs.hosts[id]!.clockEnv() }, encoding: 'utf8' }).trim());
    expect(Math.sign(seen - Date.now())).toBe(Math.sign(seconds));
    expect(Math.abs(seen - Date.now())).toBeGreaterThan(25_000);
  }

  await defineWorkload(stack, 'orders', consumer('orders', 3, { zone: 'h' }), 3);
  // The load runs until the stranded task is stopped (below): through the cut, the takeover, the refused late writes and the heal.
  const load = runLoad({ databaseUrl: stack.databaseUrl, source: 'orders_in', partitions: PARTITIONS, ratePerSec: 200, signal: stopLoad.signal });
  await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'orders_in', sink: 'orders_out' })).sinkCount > 100);

  const tasks = await tasksOf(stack, 'orders');
  const victim = tasks[0].runtimeId as string;
  const lost = tasks.find((t) => t.runtimeId === victim)!;
  const host = hs.hosts[victim]!;
  const fenceBefore = Number((await stack.db.query<{ fence: string }>('select fence from placements where workload = $1', ['orders'])).rows[0]!.fence);

  const cutAt = Date.now();
  network.cut(host, { kind: 'control-plane', apiPort: hs.apiPort, agentPort: hs.agentPort(victim) });
  let recovery: RecoveryStatus;
  let refused: Record<string, any>[];
  try {
    recovery = await recoveryAfter(victim, cutAt);
    expect(recovery).toMatchObject({ runtime: victim, by: 'lease-sweeper' });
    const decided = recovery.decisions.find((d) => d.workload === 'orders')!;
    expect(decided.decisions).toEqual([expect.objectContaining({ action: 'handed-over', partitions: lost.partitions })]);

    // Its partitions are owned by the survivors under a higher fence while it still runs.
    const owners = (await stack.db.query(
      `select partition, owner_task, owner_fence from ${OFFSETS_TABLE} where workload = $1 and partition = any($2::int[])`, ['orders', lost.partitions],
    )).rows;
    expect(owners).toHaveLength(lost.partitions.length);
    for (const owner of owners) {
      expect(owner.owner_task).not.toBe(lost.taskId);
      expect(Number(owner.owner_fence)).toBeGreaterThan(fenceBefore);
    }

    // The stranded task runs on (static stability) and its batches reach PostgreSQL, where the owner fence refuses them.
    refused = await stack.waitFor(`${victim}'s late writes refused by the owner fence`, async () => {
      const events = agentEvents(victim, 'consumer.write-refused').filter((e) => e.taskId === lost.taskId);
      return events.length > 0 ? events : null;
    });
    // Past two leases before the link heals.
    await stack.waitFor('two leases since the cut', async () => Date.now() - cutAt > 2 * LEASE);
  } finally {
    network.heal(host);
  }
  const healedAt = Date.now();
  console.log(JSON.stringify({
    partition: 'consumer host cut from the control plane', leaseTtlMs: LEASE, cutMs: healedAt - cutAt,
    cutToLostMs: Date.parse(recovery.timings.lostAt!) - cutAt, cutToConvergedMs: Date.parse(recovery.timings.convergedAt!) - cutAt,
    writesRefused: refused.length, recordsRefused: refused.reduce((n, e) => n + Number(e.records), 0),
  }));

  // Healed: the node hears what was revoked and stops exactly that task, nothing else.
  const revoked = await stack.waitFor(`${victim} revoking after the heal`, async () => {
    const events = agentEvents(victim, 'revoking tasks');
    return events.length > 0 ? events : null;
  });
  expect(revoked.flatMap((e) => e.taskIds)).toEqual([lost.taskId]);
  await stack.waitFor(`${victim} stopped ${lost.taskId}`, async () => {
    const running = (await tasksOf(stack, 'orders')).filter((t) => t.state !== 'stopped');
    return !running.some((t) => t.incarnation === lost.incarnation);
  });

  stopLoad.abort();
  const { written } = await load;
  const audit = await stack.waitFor('the sink caught up', async () => {
    const a = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'orders_in', sink: 'orders_out' });
    return a.sinkCount >= written ? a : null;
  }, 120_000);
  expect(audit).toMatchObject({ sourceCount: written, sinkCount: written, missing: 0, duplicates: 0, extra: 0 });
  expect(await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: 'orders' })).toEqual([]);
  // The skewed hosts were never declared LOST (only the partitioned one was), and every lease runs
  // on the control plane's clock: none reaches further than one TTL past the database's now.
  const lostEvents = (await stack.db.query<{ subject: string }>(`select subject from events where type = 'runtime.lost' and at >= $1`, [new Date(skewedAt)])).rows;
  expect(lostEvents.map((e) => e.subject)).toEqual([victim]);
  const leases = (await stack.db.query<{ id: string; ahead_ms: number }>(
    `select id, (extract(epoch from (lease_expires_at - now())) * 1000)::float8 as ahead_ms from runtimes where status = 'READY' order by id`)).rows;
  for (const id of Object.keys(SKEWS)) expect(leases.find((l) => l.id === id)!.ahead_ms).toBeGreaterThan(0);
  for (const lease of leases) expect(lease.ahead_ms).toBeLessThanOrEqual(LEASE);
  for (const id of Object.keys(SKEWS)) network.skew(hs.hosts[id]!, 0);
  // No partition written by two live owners: in offset order, every run of sink rows follows its
  // writer's acquisition, so nothing the stranded task wrote after the takeover reached the sink.
  expect(await sinkWriterInterleavings(stack.db, { workload: 'orders', sink: 'orders_out' })).toEqual([]);
});

test('a hot rescale whose new subtask\'s host is cut from the control plane mid-window ends in the replan, once, off that host; healed, the host stops its stranded subtasks; every key exactly once', async () => {
  const { stack, network } = hs;
  // The slots the consumer above held go to the job: 12 on three hosts, 8 on the two that stay reachable.
  await retireAndWait(hs.stack, 'orders'); // once no operation of it runs (a recovery may still be ending): its slots go to the next case
  const JOB = 'stream';
  const tables = { source: 'stream_in', sink: 'stream_out' };
  await createSourceFeed(stack.db).ensureTables(tables.source);
  await defineWorkload(stack, JOB, {
    kind: 'stream', selector: { zone: 'h' },
    contract: { ownership: 'partitioned', partitions: 4, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
    spec: {
      ...tables, partitions: 4, checkpointIntervalMs: 300, maxParallelism: 64,
      operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    },
  }, 5);
  const load = runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: 4, ratePerSec: 500, keySpace: 200, signal: stopLoad.signal });
  await stack.waitFor('a completed checkpoint with records', async () => (await auditStreamCheckpoint(stack.db, { job: JOB, ...tables })).coveredSourceRows > 100);

  const handle = await stack.temporal.workflow.start(rescaleOperator, {
    taskQueue: stack.taskQueue, workflowId: `rescale:${JOB}`, args: [{ job: JOB, operator: 'agg', parallelism: 4, reason: 'test: host cut mid-window', stepTimeoutMs: 10_000 }],
  });
  // The window is open once a new subtask is deployed: cut its host from the control plane (its
  // data plane, the database and the other hosts' subtasks, stays reachable: its tasks run on).
  const { victim, added } = await stack.waitFor('a new subtask deployed', async () => {
    const status = await handle.query(rescaleStatusQuery).catch(() => null);
    if (!status?.added.length) return null;
    const deployed = (await tasksOf(stack, JOB)).find((t) => status.added.includes(t.taskId));
    return deployed ? { victim: deployed.runtimeId as string, added: status.added } : null;
  }, { timeoutMs: 30_000, intervalMs: 5 });
  const host = hs.hosts[victim]!;
  const stranded = (await tasksOf(stack, JOB)).filter((t) => t.runtimeId === victim).map((t) => t.taskId as string);
  const cutAt = Date.now();
  network.cut(host, { kind: 'control-plane', apiPort: hs.apiPort, agentPort: hs.agentPort(victim) });
  let status: RescaleStatus;
  try {
    status = (await handle.result()) as RescaleStatus;
    await stack.waitFor('two leases since the cut', async () => Date.now() - cutAt > 2 * LEASE);
  } finally {
    network.heal(host);
  }
  const endedAt = Date.now();
  expect(added.length).toBeGreaterThan(0);
  console.log(JSON.stringify({
    partition: 'hot rescale: a new subtask\'s host cut from the control plane mid-window', victim, stranded,
    cutToRescaleEndMs: endedAt - cutAt, compensation: status.compensation,
  }));
  expect(status).toMatchObject({ outcome: 'compensated', hot: true, phase: 'aborted' });
  expect(status.compensation?.reason).toMatch(/the cutover failed/);
  expect(status.compensation?.outcome?.parallelism?.to).toMatchObject({ agg: 4 });
  // The recovery of the lost host replanned the job (at agg = 4: the layout was written): the rescale took that replan as its compensation.
  expect(status.compensation?.joined).toBe(`replan:${JOB}`);
  // The replan, once: one replan row in the ledger since the rescale began, and the rescale's own row says compensated.
  const replans = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=replan&limit=100`, { role: 'viewer' })).body.events as any[];
  expect(replans.filter((r) => Date.parse(r.at) >= cutAt - 60_000)).toHaveLength(1);
  const rescale = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
  expect(rescale).toMatchObject({ outcome: 'compensated', toReplicas: 4 });

  // Healed: the host stops what the replan took from it, and the job runs on one generation, off nothing stale.
  await stack.waitFor(`${victim} stopped its stranded subtasks`, async () => {
    const tasks = await tasksOf(stack, JOB);
    return !tasks.some((t) => stranded.includes(t.taskId) && t.state !== 'stopped');
  }, 60_000);
  const running = await stack.waitFor('the job running again at agg = 4', async () => {
    const tasks = (await tasksOf(stack, JOB)).filter((t) => t.state !== 'stopped');
    return tasks.length === 2 + 4 + 1 && tasks.every((t) => t.state === 'ready') ? tasks : null;
  }, 90_000);
  expect(new Set(running.map((t) => t.generation)).size).toBe(1);

  stopLoad.abort();
  const { written } = await load;
  await stack.waitFor(`a completed checkpoint covering all ${written} records`, async () => (await auditStreamCheckpoint(stack.db, { job: JOB, ...tables })).coveredSourceRows === written, 90_000);
  expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: written, sinkTotal: written, mismatchedKeys: 0, extraKeys: 0, exact: true });
});

test('a consumer reading Kafka on the hosts (its reads cross their links to the broker): a host isolated past two leases loses its partitions to the others, and once healed the sink holds every acknowledged record exactly once', async () => {
  const { stack, network } = hs;
  const brokers = testEnv().kafkaBrokers;
  if (!brokers) throw new Error(`the shared Kafka broker is not running: ${testEnv().kafkaOff}`);
  await retireAndWait(stack, 'stream');
  const topic = 'partitions-orders';
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  try {
    await ensureTopic(admin, topic, PARTITIONS);
  } finally {
    await admin.disconnect();
  }
  await defineWorkload(stack, 'korders', {
    ...consumer('korders', 3, { zone: 'h' }),
    spec: { partitions: PARTITIONS, source: { kafka: { topic } }, sink: 'korders_out', workMs: 1 },
  }, 3);
  const load = runKafkaLoad({ brokers, topic, partitions: PARTITIONS, ratePerSec: 200, signal: stopLoad.signal });
  const sunk = async () => (await stack.db.query<{ n: number }>('select count(*)::int as n from korders_out')).rows[0]!.n;
  // The tasks on the hosts read the topic: records reach the sink only across the links.
  await stack.waitFor('records read from Kafka by the hosts\' tasks', async () => (await sunk().catch(() => 0)) > 100);

  const tasks = await tasksOf(stack, 'korders');
  const victim = tasks[0].runtimeId as string;
  const lost = tasks.find((t) => t.runtimeId === victim)!;
  const host = hs.hosts[victim]!;
  const cutAt = Date.now();
  // Cut off from everything: the control plane, PostgreSQL, the broker and the other hosts.
  network.cut(host, { kind: 'isolate' });
  let recovery: RecoveryStatus;
  try {
    recovery = await recoveryAfter(victim, cutAt);
    const decided = recovery.decisions.find((d) => d.workload === 'korders')!;
    expect(decided.decisions).toEqual([expect.objectContaining({ action: 'handed-over', partitions: lost.partitions })]);
    // The survivors read its partitions from the broker meanwhile.
    const before = await sunk();
    await stack.waitFor('the survivors reading on', async () => (await sunk()) > before + 50);
    await stack.waitFor('two leases since the cut', async () => Date.now() - cutAt > 2 * LEASE);
  } finally {
    network.heal(host);
  }
  await stack.waitFor(`${victim} stopped ${lost.taskId}`, async () => !(await tasksOf(stack, 'korders')).some((t) => t.incarnation === lost.incarnation && t.state !== 'stopped'));

  stopLoad.abort();
  const { acked } = await load;
  await stack.waitFor('every acknowledged record in the sink', async () =>
    (await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: 'korders_out', acked })).missing === 0, 60_000);
  expect(await verifyAgainstAcked({ databaseUrl: stack.databaseUrl, sink: 'korders_out', acked }))
    .toEqual({ acked: acked.length, sinkCount: acked.length, missing: 0, duplicates: 0, extra: 0, keyMismatches: 0 });
  expect(await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: 'korders' })).toEqual([]);
  console.log(JSON.stringify({ partition: 'Kafka consumer host isolated', acked: acked.length, cutToLostMs: Date.parse(recovery.timings.lostAt!) - cutAt, cutToConvergedMs: Date.parse(recovery.timings.convergedAt!) - cutAt }));
});
