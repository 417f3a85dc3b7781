// Worker recovery with static stability on the real stack (DESIGN.md §3 "Static stability", §4.4):
// a control-plane outage stops nothing, a lost node's work moves once (consumers from the committed
// offsets under a new owner fence, exactly once), a brief heartbeat pause or a mass expiry recovers
// nothing automatically, and an operator's recover still works. Short leases, consumers under load.
import path from 'node:path';
import { OWNERSHIP_LOG_TABLE } from '../../protocol/consumer-tables';
import { runLoad } from '../../store/source-feed';
import { ownershipOverlaps, verifyExactlyOnce } from '../../store/sink-audit';
import { OperationStatusSchema } from '../../protocol';
import type { RecoveryStatus } from '../../workflows/recover-runtime';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, retireAndWait } from '../../harness/workloads';
import { setTimeout as sleep } from 'node:timers/promises';

const LEASE = 2000;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const ZONE_B = ['rc-b1', 'rc-b2', 'rc-b3'];
const ZONE_C = ['rc-c1', 'rc-c2'];
const SOLO = { id: 'rc-d1', labels: { zone: 'd', node: 'solo' } };

const CONSUMER_CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const consumer = (name: string, replicas: number, partitions: number, selector: Record<string, string>) => ({
  kind: 'consumer', replicas, selector, contract: { ...CONSUMER_CONTRACT, partitions },
  spec: { partitions, source: `${name}_in`, sink: `${name}_out`, workMs: 1 },
});
const service = (replicas: number, selector: Record<string, string>) => ({
  kind: 'service', replicas, selector, contract: SERVICE_CONTRACT,
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 1000 },
});

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: LEASE,
    agents: [
      ...ZONE_B.map((id) => ({ id, labels: { zone: 'b' }, slots: 8 })),
      ...ZONE_C.map((id) => ({ id, labels: { zone: 'c' }, slots: 8 })),
      SOLO,
    ],
  });
});
afterAll(async () => {
  await stack?.stop();
});

// ---------------------------------------------------------------------------------------------
// helpers

const state = async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
const runtimeOf = async (id: string) => (await state()).runtimes.find((r: { id: string }) => r.id === id);
const placementOf = async (name: string) => (await stack.api('GET', `/v1/workloads/${name}`, { role: 'viewer' })).body.placement;

/** What agent `id` runs, read with the credential the control plane holds; [] when it does not answer (frozen, dead). */
async function agentTasks(id: string): Promise<any[]> {
  try {
    const credential = await stack.credentialOf(id);
    const response = await fetch(`${stack.agents[id].url}/v1/tasks`, { headers: { authorization: `Bearer ${credential}` }, signal: AbortSignal.timeout(2000) });
    return response.ok ? ((await response.json()) as { tasks: any[] }).tasks : [];
  } catch {
    return [];
  }
}
/** Every task of `workload` on the given agents (default: all), as the agents report them. */
const tasksOf = async (workload: string, ids = Object.keys(stack.agents)) =>
  (await Promise.all(ids.map(async (id) => (await agentTasks(id)).map((t) => ({ ...t, runtimeId: id }))))).flat().filter((t) => t.workload === workload);
const incarnations = async (workloads: string[]) =>
  Object.fromEntries((await Promise.all(workloads.map((w) => tasksOf(w)))).flat().map((t) => [`${t.runtimeId}/${t.taskId}`, `${t.incarnation}/${t.state}`]));

/** The runtimes whose recover:<id> workflow started at or after `since`. */
async function recoveriesSince(since: number): Promise<string[]> {
  const started: string[] = [];
  for (const runtime of (await state()).runtimes as { id: string }[]) {
    const description = await stack.temporal.workflow.getHandle(`recover:${runtime.id}`).describe().catch(() => null);
    if (description && description.startTime.getTime() >= since) started.push(runtime.id);
  }
  return started;
}

/** The recovery of `runtime` that started at or after `since`, once it ended. */
async function recoveryAfter(runtime: string, since: number): Promise<RecoveryStatus> {
  const handle = stack.temporal.workflow.getHandle(`recover:${runtime}`);
  await stack.waitFor(`recover:${runtime} started after the failure and ended`, async () => {
    const d = await handle.describe().catch(() => null);
    return d !== null && d.startTime.getTime() >= since && d.status.name !== 'RUNNING';
  }, 120_000);
  const status = (await handle.result()) as RecoveryStatus;
  // What it answers is the protocol's status of its kind (protocol/operation-status.ts).
  expect(OperationStatusSchema.safeParse(status)).toMatchObject({ success: true, data: { kind: 'recoverRuntime' } });
  return status;
}

/**
 * Waits until the lease sweeper has judged leases (no guard holding it) in passes that began after
 * `instant`: two passes recorded after it, and its phase says it judged.
 */
async function sweptAfter(instant: number): Promise<void> {
  const sweeper = stack.temporal.workflow.getHandle(`lease-sweeper:${stack.taskQueue}`);
  let firstAfter: number | null = null;
  await stack.waitFor(`two lease sweeps judging leases after ${new Date(instant).toISOString()}`, async () => {
    const { rows } = await stack.db.query<{ at: Date }>(`select at from control_plane_liveness where component = 'lease-sweeper'`);
    const at = rows[0]?.at.getTime() ?? 0;
    if (at <= instant) return false;
    firstAfter ??= at;
    if (at <= firstAfter) return false;
    const phase = await sweeper.query<string>('phase').catch(() => '');
    return phase.startsWith('idle');
  }, 120_000);
}

const runtimeEventsSince = async (since: number, type: string) =>
  (await stack.db.query(`select subject, detail, at from events where type = $1 and at >= $2 order by id`, [type, new Date(since)])).rows;

/** Retires the workloads side by side (each is its own retirement, under scale:<name>). */
/** Retires each workload for the tests after (a workload left behind would be recovered with theirs: it was once, and failed the mass-expiry test). */
const retire = async (...names: string[]) => {
  await Promise.all(names.map((name) => retireAndWait(stack, name)));
};

/** The loads a test started; one still running when the test ends (it failed first) is stopped. */
const loadsRunning = new Set<AbortController>();
afterEach(() => {
  for (const running of loadsRunning) running.abort();
  loadsRunning.clear();
});

/**
 * Load on a consumer's source until the test calls stop(): once the operation under test is over,
 * so that the load spans the operation however long it takes, and ends no later. `result` is what
 * it wrote, for the audit.
 */
function startLoad(source: string, partitions: number, ratePerSec: number) {
  const controller = new AbortController();
  loadsRunning.add(controller);
  const result = runLoad({ databaseUrl: stack.databaseUrl, source, partitions, ratePerSec, signal: controller.signal });
  return { result, stop: () => controller.abort() };
}

/** The audit of what an (ended) load wrote, once the sink has caught up with it. */
async function auditAfter(load: Promise<{ written: number }>, name: string) {
  const { written } = await load;
  const audit = await stack.waitFor(`the sink of ${name} caught up`, async () => {
    const a = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: `${name}_in`, sink: `${name}_out` });
    return a.sinkCount >= written ? a : null;
  }, 120_000);
  return { written, audit, overlaps: await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: name }) };
}

const stopOf = (id: string) => stack.agents[id].process;

// ---------------------------------------------------------------------------------------------

describe('a control-plane outage', () => {
  it('the API paused for 3 × the lease: every task keeps its incarnation, nothing is declared LOST, recovered or revoked, and the sink stays exactly-once', async () => {
    await Promise.all([
      defineWorkload(stack, 'steady', consumer('steady', 3, 6, { zone: 'b' }), 3),
      defineWorkload(stack, 'steady-web', service(2, { zone: 'c' }), 2),
    ]);
    const load = startLoad('steady_in', 6, 150);
    await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'steady_in', sink: 'steady_out' })).sinkCount > 150);
    const before = await incarnations(['steady', 'steady-web']);
    expect(Object.keys(before)).toHaveLength(5);
    const fences = Object.fromEntries(((await state()).runtimes as { id: string; fence: number }[]).map((r) => [r.id, r.fence]));

    const api = stack.processes().find((p) => p.name === 'api')!;
    const pausedAt = Date.now();
    api.kill('SIGSTOP');
    try {
      await sleep(3 * LEASE);
    } finally {
      api.kill('SIGCONT');
    }
    const resumedAt = Date.now();
    // Every lease ran out meanwhile; the sweeper waits one lease after the API's return, then judges.
    await sweptAfter(resumedAt + LEASE);

    expect(await incarnations(['steady', 'steady-web'])).toEqual(before);
    expect(await recoveriesSince(pausedAt)).toEqual([]);
    expect(await runtimeEventsSince(pausedAt, 'runtime.lost')).toEqual([]);
    const after = (await state()).runtimes as { id: string; status: string; fence: number }[];
    expect(after.map((r) => [r.id, r.status, r.fence])).toEqual(after.map((r) => [r.id, 'READY', fences[r.id]]));

    // The load ran from before the pause until the sweeper had judged after it: stopped, and what it wrote audited.
    load.stop();
    const { written, audit, overlaps } = await auditAfter(load.result, 'steady');
    expect(audit).toMatchObject({ sourceCount: written, sinkCount: written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
    expect(overlaps).toEqual([]);
    await retire('steady', 'steady-web');
  });

  it('heartbeats that pause for less than the lease start no recovery', async () => {
    await defineWorkload(stack, 'blip', service(2, { zone: 'c' }), 2);
    const host = 'rc-c1';
    const fence = (await runtimeOf(host)).fence;
    const before = await incarnations(['blip']);
    const pausedAt = Date.now();
    stopOf(host).kill('SIGSTOP');
    try {
      await sleep(Math.floor(LEASE / 3));
    } finally {
      stopOf(host).kill('SIGCONT');
    }
    await sweptAfter(Date.now() + LEASE);
    expect(await recoveriesSince(pausedAt)).toEqual([]);
    expect(await runtimeEventsSince(pausedAt, 'runtime.lost')).toEqual([]);
    expect(await runtimeOf(host)).toMatchObject({ status: 'READY', fence, heldAt: null });
    expect(await incarnations(['blip'])).toEqual(before);
    await retire('blip');
  });
});

describe('a lost node', () => {
  it('an agent hosting consumer replicas frozen past its lease: recovered once, its partitions consumed by the others under a new owner fence, revoked on SIGCONT, every record exactly once', async () => {
    await Promise.all([
      defineWorkload(stack, 'orders', consumer('orders', 2, 8, { zone: 'b' }), 2),
      defineWorkload(stack, 'events', consumer('events', 3, 6, { zone: 'b' }), 3),
    ]);
    const orders = await placementOf('orders');
    // The victim hosts a replica of both: `orders` can move to the one zone-b runtime that does not
    // host it; `events` (on every zone-b runtime) hands its partitions to the two survivors.
    const victim: string = orders.assignments[0].runtimeId;
    const spare = ZONE_B.find((id) => !orders.assignments.some((a: any) => a.runtimeId === id))!;
    const lostTasks = (await tasksOf('orders', [victim])).concat(await tasksOf('events', [victim]));
    expect(lostTasks.map((t) => t.workload).sort()).toEqual(['events', 'orders']);
    const lostPartitions = Object.fromEntries(lostTasks.map((t) => [t.workload, t.partitions as number[]]));
    const lostFences = Object.fromEntries(await Promise.all(['orders', 'events'].map(async (w) => [w, (await placementOf(w)).fence])));

    const loads = { orders: startLoad('orders_in', 8, 120), events: startLoad('events_in', 6, 90) };
    await stack.waitFor('load flowing on both', async () => {
      const [o, e] = await Promise.all(['orders', 'events'].map((n) => verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: `${n}_in`, sink: `${n}_out` })));
      return o.sinkCount > 100 && e.sinkCount > 100;
    });

    const killedAt = Date.now();
    stopOf(victim).kill('SIGSTOP');
    let recovery: RecoveryStatus;
    try {
      recovery = await recoveryAfter(victim, killedAt);
      expect(recovery).toMatchObject({ runtime: victim, by: 'lease-sweeper', outcome: 'degraded', lost: { outcome: 'already-lost' } });
      const detectedMs = Date.parse(recovery.timings.lostAt!) - killedAt;
      const convergedMs = Date.parse(recovery.timings.convergedAt!) - killedAt;
      console.log(JSON.stringify({
        recovery: 'consumer agent SIGSTOPped past its lease', leaseTtlMs: LEASE,
        killToDetectedMs: detectedMs, killToConvergedMs: convergedMs,
        detectedToConvergedMs: convergedMs - detectedMs, killToConvergedInLeases: +(convergedMs / LEASE).toFixed(2),
      }));

      const decided = Object.fromEntries(recovery.decisions.map((d) => [d.workload, d]));
      expect(decided.orders.decisions).toEqual([expect.objectContaining({ action: 'moved', to: expect.objectContaining({ runtimeId: spare }), partitions: lostPartitions.orders })]);
      expect(decided.events.decisions).toEqual([expect.objectContaining({ action: 'handed-over', partitions: lostPartitions.events })]);
      expect(decided.events.unplaced).toEqual({ workload: 'events', reason: 'placement-unavailable', missing: 1 });
      expect(recovery.decisions.map((d) => d.applied)).toEqual(['converged', 'converged']);
      // the operation view and the ledger say the same
      const operation = (await stack.api('GET', `/v1/operations/${encodeURIComponent(`recover:${victim}`)}`, { role: 'viewer' })).body;
      expect(operation).toMatchObject({ kind: 'recoverRuntime', status: 'completed', result: { outcome: 'degraded', runtime: victim } });
      const ledger = (await stack.api('GET', '/v1/ledger?kind=recover', { role: 'viewer' })).body.events;
      expect(ledger[0]).toMatchObject({ kind: 'recover', outcome: 'degraded', workflowId: `recover:${victim}`, fromReplicas: 2, toReplicas: 1, inputs: { runtime: victim, by: 'lease-sweeper' } });

      // The victim's partitions are owned and consumed by the others, under a higher fence, while it is still frozen.
      for (const workload of ['orders', 'events']) {
        const owners = (await stack.db.query(
          `select partition, owner_task, owner_fence from scalegate_consumer_offsets where workload = $1 and partition = any($2::int[])`,
          [workload, lostPartitions[workload]],
        )).rows;
        const lost = lostTasks.find((t) => t.workload === workload)!;
        expect(owners).toHaveLength(lostPartitions[workload].length);
        for (const owner of owners) {
          expect(owner.owner_task).not.toBe(lost.taskId);
          expect(Number(owner.owner_fence)).toBeGreaterThan(lostFences[workload]);
        }
        await stack.waitFor(`${workload}: the victim's partitions consumed by the others`, async () => {
          const { rows } = await stack.db.query(
            `select count(*)::int as n from ${workload}_out where partition = any($1::int[]) and incarnation <> $2 and processed_at > $3`,
            [lostPartitions[workload], lost.incarnation, new Date(killedAt)],
          );
          return rows[0].n > 0;
        });
      }
    } finally {
      stopOf(victim).kill('SIGCONT');
    }

    // Back: its heartbeat is refused (stale fence) and revokes what moved; it stops them and rejoins READY.
    await stack.waitFor(`${victim} stopped the revoked tasks`, async () => {
      const running = (await agentTasks(victim)).filter((t) => t.state !== 'stopped');
      return lostTasks.every((lost) => !running.some((t) => t.incarnation === lost.incarnation));
    });
    await stack.waitFor(`${victim} READY again`, async () => {
      const r = await runtimeOf(victim);
      return r.status === 'READY' && r.fence > recovery.lost!.fence;
    });
    // The loads ran from before the freeze, through the takeover, until the victim was back: stopped, and what they wrote audited.
    for (const load of Object.values(loads)) load.stop();

    // Every record exactly once, no moment with two owners of a partition, and nothing the lost
    // owner committed after the takeover (its late commits were refused by the owner fence).
    for (const workload of ['orders', 'events'] as const) {
      const { written, audit, overlaps } = await auditAfter(loads[workload].result, workload);
      expect(audit).toMatchObject({ sourceCount: written, sinkCount: written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
      expect(overlaps).toEqual([]);
      const lost = lostTasks.find((t) => t.workload === workload)!;
      const { rows } = await stack.db.query(
        `select count(*)::int as n from ${workload}_out
          where incarnation = $1
            and processed_at > (select min(at) from ${OWNERSHIP_LOG_TABLE}
                                 where workload = $2 and event = 'acquire' and partition = any($3::int[]) and incarnation <> $1 and fence > $4)`,
        [lost.incarnation, workload, lostPartitions[workload], lostFences[workload]],
      );
      expect(rows[0].n).toBe(0);
    }
    await retire('orders', 'events');
  });

  it('an agent killed and kept down: its service replica runs elsewhere; with no eligible runtime the workload is unplaced, and placed when a matching runtime joins', async () => {
    await Promise.all([
      defineWorkload(stack, 'web', service(1, { zone: 'c' }), 1),
      defineWorkload(stack, 'solo', service(1, { node: 'solo' }), 1),
    ]);
    const webHost: string = (await placementOf('web')).assignments[0].runtimeId;
    const webOther = ZONE_C.find((id) => id !== webHost)!;
    // The task processes outlive a SIGKILLed agent: their pids, to end them once the test is over.
    const pids: number[] = [];
    for (const t of [...(await tasksOf('web')), ...(await tasksOf('solo'))]) {
      const answer = (await (await fetch(`http://127.0.0.1:${t.ports.public}/`)).json()) as { pid: number };
      pids.push(answer.pid);
    }

    const killedAt = Date.now();
    for (const id of [webHost, SOLO.id]) stopOf(id).kill('SIGKILL');
    await Promise.all([webHost, SOLO.id].map((id) => stopOf(id).exited));
    try {
      const web = await recoveryAfter(webHost, killedAt);
      expect(web.outcome).toBe('completed');
      const [replaced] = web.decisions[0].decisions;
      expect(replaced).toMatchObject({ action: 'replaced', to: { runtimeId: webOther } });
      await stack.waitFor('a new web task ready on the surviving runtime', async () =>
        (await tasksOf('web', [webOther])).some((t) => t.taskId === replaced.to!.taskId && t.state === 'ready'));

      const solo = await recoveryAfter(SOLO.id, killedAt);
      expect(solo.outcome).toBe('degraded');
      expect(solo.decisions[0].decisions[0]).toMatchObject({ action: 'unplaced' });
      const degraded = await state();
      expect(degraded.unplaced).toContainEqual(expect.objectContaining({ workload: 'solo', reason: 'placement-unavailable', missing: 1 }));
      expect(degraded.workloads.find((w: any) => w.name === 'solo')).toMatchObject({ status: 'degraded', placement: { assignments: [] } });

      // A matching runtime joins: the reconcile loop places the shortfall there.
      await stack.startAgent({ id: 'rc-d2', labels: { zone: 'd', node: 'solo' } });
      await stack.waitFor('solo ready on rc-d2', async () => (await tasksOf('solo', ['rc-d2'])).some((t) => t.state === 'ready'));
      await stack.waitFor('solo placed, no longer unplaced', async () => {
        const s = await state();
        return !s.unplaced.some((u: any) => u.workload === 'solo') && s.workloads.find((w: any) => w.name === 'solo')?.status === 'placed';
      });
    } finally {
      // The fleet as the other tests expect it: the killed agents back (they register anew), no stray process.
      await Promise.all([stack.startAgent({ id: webHost, labels: { zone: 'c' }, slots: 8 }), stack.startAgent(SOLO)]);
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await retire('web', 'solo');
  });
});

describe('a mass expiry', () => {
  it('more than half of a zone expiring at once is a mass-expiry event and recovers nothing; an operator\'s recover still works', async () => {
    await defineWorkload(stack, 'mass-web', service(1, { zone: 'b' }), 1);
    const host: string = (await placementOf('mass-web')).assignments[0].runtimeId;
    const [other, fresh] = ZONE_B.filter((id) => id !== host);
    const otherFence = (await runtimeOf(other)).fence;

    const stoppedAt = Date.now();
    for (const id of [host, other]) stopOf(id).kill('SIGSTOP');
    try {
      const [event] = await stack.waitFor('a mass-expiry event for zone b', async () => {
        const events = await runtimeEventsSince(stoppedAt, 'mass-expiry');
        return events.length ? events : null;
      });
      expect(event.subject).toBe('zone:b');
      expect(event.detail).toMatchObject({ zone: 'b', population: 3, held: [host, other].sort() });
      await sweptAfter(Date.now());
      expect(await recoveriesSince(stoppedAt)).toEqual([]);
      for (const id of [host, other]) expect(await runtimeOf(id)).toMatchObject({ status: 'READY', heldAt: expect.any(String) });
      expect((await state()).runtimeEvents).toContainEqual(expect.objectContaining({ type: 'mass-expiry', subject: 'zone:b' }));

      // An operator's recover still works: the held runtime is declared LOST and its replica moves to the fresh one.
      const started = await stack.api('POST', `/v1/runtimes/${host}/recover`);
      expect(started).toMatchObject({ status: 202, body: { workflowId: `recover:${host}`, runId: expect.any(String), kind: 'recoverRuntime', uiUrl: expect.stringContaining(encodeURIComponent(`recover:${host}`)) } });
      const result = (await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result()) as RecoveryStatus;
      // Only this test's workload: an earlier test's workload left on zone b would be recovered too,
      // onto the frozen runtime (its retirement, refused 409 while the reconcile loop held it, was once skipped).
      expect(result.decisions.map((d) => d.workload)).toEqual(['mass-web']);
      expect(result).toMatchObject({ outcome: 'completed', by: 'operator', lost: { outcome: 'declared' } });
      expect(result.decisions[0].decisions[0]).toMatchObject({ action: 'replaced', to: { runtimeId: fresh } });
      expect((await runtimeOf(host)).status).toBe('LOST');
      await stack.waitFor('mass-web ready on the fresh runtime', async () => (await tasksOf('mass-web', [fresh])).some((t) => t.state === 'ready'));
      expect(await recoveriesSince(stoppedAt)).toEqual([host]); // the operator's, and no other
    } finally {
      for (const id of [host, other]) stopOf(id).kill('SIGCONT');
    }
    // Both come back: the recovered one registers anew; the held one was never declared LOST and just heartbeats on.
    await stack.waitFor('both READY again', async () => (await Promise.all([host, other].map(runtimeOf))).every((r) => r.status === 'READY' && r.heldAt === null));
    expect((await runtimeOf(other)).fence).toBe(otherFence);
    await retire('mass-web');
  });

  it('an operator\'s recover of an unknown runtime is 404, and the recover route needs the operator role', async () => {
    expect((await stack.api('POST', '/v1/runtimes/nobody-here/recover')).body.error).toBe('not-found');
    expect((await stack.api('POST', `/v1/runtimes/${ZONE_B[0]}/recover`, { role: 'viewer' })).status).toBe(403);
  });
});
