// scaleIn on the real stack, under load: drain, hand-over from committed offsets, proof that the
// removed own nothing, idle-first victim choice, consolidation (and its rollback), and a drain
// past its deadline ending in the replan.
import { Pool } from 'pg';
import { runLoad } from '../../store/source-feed';
import { ownershipOverlaps, verifyExactlyOnce } from '../../store/sink-audit';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload, tasksOf as sharedTasksOf, scaleAndWait } from '../../harness/workloads';
import { setTimeout as sleep } from 'node:timers/promises';

/** 'slow' works 300 ms a record: a batch of 20 takes 6 s, under the driver's cap (MAX_WORK_SLEEP_MS, 10 s). */
// 500 ms a record: a batch of 20 works 10 s. At 300 ms (6 s) a full run once let the batch end
// before the drain arrived (the scale-in's steps before its drain, under load), and the drain met
// nothing in flight: completed, not compensated.
const SLOW_WORK_MS = 500;

let stack: Stack;
const CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const consumer = (name: string, replicas: number, partitions: number, workMs = 1) => ({
  kind: 'consumer', replicas, contract: { ...CONTRACT, partitions },
  spec: { partitions, source: `${name}_in`, sink: `${name}_out`, workMs },
});

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: 3000,
    agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `in-${zone}`, labels: { zone } })),
  });
});
afterAll(async () => {
  await stack?.stop();
});

const tasksOf = (workload: string) => sharedTasksOf(stack, workload);
const define = (name: string, body: unknown, ready: number) => defineWorkload(stack, name, body, ready);
const scale = (name: string, body: Record<string, unknown>) => scaleAndWait(stack, name, body, 'scaleIn');
const placementOf = async (name: string) => (await stack.api('GET', `/v1/workloads/${name}`, { role: 'viewer' })).body.placement;

describe('consumer 4 → 2 under load', () => {
  it('loses and duplicates nothing, keeps order, never has two owners of a partition, and the removed own nothing', async () => {
    await define('orders', consumer('orders', 4, 8), 4);
    const before = await placementOf('orders');
    const databaseUrl = stack.databaseUrl;
    // The load runs until the scale-in has ended (its count only bounds a failed run): the audit
    // below counts what it wrote, and a load still writing at the end proves it spanned the operation.
    const LOAD_BOUND = 40_000;
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'orders_in', partitions: 8, ratePerSec: 400, count: LOAD_BOUND, signal: stopLoad.signal });
    const operation = await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: 'orders_in', sink: 'orders_out' })).sinkCount > 300)
      .then(() => scale('orders', { replicas: 2, drainTimeoutMs: 30_000 }))
      .finally(() => stopLoad.abort());
    const written = await load;
    expect(written.written).toBeLessThan(LOAD_BOUND); // still writing when the scale-in ended
    expect(operation).toMatchObject({ status: 'completed', kind: 'scaleIn' });
    const victims = operation.scaleIn.victims as { taskId: string; runtimeId: string; partitions: number[] }[];
    expect(victims).toHaveLength(2);
    // every partition the victims owned was handed over, each exactly once
    expect(operation.scaleIn.moves.map((m: any) => Number(m.unit)).sort()).toEqual(victims.flatMap((v) => v.partitions).sort());
    // drain receipts: nothing in flight, partitions released
    for (const receipt of operation.scaleIn.receipts) expect(receipt.receipt).toMatchObject({ inFlight: 0 });
    expect(operation.scaleIn.confirmation).toMatchObject({ assignmentsLeft: 0, ownedPartitions: 0 });

    const after = await placementOf('orders');
    expect(after.assignments.map((a: any) => a.index).sort()).toEqual([0, 1]);
    expect(after.assignments.flatMap((a: any) => a.partitions).sort((a: number, b: number) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const victimRuntimes = new Set(victims.map((v) => v.runtimeId));
    expect(after.assignments.filter((a: any) => victimRuntimes.has(a.runtimeId))).toEqual([]);
    // survivors kept their task ids: they were not restarted
    const survivorIds = after.assignments.map((a: any) => a.taskId);
    expect(before.assignments.map((a: any) => a.taskId)).toEqual(expect.arrayContaining(survivorIds));
    for (const runtimeId of victimRuntimes) {
      const onVictim = (await stack.agentApi(runtimeId, 'GET', '/v1/tasks')).body.tasks.filter((t: any) => t.workload === 'orders');
      expect(onVictim).toEqual([]);
    }

    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl, source: 'orders_in', sink: 'orders_out' });
      return a.sinkCount >= written.written ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: written.written, sinkCount: written.written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'orders' })).toEqual([]);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=orders&kind=scale-in', { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'completed', fromReplicas: 4, toReplicas: 2 });
  });
});

describe('victim choice', () => {
  it('removes the idle replica, not the oldest or the busiest', async () => {
    await define('quiet', consumer('quiet', 3, 3), 3);
    const { assignments } = await placementOf('quiet');
    const idle = assignments.find((a: any) => a.index === 1);
    const busyPartitions = assignments.filter((a: any) => a.index !== 1).flatMap((a: any) => a.partitions);
    // Traffic only on the partitions of replicas 0 and 2 (plain SQL, per the consumer's data contract).
    const pool = new Pool({ connectionString: stack.databaseUrl, max: 2 });
    let stop = false;
    const feeder = (async () => {
      const next: Record<number, number> = {};
      while (!stop) {
        for (const p of busyPartitions) {
          next[p] = (next[p] ?? -1) + 1;
          await pool.query(`insert into quiet_in (partition, "offset", key, payload) values ($1, $2, $3, '{}')`, [p, next[p], `k${next[p]}`]);
        }
        await sleep(20);
      }
    })();
    try {
      await stack.waitFor('the busy replicas report a rate', async () => {
        const tasks = await tasksOf('quiet');
        return tasks.filter((t) => t.taskId !== idle.taskId && t.counts.ratePerSec > 0).length === 2;
      });
      const operation = await scale('quiet', { replicas: 2 });
      expect(operation.status).toBe('completed');
      expect(operation.scaleIn.victims.map((v: any) => v.taskId)).toEqual([idle.taskId]);
      expect(operation.scaleIn.reasons[idle.taskId]).toMatch(/^idle/);
    } finally {
      stop = true;
      await feeder;
      await pool.end();
    }
  });
});

describe('consolidation', () => {
  it('rolls back when a victim\'s partitions do not fit under the per-instance limit: nothing moved, one above target', async () => {
    await define('full', consumer('full', 2, 8), 2);
    const before = await tasksOf('full');
    const operation = await scale('full', { replicas: 1, perInstanceLimit: 4 });
    expect(operation.status).toBe('refused');
    expect(operation.scaleIn.moves).toEqual([]);
    expect(operation.evidenceGap).toMatch(/rolled back/);
    const after = await tasksOf('full');
    expect(after.map((t) => `${t.taskId}/${t.incarnation}/${t.partitions.join(',')}`).sort())
      .toEqual(before.map((t) => `${t.taskId}/${t.incarnation}/${t.partitions.join(',')}`).sort());
    const ledger = (await stack.api('GET', '/v1/ledger?workload=full&kind=scale-in', { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'refused', fromReplicas: 2, toReplicas: 1 });
    expect(ledger[0].reason).toMatch(/nothing moved/);
  });
});

describe('drain deadline', () => {
  it('a drain that passes its deadline → replan → ledger', async () => {
    // Every batch of 'slow' (20 records at 500 ms each) works for 10 s, so a batch stays in flight far
    // longer than a drain takes to travel from the API to the agent.
    await define('slow', consumer('slow', 2, 4, SLOW_WORK_MS), 2);
    const { assignments } = await placementOf('slow');
    // One partition per replica gets 20 records, all in one statement: each replica fetches them in
    // one batch (the batch size is 100), so each replica has exactly one batch and it is in flight.
    const fed: number[] = assignments.map((a: any) => a.partitions[0]);
    expect(new Set(fed).size).toBe(2);
    await stack.db.query(
      `insert into slow_in (partition, "offset", key, payload)
       select p, o, 'k' || o, '{}' from unnest($1::int[]) as p, generate_series(0, 19) as o`,
      [fed],
    );
    // Whichever replica becomes the victim, it has a batch in flight when its drain arrives.
    await stack.waitFor('a batch in flight on both replicas', async () => {
      const tasks = await tasksOf('slow');
      return tasks.length === 2 && tasks.every((t) => t.state === 'ready' && t.counts.inFlight > 0);
    });
    const operation = await scale('slow', { replicas: 1, drainTimeoutMs: 150 });
    expect(operation.status).toBe('compensated');
    expect(operation.compensation.reason).toMatch(/drain-deadline/);
    expect(operation.compensation.reason).toMatch(/drain deadline passed with [1-9]\d* records in flight/);
    const [victim] = operation.scaleIn.victims as { taskId: string }[];
    // The abandoned batch was rolled back: the victim committed nothing to the sink.
    expect((await stack.db.query(`select count(*)::int as n from slow_out where task_id = $1`, [victim.taskId])).rows[0].n).toBe(0);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=slow', { role: 'viewer' })).body.events;
    expect(ledger.map((e: any) => `${e.kind}:${e.outcome}`)).toEqual(expect.arrayContaining(['scale-in:compensated', 'replan:completed']));
    const tasks = (await tasksOf('slow')).filter((t) => t.state !== 'stopped');
    expect(tasks).toHaveLength(1);
    expect(tasks[0].taskId).toMatch(/-g2$/);
    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'slow_in', sink: 'slow_out' });
      return a.sinkCount >= 40 ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: 40, sinkCount: 40, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
  });
});
