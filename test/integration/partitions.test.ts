// Nodes on hosts of their own, partitioned (issue 35 acceptance): three agents, each in its own
// network namespace on a bridge (test/support/host-stack.ts), a consumer under load on all three.
// The host of one replica is cut from the control plane, both ways, past two leases, while its
// task keeps running and keeps reaching PostgreSQL: the control plane declares it LOST and moves
// its partitions under a higher owner fence, the stranded task's late batches are refused by that
// fence (counted), and once the link heals the node stops exactly the task recovery moved; the
// sink then holds every source record exactly once, and no partition was ever written by two live
// owners. Then the same partition with a deliberately broken node (SCALEGATE_TEST_BREAK=
// owner-fence-unchecked: its batches skip the owner fence check): the sink check finds the two
// live owners. Real namespaces, veth, bridge and iptables; real API, worker, agents, Temporal and PostgreSQL.
import { OFFSETS_TABLE } from '../../protocol/consumer-tables';
import { runLoad } from '../../store/source-feed';
import { ownershipOverlaps, sinkWriterInterleavings, verifyExactlyOnce } from '../../store/sink-audit';
import type { RecoveryStatus } from '../../workflows/recover-runtime';
import { startHostStack, type HostStack } from '../support/host-stack';
import { hostNetworkSupportMissing } from '../support/hosts';
import { defineWorkload, tasksOf } from '../support/workloads';

const LEASE = 2000;
const PARTITIONS = 6;
const consumer = (name: string, replicas: number, selector: Record<string, string>) => ({
  kind: 'consumer', replicas, selector,
  contract: { ownership: 'partitioned', partitions: PARTITIONS, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
  spec: { partitions: PARTITIONS, source: `${name}_in`, sink: `${name}_out`, workMs: 1 },
});
/** Node 4 is the broken build; nodes 1-3 carry the consumer of the acceptance case, nodes 3 and 4 the broken case's. */
const BROKEN_NODE = 4;
const labelsOf = (index: number): Record<string, string> => ({
  zone: 'h', build: index === BROKEN_NODE ? 'broken' : 'ok', ...(index >= 3 ? { pair: 'x' } : {}),
});

let hs: HostStack;

beforeAll(async () => {
  // Root and iproute2/iptables are required: a machine without them fails here, loudly.
  const missing = hostNetworkSupportMissing();
  if (missing) throw new Error(`the multi-host tests need network namespaces: ${missing}`);
  hs = await startHostStack({
    nodes: 4, leaseTtlMs: LEASE, labels: labelsOf,
    agentEnv: (index) => (index === BROKEN_NODE ? { SCALEGATE_TEST_BREAK: 'owner-fence-unchecked' } : {}),
  });
});
afterAll(async () => {
  await hs?.stop();
});

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

  await defineWorkload(stack, 'orders', consumer('orders', 3, { build: 'ok' }), 3);
  const load = runLoad({ databaseUrl: stack.databaseUrl, source: 'orders_in', partitions: PARTITIONS, ratePerSec: 200, count: 2400 });
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

  const { written } = await load;
  const audit = await stack.waitFor('the sink caught up', async () => {
    const a = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'orders_in', sink: 'orders_out' });
    return a.sinkCount >= written ? a : null;
  }, 120_000);
  expect(audit).toMatchObject({ sourceCount: written, sinkCount: written, missing: 0, duplicates: 0, extra: 0 });
  expect(await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: 'orders' })).toEqual([]);
  // No partition written by two live owners: in offset order, every run of sink rows follows its
  // writer's acquisition, so nothing the stranded task wrote after the takeover reached the sink.
  expect(await sinkWriterInterleavings(stack.db, { workload: 'orders', sink: 'orders_out' })).toEqual([]);
});

test('the checker fails the broken build (owner fence unchecked) under the same partition: the stranded owner writes beside the new one', async () => {
  const { stack, network } = hs;
  const retired = await stack.api('DELETE', '/v1/workloads/orders');
  expect(retired.status).toBeLessThan(300);
  await defineWorkload(stack, 'broken', consumer('broken', 2, { pair: 'x' }), 2);
  const victim = `h${BROKEN_NODE}`;
  const lost = (await tasksOf(stack, 'broken')).find((t) => t.runtimeId === victim)!;
  const load = runLoad({ databaseUrl: stack.databaseUrl, source: 'broken_in', partitions: PARTITIONS, ratePerSec: 200, count: 1600 });
  await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'broken_in', sink: 'broken_out' })).sinkCount > 100);

  const cutAt = Date.now();
  network.cut(hs.hosts[victim]!, { kind: 'control-plane', apiPort: hs.apiPort, agentPort: hs.agentPort(victim) });
  try {
    await recoveryAfter(victim, cutAt);
    // The new owner has written in the victim's partitions, and the victim, unfenced, wrote after it.
    await stack.waitFor('two live owners seen by the sink', async () => {
      const found = await sinkWriterInterleavings(stack.db, { workload: 'broken', sink: 'broken_out' });
      return found.some((f) => f.task === lost.taskId) ? found : null;
    });
  } finally {
    network.heal(hs.hosts[victim]!);
  }
  const found = await sinkWriterInterleavings(stack.db, { workload: 'broken', sink: 'broken_out' });
  expect(found).toContainEqual(expect.objectContaining({ workload: 'broken', task: lost.taskId, partition: expect.any(Number) }));
  expect(agentEvents(victim, 'consumer.write-refused').filter((e) => e.taskId === lost.taskId)).toEqual([]);
  console.log(JSON.stringify({ brokenBuild: 'owner-fence-unchecked', interleavings: found.length, partitions: [...new Set(found.map((f) => f.partition))] }));
  await load;
});
