// The consumer driver against a real PostgreSQL (its own database on the server the global setup
// started): exactly once while two replicas run, through a drain-and-takeover under load, fencing,
// and the probe. Everything is proved by counting rows; waits poll for conditions with a bounded
// deadline (harness/wait-for.ts). Each test uses its own tables and workload name.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { createConsumerDriver, type ConsumerTaskStatus } from '../../agent/drivers/consumer';
import { ensureConsumerTables } from '../../agent/drivers/consumer-schema';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from '../../agent/drivers/driver';
import { runLoad } from '../../store/source-feed';
import { freePort } from '../../embedded/processes';
import { ownershipOverlaps, verifyExactlyOnce } from '../../store/sink-audit';
import { createTestDatabase } from '../../harness/database';
import { waitFor as pollUntil } from '../../harness/wait-for';

jest.setTimeout(60_000);

let databaseUrl: string;
let pool: Pool;
let tmpDir: string;
const drivers: TaskDriver[] = [];
const events: Array<{ event: string; fields?: Record<string, unknown> }> = [];

const waitFor = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 20_000) => pollUntil(what, probe, { timeoutMs, intervalMs: 50 });

function newDriver(runtimeId: string, url = databaseUrl, options: { drainSkipsCommit?: boolean } = {}): TaskDriver {
  const ctx: DriverContext = {
    runtimeId,
    stateDir: path.join(tmpDir, runtimeId),
    databaseUrl: url,
    log: (event, fields) => events.push({ event, fields }),
  };
  const driver = createConsumerDriver(ctx, { pollMs: 20, batchSize: 50, ...options });
  drivers.push(driver);
  return driver;
}

const statusOf = (handle: TaskHandle) => handle.status() as ConsumerTaskStatus;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(sql, params);
  return rows[0].n;
}

async function offsetsTable(workload: string): Promise<Record<string, { committed: number; owner: string | null }>> {
  const { rows } = await pool.query<{ partition: number; committed_offset: string; owner_task: string | null }>(
    'select partition, committed_offset, owner_task from scalegate_consumer_offsets where workload = $1 order by partition',
    [workload],
  );
  return Object.fromEntries(rows.map((r) => [String(r.partition), { committed: Number(r.committed_offset), owner: r.owner_task }]));
}

beforeAll(async () => {
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-consumer-'));
  databaseUrl = (await createTestDatabase('c')).databaseUrl;
  pool = new Pool({ connectionString: databaseUrl, max: 2 });
});

afterAll(async () => {
  await Promise.all(drivers.map((d) => d.close?.()));
  await pool?.end();
  fs.rmSync(tmpDir, { recursive: true, force: true });
});

describe('consumer driver', () => {
  test('two replicas, then a drain and takeover under load: every record in the sink exactly once, in order', async () => {
    const spec = { partitions: 8, source: 'orders', sink: 'orders_out', workMs: 1 };
    const startFor = (taskId: string, index: number, partitions: number[]): TaskStart => ({
      taskId, workload: 'orders', kind: 'consumer', index, generation: 1, placementFence: 1, spec, partitions,
    });
    const replicaA = await newDriver('rt-a').start(startFor('orders-0', 0, range(0, 3)));
    const replicaB = await newDriver('rt-b').start(startFor('orders-1', 1, range(4, 7)));
    await waitFor('both replicas ready', () => statusOf(replicaA).state === 'ready' && statusOf(replicaB).state === 'ready');
    expect(statusOf(replicaA).partitions).toEqual([0, 1, 2, 3]);
    expect(statusOf(replicaB).partitions).toEqual([4, 5, 6, 7]);

    // Phase 1: 2,000 records while both replicas consume.
    const firstLoad = await runLoad({ databaseUrl, source: 'orders', partitions: 8, ratePerSec: 1000, count: 2000 });
    expect(firstLoad.written).toBe(2000);
    expect(Object.values(firstLoad.perPartition).reduce((a, b) => a + b, 0)).toBe(2000);
    await waitFor('the first 2,000 records in the sink', async () => (await count('select count(*)::int as n from orders_out')) === 2000);
    const afterFirst = await verifyExactlyOnce({ databaseUrl, source: 'orders', sink: 'orders_out' });
    expect(afterFirst).toMatchObject({ sourceCount: 2000, sinkCount: 2000, missing: 0, duplicates: 0, extra: 0, orderViolations: 0, keyMismatches: 0 });
    // Each replica processed exactly its own partitions' records.
    const sinkByTask = async () =>
      Object.fromEntries(
        (await pool.query<{ task_id: string; n: number }>('select task_id, count(*)::int as n from orders_out group by task_id')).rows.map((r) => [r.task_id, r.n]),
      );
    const partitionsTotal = (from: number, to: number) => range(from, to).reduce((sum, p) => sum + (firstLoad.perPartition[p] ?? 0), 0);
    expect(await sinkByTask()).toEqual({ 'orders-0': partitionsTotal(0, 3), 'orders-1': partitionsTotal(4, 7) });
    expect(statusOf(replicaA).counts.processed + statusOf(replicaB).counts.processed).toBe(2000);

    // Phase 2: another 2,000 records; mid-stream, drain B and hand its partitions to A.
    const secondLoad = runLoad({ databaseUrl, source: 'orders', partitions: 8, ratePerSec: 800, count: 2000 });
    await waitFor('B processing the second load', () => statusOf(replicaB).counts.processed > partitionsTotal(4, 7) + 50);
    const receipt = await replicaB.drain({ drainTimeoutMs: 15_000 });
    expect(receipt).toMatchObject({ taskId: 'orders-1', incarnation: replicaB.incarnation, inFlight: 0, releasedPartitions: [4, 5, 6, 7] });
    expect(statusOf(replicaB).state).toBe('stopped');
    // Nobody owns 4..7 now, so the offsets table holds still: the receipt must match it exactly.
    const atRelease = await offsetsTable('orders');
    for (const p of range(4, 7)) {
      expect(atRelease[p]).toEqual({ committed: receipt.committedOffsets![p], owner: null });
    }
    await replicaA.update!(startFor('orders-0', 0, range(0, 7)));
    await waitFor('A owning all 8 partitions', () => statusOf(replicaA).state === 'ready' && statusOf(replicaA).partitions?.length === 8);

    const second = await secondLoad;
    expect(second.written).toBe(2000);
    await waitFor('the sink caught up and A reports no backlog', async () =>
      statusOf(replicaA).backlog === 0 && (await count('select count(*)::int as n from orders_out')) === 4000,
    );
    const afterTakeover = await verifyExactlyOnce({ databaseUrl, source: 'orders', sink: 'orders_out' });
    expect(afterTakeover).toMatchObject({ sourceCount: 4000, sinkCount: 4000, missing: 0, duplicates: 0, extra: 0, orderViolations: 0, keyMismatches: 0 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'orders' })).toEqual([]);

    // The handoff point per partition: B wrote exactly the offsets up to its receipt, A everything after.
    const { rows: handoff } = await pool.query<{ partition: number; b_max: string | null; a_min: string | null }>(
      `select partition,
              max("offset") filter (where task_id = 'orders-1') as b_max,
              min("offset") filter (where task_id = 'orders-0' and partition >= 4) as a_min
         from orders_out where partition >= 4 group by partition order by partition`,
    );
    for (const row of handoff) {
      expect(Number(row.b_max)).toBe(receipt.committedOffsets![row.partition]);
      if (row.a_min !== null) expect(Number(row.a_min)).toBe(receipt.committedOffsets![row.partition] + 1);
    }
    // Counting across incarnations: every sink row is attributed to one of the two, and the counters agree.
    expect(statusOf(replicaA).counts.processed + statusOf(replicaB).counts.processed).toBe(4000);
    const finalStatus = statusOf(replicaA);
    expect(finalStatus.errors).toBe(0);
    expect(finalStatus.latencyMs?.p95).toBeGreaterThanOrEqual(finalStatus.latencyMs!.p50);
    expect(finalStatus.inFlight).toBe(0);

    const finalReceipt = await replicaA.drain({ drainTimeoutMs: 15_000 });
    expect(finalReceipt.releasedPartitions).toEqual(range(0, 7));
    const atEnd = await offsetsTable('orders');
    for (const p of range(0, 7)) {
      expect(atEnd[p]).toEqual({ committed: finalReceipt.committedOffsets![p], owner: null });
      // Last offset committed = last offset written (offsets start at 0 and are contiguous).
      expect(finalReceipt.committedOffsets![p]).toBe(firstLoad.perPartition[p] + second.perPartition[p] - 1);
    }
  });

  // The chaos checker's consumer check (issue 20: "the checker can fail") against the broken build
  // SCALEGATE_TEST_BREAK=drain-skips-commit: the drained task's last batch reaches the sink but not
  // its offset, so the survivor reads those records again, its sink insert is refused as a
  // duplicate, and the audit counts the records it can no longer deliver as missing.
  test('the broken build "drain skips its commit" is caught: the sink falls short of the source', async () => {
    const spec = { partitions: 2, source: 'broken_in', sink: 'broken_out', workMs: 1 };
    const startFor = (taskId: string, partitions: number[]): TaskStart => ({
      taskId, workload: 'broken', kind: 'consumer', index: 0, generation: 1, placementFence: 1, spec, partitions,
    });
    await runLoad({ databaseUrl, source: 'broken_in', partitions: 2, ratePerSec: 5000, count: 400 });
    const victim = await newDriver('rt-broken-a', databaseUrl, { drainSkipsCommit: true }).start(startFor('broken-0', [0, 1]));
    await waitFor('the victim ready', () => statusOf(victim).state === 'ready');
    await victim.drain({ drainTimeoutMs: 15_000 });
    const survivor = await newDriver('rt-broken-b').start(startFor('broken-1', [0, 1]));
    await waitFor('the survivor refused by the sink as a duplicate', () => statusOf(survivor).errors > 0);
    expect(statusOf(survivor).detail).toMatch(/duplicate key/);
    const audit = await verifyExactlyOnce({ databaseUrl, source: 'broken_in', sink: 'broken_out' });
    expect(audit.sourceCount).toBe(400);
    expect(audit.missing).toBeGreaterThan(0);
    expect(audit.sinkCount).toBeLessThan(400);
  });

  test('fencing: a lower fence cannot take a partition held by a higher fence; a higher one can', async () => {
    const spec = { partitions: 2, source: 'fenced_in', sink: 'fenced_out', workMs: 0 };
    const startFor = (taskId: string, placementFence: number): TaskStart => ({
      taskId, workload: 'fenced', kind: 'consumer', index: 0, generation: 1, placementFence, spec, partitions: [0],
    });
    const holder = await newDriver('rt-fence-a').start(startFor('fenced-holder', 5));
    await waitFor('the fence-5 holder ready', () => statusOf(holder).state === 'ready');
    const stale = await newDriver('rt-fence-b').start(startFor('fenced-stale', 3));
    // Proof by counting: the stale task tried and was refused several times, and still owns nothing.
    await waitFor('the fence-3 task refused repeatedly', () => statusOf(stale).counts.acquireDenied >= 3);
    expect(statusOf(stale).state).toBe('starting');
    expect(statusOf(stale).partitions).toEqual([]);
    expect(statusOf(stale).detail).toContain('held by fenced-holder at fence 5');
    expect(await offsetsTable('fenced')).toEqual({ '0': { committed: -1, owner: 'fenced-holder' } });

    await runLoad({ databaseUrl, source: 'fenced_in', partitions: 1, ratePerSec: 5000, count: 100 });
    await waitFor('the holder processing all 100', () => statusOf(holder).counts.processed === 100);
    expect(await count(`select count(*)::int as n from fenced_out where task_id <> 'fenced-holder'`)).toBe(0);

    // A newer placement (fence 7) takes over from the fence-5 holder, which then stops processing p0.
    const newer = await newDriver('rt-fence-c').start(startFor('fenced-newer', 7));
    await waitFor('the fence-7 task owning p0', () => statusOf(newer).state === 'ready');
    await runLoad({ databaseUrl, source: 'fenced_in', partitions: 1, ratePerSec: 5000, count: 100 });
    await waitFor('the newer task processing the next 100', () => statusOf(newer).counts.processed === 100);
    await waitFor('the old holder noticing it lost p0', () => statusOf(holder).partitions?.length === 0);
    expect(statusOf(holder).counts.processed).toBe(100);
    expect(statusOf(stale).partitions).toEqual([]);
    const audit = await verifyExactlyOnce({ databaseUrl, source: 'fenced_in', sink: 'fenced_out' });
    expect(audit).toMatchObject({ sourceCount: 200, sinkCount: 200, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
    // The takeover is logged as the old holder's release followed by the new acquire: no overlap.
    expect(await ownershipOverlaps({ databaseUrl, workload: 'fenced' })).toEqual([]);

    // The fenced-out holder has nothing to release; the newer one releases p0 at offset 199.
    expect((await holder.drain({ drainTimeoutMs: 5_000 })).releasedPartitions).toEqual([]);
    expect((await newer.drain({ drainTimeoutMs: 5_000 })).committedOffsets).toEqual({ '0': 199 });
    // Now free, the stale task may take it (the fence guards against holders, not free partitions).
    await waitFor('the stale task taking the released partition', () => statusOf(stale).state === 'ready');
    await stale.drain({ drainTimeoutMs: 5_000 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'fenced' })).toEqual([]);
  });

  test('update: partitions taken away are released, and a replica waiting at the same fence takes them', async () => {
    const spec = { partitions: 4, source: 'rebalance_in', sink: 'rebalance_out', workMs: 0 };
    const startFor = (taskId: string, partitions: number[]): TaskStart => ({
      taskId, workload: 'rebalance', kind: 'consumer', index: 0, generation: 1, placementFence: 2, spec, partitions,
    });
    const first = await newDriver('rt-rb-a').start(startFor('rebalance-0', range(0, 3)));
    await waitFor('the first replica owning all 4', () => statusOf(first).state === 'ready');
    // Same fence, so the second replica must wait for the first to let go (no overlap).
    const second = await newDriver('rt-rb-b').start(startFor('rebalance-1', [2, 3]));
    await waitFor('the second replica refused while 2,3 are held', () => statusOf(second).counts.acquireDenied >= 2);
    expect(statusOf(second).state).toBe('starting');

    const load = runLoad({ databaseUrl, source: 'rebalance_in', partitions: 4, ratePerSec: 1000, count: 1000 });
    await waitFor('the first replica busy', () => statusOf(first).counts.processed > 100);
    await first.update!(startFor('rebalance-0', [0, 1]));
    // update resolves only once 2 and 3 are released.
    expect(statusOf(first).partitions).toEqual([0, 1]);
    expect(statusOf(first).counts.released).toBe(2);
    await waitFor('the second replica owning 2,3', () => statusOf(second).state === 'ready');
    expect(statusOf(second).partitions).toEqual([2, 3]);

    expect((await load).written).toBe(1000);
    await waitFor('all 1,000 in the sink', async () => (await count('select count(*)::int as n from rebalance_out')) === 1000);
    expect(await verifyExactlyOnce({ databaseUrl, source: 'rebalance_in', sink: 'rebalance_out' })).toMatchObject({
      sourceCount: 1000, sinkCount: 1000, missing: 0, duplicates: 0, extra: 0, orderViolations: 0,
    });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'rebalance' })).toEqual([]);
    expect(statusOf(first).counts.processed + statusOf(second).counts.processed).toBe(1000);
    await Promise.all([first.drain({ drainTimeoutMs: 5_000 }), second.drain({ drainTimeoutMs: 5_000 })]);
  });

  test('drain deadline: a batch still working when the deadline passes is rolled back and the drain rejects', async () => {
    // 50 records × 100 ms of simulated work = one batch of 5 s: far longer than the 100 ms deadline.
    const spec = { partitions: 1, source: 'slow_in', sink: 'slow_out', workMs: 100 };
    await runLoad({ databaseUrl, source: 'slow_in', partitions: 1, ratePerSec: 5000, count: 50 });
    const task = await newDriver('rt-slow').start({
      taskId: 'slow-0', workload: 'slow', kind: 'consumer', index: 0, generation: 1, placementFence: 1, spec, partitions: [0],
    });
    await waitFor('a batch in flight', () => statusOf(task).inFlight === 50);
    const drained = task.drain({ drainTimeoutMs: 100 });
    await expect(drained).rejects.toMatchObject({ code: 'drain-deadline' });
    await expect(drained).rejects.toThrow(/50 records in flight/);
    // The abandoned batch rolls back, then the partition is released: nothing committed, nothing in the sink.
    await waitFor('the task stopped', () => statusOf(task).state === 'stopped');
    expect(await offsetsTable('slow')).toEqual({ '0': { committed: -1, owner: null } });
    expect(await count('select count(*)::int as n from slow_out')).toBe(0);
    // A later drain call reports the completed drain.
    expect(await task.drain({ drainTimeoutMs: 1_000 })).toMatchObject({ inFlight: 0, releasedPartitions: [0], committedOffsets: { '0': -1 } });
  });

  test('a duplicate sink row fails the batch loudly instead of being skipped', async () => {
    const spec = { partitions: 1, source: 'dup_in', sink: 'dup_out', workMs: 0 };
    await runLoad({ databaseUrl, source: 'dup_in', partitions: 1, ratePerSec: 5000, count: 10 });
    await pool.query(`create table if not exists dup_out (partition int, "offset" bigint, key text, payload jsonb, task_id text,
                       incarnation text, processed_at timestamptz default now(), primary key (partition, "offset"))`);
    await pool.query(`insert into dup_out (partition, "offset", key, payload, task_id) values (0, 4, 'planted', '{}', 'someone-else')`);
    const task = await newDriver('rt-dup').start({
      taskId: 'dup-0', workload: 'dup', kind: 'consumer', index: 0, generation: 1, placementFence: 1, spec, partitions: [0],
    });
    await waitFor('the task failing on the planted duplicate', () => statusOf(task).state === 'failed', 30_000);
    expect(statusOf(task).detail).toMatch(/duplicate key/);
    expect(await offsetsTable('dup')).toEqual({ '0': { committed: -1, owner: 'dup-0' } });
    expect(await count(`select count(*)::int as n from dup_out where task_id = 'dup-0'`)).toBe(0);
    await task.drain({ drainTimeoutMs: 5_000 });
  });

  test('probe: reachable tables are ok; a bad database URL reports ok:false with the error', async () => {
    const spec = { partitions: 8, source: 'probe_in', sink: 'not_yet_created', workMs: 1 };
    await ensureConsumerTables(pool, spec.source); // the source exists, the sink does not
    const good = await newDriver('rt-probe').probe!(spec);
    expect(good.source).toMatchObject({ ok: true });
    expect(good.source.detail).toContain('exists');
    expect(good.destination).toMatchObject({ ok: true });
    expect(good.destination.detail).toContain('can be created');

    const closedPort = await freePort(); // bound and closed again: nothing listens there
    const bad = await newDriver('rt-bad', `postgres://nobody:wrong@127.0.0.1:${closedPort}/nowhere`).probe!(spec);
    expect(bad.source.ok).toBe(false);
    expect(bad.destination.ok).toBe(false);
    expect(bad.source.detail).toMatch(/ECONNREFUSED|connect/);
  });

  test('start refuses an invalid spec and partitions outside the spec', async () => {
    const driver = newDriver('rt-invalid');
    const base: TaskStart = {
      taskId: 'bad-0', workload: 'bad', kind: 'consumer', index: 0, generation: 1, placementFence: 1,
      spec: { partitions: 2, source: 'orders', sink: 'orders_out' }, partitions: [0],
    };
    await expect(driver.start({ ...base, spec: { partitions: 2, source: 'Robert"; drop table x', sink: 'o' } })).rejects.toMatchObject({ code: 'invalid-spec' });
    await expect(driver.start({ ...base, partitions: [2] })).rejects.toBeInstanceOf(DriverError);
  });
});
