// Operations compose (issue 18), on the real stack: a Temporal cancellation (what the Web UI's
// "Request Cancellation" and `temporal workflow cancel` send) is an abort: `cancelled` with
// nothing changed before the first change, `compensated` after it; the status stays readable and
// the target takes a new operation afterwards. A completed scale is the desired state: recovery and
// reconcile keep it. A drain honours the task's grace period and reports a forced kill.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runLoad } from '../../store/source-feed';
import { verifyExactlyOnce } from '../../store/sink-audit';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, tasksOf as sharedTasksOf, scaleAndWait } from '../../harness/workloads';
import { temporalCancel } from '../support/cli';

const FIXTURE = path.join(__dirname, '..', '..', 'harness', 'fixtures', 'http-server.js');
const CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const service = (replicas: number | 'all', env: Record<string, string> = {}, graceMs = 1000) => ({
  kind: 'service', replicas, contract: CONTRACT,
  spec: { command: [process.execPath, FIXTURE], env, readiness: { http: '/healthz' }, graceMs },
});

let stack: Stack;
const settled: Record<string, unknown>[] = [];

beforeAll(async () => {
  // Slots enough for every workload of this file at once (recoveries may pile them onto two runtimes).
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `co-${zone}`, labels: { zone }, slots: 32 })) });
});
afterAll(async () => {
  // The figures of the closing note's table: phase × final status × seconds to settle.
  if (settled.length) console.log(JSON.stringify({ cancellations: settled }));
  await stack?.stop();
});

const tasksOf = (workload: string) => sharedTasksOf(stack, workload);
const operation = async (workflowId: string) => (await stack.api('GET', `/v1/operations/${encodeURIComponent(workflowId)}`, { role: 'viewer' })).body;
const workloadOf = async (name: string) => (await stack.api('GET', `/v1/workloads/${name}`, { role: 'viewer' })).body;

/** Starts a scale, waits for `phase`, cancels it through the temporal CLI, and waits for its end; answers the final operation. */
async function cancelInPhase(name: string, body: Record<string, unknown>, phase: string) {
  const started = await stack.api('POST', `/v1/workloads/${name}/scale`, { body });
  expect(started.status).toBe(202);
  await stack.waitFor(`${started.body.workflowId} in phase ${phase}`, async () => (await operation(started.body.workflowId)).phase === phase);
  const cancelledAt = Date.now();
  temporalCancel(started.body.workflowId);
  // The status stays readable while it winds down.
  const final = await stack.waitFor(`${started.body.workflowId} ended`, async () => {
    const current = await operation(started.body.workflowId);
    expect(current).toMatchObject({ workflowId: started.body.workflowId, kind: started.body.kind });
    return current.status !== 'running' ? current : null;
  }, 120_000);
  settled.push({ operation: started.body.kind, phase, status: final.status, secondsToSettle: (Date.now() - cancelledAt) / 1000 });
  return final;
}

/** Live task processes equal the placement: one ready task per assignment, on its runtime. */
async function expectPlacementIsLive(name: string) {
  const placement = (await workloadOf(name)).placement;
  await stack.waitFor(`the tasks of ${name} match its placement`, async () => {
    const live = (await tasksOf(name)).filter((t) => t.state === 'ready');
    const wanted = placement.assignments.map((a: any) => `${a.runtimeId}/${a.taskId}`).sort();
    return JSON.stringify(live.map((t) => `${t.runtimeId}/${t.taskId}`).sort()) === JSON.stringify(wanted);
  });
  return placement.assignments.length;
}

async function twoReconcilePasses() {
  const at = async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body.reconcile?.at ?? null;
  const seen = new Set([await at()]);
  await stack.waitFor('two more reconcile passes', async () => {
    seen.add(await at());
    return seen.size >= 3;
  });
}

describe('a Temporal cancellation is an abort', () => {
  it('before the first change (awaiting approval): cancelled, nothing changed, and the target takes a new scale', async () => {
    await defineWorkload(stack, 'c-approve', service(1), 1);
    const before = (await workloadOf('c-approve')).placement;
    const final = await cancelInPhase('c-approve', { replicas: 2, approval: 'manual', soakMs: 0 }, 'awaiting-approval');
    expect(final).toMatchObject({ status: 'cancelled', phase: 'cancelled' });
    const after = await workloadOf('c-approve');
    expect(after.placement.fence).toBe(before.fence);
    expect(after.replicas).toBe(1);
    expect(await expectPlacementIsLive('c-approve')).toBe(1);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=c-approve&kind=scale-out', { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'cancelled' });
    // a new operation on the same target starts and completes
    expect(await scaleAndWait(stack, 'c-approve', { replicas: 2, soakMs: 0 }, 'scaleOut')).toMatchObject({ status: 'completed' });
    expect((await workloadOf('c-approve')).replicas).toBe(2);
  });

  it('after the placement write (soaking): compensated by the replan, the ledger row after it, desired = the replan size', async () => {
    await defineWorkload(stack, 'c-soak', service(1), 1);
    const final = await cancelInPhase('c-soak', { replicas: 2, soakMs: 600_000 }, 'soaking');
    expect(final.status).toBe('compensated');
    expect(final.compensation).toMatchObject({ replicas: 2, reason: expect.stringMatching(/cancellation requested/) });
    expect(await expectPlacementIsLive('c-soak')).toBe(2);
    expect((await workloadOf('c-soak')).replicas).toBe(2);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=c-soak', { role: 'viewer' })).body.events;
    const compensated = ledger.findIndex((e: any) => e.kind === 'scale-out' && e.outcome === 'compensated');
    const replanned = ledger.findIndex((e: any) => e.kind === 'replan' && e.outcome === 'completed');
    expect(compensated).toBeGreaterThanOrEqual(0);
    expect(replanned).toBeGreaterThan(compensated); // newest first: the compensated row was written after the replan's
    expect(await scaleAndWait(stack, 'c-soak', { replicas: 1 }, 'scaleIn')).toMatchObject({ status: 'completed' });
  });

  it('a scale-in cancelled while it drains: compensated, placement equal to the live processes', async () => {
    // SIGTERM ignored and a 3 s grace: the drain lasts long enough to be cancelled in it (the
    // cancellation is requested about 0.2 s after the drain starts).
    await defineWorkload(stack, 'c-drain', service(2, { IGNORE_SIGTERM: '1' }, 3000), 2);
    const final = await cancelInPhase('c-drain', { replicas: 1, drainTimeoutMs: 500 }, 'draining');
    expect(final.status).toBe('compensated');
    expect(final.compensation.reason).toMatch(/cancellation requested/);
    expect(await expectPlacementIsLive('c-drain')).toBe(1);
    expect((await workloadOf('c-drain')).replicas).toBe(1);
  });
});

describe('a drain honours the task grace period', () => {
  it('a process that ignores SIGTERM is killed only after its graceMs, and the operation reports the forced kill', async () => {
    // a grace three times the drain deadline: a drain cut at the deadline could not pass for one that honoured the grace
    const graceMs = 1500;
    await defineWorkload(stack, 'c-grace', service(2, { IGNORE_SIGTERM: '1' }, graceMs), 2);
    const final = await scaleAndWait(stack, 'c-grace', { replicas: 1, drainTimeoutMs: 500 }, 'scaleIn');
    expect(final.status).toBe('completed');
    const receipt = final.scaleIn.receipts[0].receipt;
    expect(receipt.forced).toBe(true);
    expect(receipt.durationMs).toBeGreaterThanOrEqual(graceMs); // not cut at the 500 ms drain deadline
    expect(final.scaleIn.forced).toEqual([final.scaleIn.receipts[0].taskId]);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=c-grace&kind=scale-in', { role: 'viewer' })).body.events;
    expect(ledger[0].reason).toMatch(/did not stop within their grace and were killed/);
  });
});

describe('one desired state', () => {
  it('scale in 3 → 1, recover each runtime in turn, two reconcile passes: 1 replica, desired 1', async () => {
    await defineWorkload(stack, 'c-keep', service(3), 3);
    expect(await scaleAndWait(stack, 'c-keep', { replicas: 1 }, 'scaleIn')).toMatchObject({ status: 'completed' });
    expect((await workloadOf('c-keep')).replicas).toBe(1);
    for (const runtime of ['co-a', 'co-b', 'co-c']) {
      const started = await stack.api('POST', `/v1/runtimes/${runtime}/recover`, { body: {} });
      expect(started.status).toBe(202);
      await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result();
      // the agent is alive: it comes back under a new fence before the next one is recovered
      await stack.waitFor(`${runtime} READY again`, async () => {
        const { rows } = await stack.db.query(`select status from runtimes where id = $1 and lease_expires_at > now()`, [runtime]);
        return rows[0]?.status === 'READY';
      });
    }
    await twoReconcilePasses();
    const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    const entry = state.workloads.find((w: any) => w.name === 'c-keep');
    expect(entry.replicas).toBe(1);
    expect(entry.placement.assignments).toHaveLength(1);
    expect(await expectPlacementIsLive('c-keep')).toBe(1);
  });

  it('an `all` workload scaled to 1 becomes 1, and stays 1 through reconcile', async () => {
    await defineWorkload(stack, 'c-all', service('all'), 3);
    expect(await scaleAndWait(stack, 'c-all', { replicas: 1 }, 'scaleIn')).toMatchObject({ status: 'completed' });
    expect((await workloadOf('c-all')).replicas).toBe(1);
    await twoReconcilePasses();
    expect(await expectPlacementIsLive('c-all')).toBe(1);
    expect((await workloadOf('c-all')).replicas).toBe(1);
  });
});

describe('plan/apply is the scale procedure', () => {
  const consumer = (table: string, replicas: number, partitions: number) => ({
    kind: 'consumer', replicas,
    contract: { ownership: 'partitioned', partitions, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
    spec: { partitions, source: `${table}_in`, sink: `${table}_out` },
  });
  /** Plans `name` at `replicas`, applies the plan, waits for the operation it started; answers both. */
  const planAndApply = async (name: string, replicas: number, kind: 'scaleOut' | 'scaleIn') => {
    const plan = await stack.api('POST', `/v1/workloads/${name}/plan`, { body: { replicas } });
    expect(plan.status).toBe(201);
    const applied = await stack.api('POST', `/v1/plans/${plan.body.id}/apply`, { body: {} });
    expect(applied).toMatchObject({ status: 202, body: { workflowId: `scale:${name}`, kind } });
    await stack.temporal.workflow.getHandle(applied.body.workflowId, applied.body.runId).result();
    return { plan: plan.body, final: await operation(`scale:${name}`) };
  };

  it('a plan past the partition count is refused naming the ownership row, with nothing changed', async () => {
    await defineWorkload(stack, 'c-plan', consumer('cplan', 1, 2), 1);
    const before = (await workloadOf('c-plan')).placement;
    const { plan, final } = await planAndApply('c-plan', 3, 'scaleOut');
    expect(plan.warnings.join(' ')).toMatch(/above 2 partitions/);
    expect(final.status).toBe('refused');
    expect(final.gates.rows.filter((r: any) => !r.passed).map((r: any) => r.gate)).toContain('input-ownership');
    expect(final.evidenceGap).toMatch(/partition/);
    expect(final.plan.id).toBe(plan.id); // the reviewed plan, not a new one
    const after = await workloadOf('c-plan');
    expect(after.placement.fence).toBe(before.fence);
    expect(after.replicas).toBe(1);
    expect(await expectPlacementIsLive('c-plan')).toBe(1);
  });

  it('a lowering plan applied under load is drained like a scale-in, exactly once', async () => {
    await defineWorkload(stack, 'c-low', consumer('clow', 3, 6), 3);
    const databaseUrl = stack.databaseUrl;
    // The load runs until the applied plan has ended (its count only bounds a failed run): the audit
    // below counts what it wrote, and a load still writing at the end proves it spanned the drains.
    const LOAD_BOUND = 30_000;
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'clow_in', partitions: 6, ratePerSec: 300, count: LOAD_BOUND, signal: stopLoad.signal });
    const { plan, final } = await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: 'clow_in', sink: 'clow_out' })).sinkCount > 200)
      .then(() => planAndApply('c-low', 1, 'scaleIn'))
      .finally(() => stopLoad.abort());
    const written = await load;
    expect(written.written).toBeLessThan(LOAD_BOUND); // still writing when the plan's operation ended
    expect(final.status).toBe('completed');
    expect(final.plan.id).toBe(plan.id);
    expect(final.scaleIn.receipts).toHaveLength(2);
    for (const receipt of final.scaleIn.receipts) expect(receipt.receipt).toMatchObject({ inFlight: 0 });
    expect((await workloadOf('c-low')).replicas).toBe(1);
    expect(await expectPlacementIsLive('c-low')).toBe(1);
    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl, source: 'clow_in', sink: 'clow_out' });
      return a.sinkCount >= written.written ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: written.written, sinkCount: written.written, missing: 0, duplicates: 0, extra: 0 });
  });

  it('a manual approval shows the proposed plan before anyone approves, and applies that plan', async () => {
    await defineWorkload(stack, 'c-review', service(1), 1);
    const started = await stack.api('POST', '/v1/workloads/c-review/scale', { body: { replicas: 2, approval: 'manual', soakMs: 0 } });
    expect(started.status).toBe(202);
    const waiting = await stack.waitFor('awaiting approval', async () => {
      const o = await operation('scale:c-review');
      return o.phase === 'awaiting-approval' ? o : null;
    });
    expect(waiting.plan).toMatchObject({ starts: [expect.objectContaining({ taskId: expect.any(String) })], stops: [], moves: [] });
    expect(waiting.gates.passed).toBe(true);
    // the Web UI's details line of the running workflow says the same (its metadata query)
    const metadata = await stack.temporal.workflow.getHandle('scale:c-review').query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/awaiting approval[\s\S]*1 start\(s\) on [\s\S]*gates: .*capacity ok/);
    const approved = await stack.api('POST', '/v1/operations/scale%3Ac-review/approve', { body: {} });
    expect(approved.status).toBe(200);
    await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result();
    const final = await operation('scale:c-review');
    expect(final.status).toBe('completed');
    expect(final.plan.id).toBe(waiting.plan.id); // the approved plan, not a new one
    expect((await workloadOf('c-review')).placement.assignments.map((a: any) => a.taskId).sort())
      .toEqual(waiting.plan.target.map((a: any) => a.taskId).sort());
  });
});


describe('tier constraints at every door', () => {
  it('a manual scale-in below a tier minReplicas, or inside its change window, is refused naming the rule; override with a reason passes and is ledgered', async () => {
    await defineWorkload(stack, 'c-tier', service(3), 3);
    // a change window open all day, every day: scale-in forbidden now
    const policy = { workloads: ['c-tier'], minReplicas: 2, maxReplicas: 5, targets: { qpsPerInstance: 100 }, changeWindows: [{ cron: '0 0 * * *', durationMs: 86_400_000, forbid: 'scale-in' }] };
    expect((await stack.api('PUT', '/v1/tiers/c-tier-tier/policy', { body: policy })).status).toBeLessThan(300);

    const refused = await scaleAndWait(stack, 'c-tier', { replicas: 1 }, 'scaleIn');
    expect(refused.status).toBe('refused');
    expect(refused.evidenceGap).toMatch(/tier c-tier-tier: minReplicas is 2, below it is 1/);
    expect(refused.evidenceGap).toMatch(/change window "0 0 \* \* \*" .* forbids scale-in until/);
    expect((await workloadOf('c-tier')).replicas).toBe(3);
    expect(await expectPlacementIsLive('c-tier')).toBe(3);

    const overridden = await scaleAndWait(stack, 'c-tier', { replicas: 2, override: { reason: 'incident 42: shed the canary' } }, 'scaleIn');
    expect(overridden.status).toBe('completed');
    const ledger = (await stack.api('GET', '/v1/ledger?workload=c-tier&kind=scale-in', { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'completed', inputs: { tierRules: { override: 'incident 42: shed the canary', violations: [expect.stringMatching(/change window/)] } } });
    expect(ledger[1]).toMatchObject({ outcome: 'refused' });
    expect((await workloadOf('c-tier')).replicas).toBe(2);
  });
});

describe('retirement survives faults', () => {
  it('retired while an agent is SIGKILLed and down past two leases: no task of it runs once the agent is back', async () => {
    await defineWorkload(stack, 'c-retire', service(3), 3);
    const pids: number[] = [];
    for (const t of await tasksOf('c-retire')) {
      pids.push(((await (await fetch(`http://127.0.0.1:${t.ports.public}/`)).json()) as { pid: number }).pid);
    }
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const victim = 'co-c';
    stack.agents[victim].process.child.kill('SIGKILL');
    await stack.agents[victim].process.exited;
    try {
      const retired = await stack.api('DELETE', '/v1/workloads/c-retire');
      expect(retired.status).toBe(202);
      const result = await stack.temporal.workflow.getHandle(retired.body.workflowId, retired.body.runId).result() as { stopped: string[]; unreachable?: string[] };
      expect(result.stopped).toHaveLength(2);
      expect(result.unreachable).toEqual([victim]);
      // kept down past its lease: the sweeper declares it LOST and its recovery ends
      await stack.waitFor(`${victim} LOST`, async () => {
        const { rows } = await stack.db.query(`select status from runtimes where id = $1`, [victim]);
        return rows[0]?.status === 'LOST';
      });
      expect(pids.filter(alive)).toHaveLength(1); // the task on the killed agent's node outlived it (static stability)
    } finally {
      await stack.startAgent({ id: victim, labels: { zone: 'c' }, slots: 32 });
    }
    await stack.waitFor('no task of the retired workload runs', async () => (await tasksOf('c-retire')).length === 0 && pids.filter(alive).length === 0);
    expect((await workloadOf('c-retire')).placement.assignments).toEqual([]);
  });
});

describe('cancellation of applyPlan and recoverRuntime after their placement write', () => {
  const readyFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sg-ready-')), 'ready');
  const phaseOf = (workflowId: string) => stack.temporal.workflow.getHandle(workflowId).query<string>('phase').catch(() => null);

  it('applyPlan cancelled while converging (its tasks never ready): compensated by the replan, which converges', async () => {
    const file = readyFile(); // absent: the new tasks do not become ready
    const put = await stack.api('PUT', '/v1/workloads/c-apply', { body: service(1, { READY_FILE: file }) });
    expect(put.status).toBe(201);
    await stack.waitFor('the reconcile loop applying c-apply, converging', async () => (await phaseOf('scale:c-apply')) === 'converging');
    const cancelledAt = Date.now();
    temporalCancel('scale:c-apply');
    await stack.waitFor('the replan started', async () => (await stack.temporal.workflow.getHandle('replan:c-apply').describe().catch(() => null)) !== null);
    fs.writeFileSync(file, ''); // the replan's tasks can become ready
    const final = await stack.waitFor('applyPlan ended', async () => {
      const o = await operation('scale:c-apply');
      return o.status !== 'running' ? o : null;
    }, 120_000);
    settled.push({ operation: 'applyPlan', phase: 'converging', status: final.status, secondsToSettle: (Date.now() - cancelledAt) / 1000 });
    expect(final).toMatchObject({ kind: 'applyPlan', status: 'compensated', result: { outcome: 'compensated', reason: expect.stringMatching(/cancellation requested/) } });
    expect(await expectPlacementIsLive('c-apply')).toBe(1);
  });

  it('recoverRuntime cancelled while converging: compensated by the replan at the desired size', async () => {
    const file = readyFile();
    fs.writeFileSync(file, '');
    await defineWorkload(stack, 'c-recover', service(1, { READY_FILE: file }), 1);
    const host = (await workloadOf('c-recover')).placement.assignments[0].runtimeId;
    fs.rmSync(file); // the replacement will not become ready
    const started = await stack.api('POST', `/v1/runtimes/${host}/recover`, { body: {} });
    expect(started.status).toBe(202);
    await stack.waitFor(`${started.body.workflowId} converging`, async () => {
      const status = await stack.temporal.workflow.getHandle(started.body.workflowId).query<any>('status').catch(() => null);
      return status?.decisions?.some((d: any) => d.workload === 'c-recover' && d.phase === 'converging') ?? false;
    });
    const cancelledAt = Date.now();
    temporalCancel(started.body.workflowId);
    await stack.waitFor('the replan started', async () => (await stack.temporal.workflow.getHandle('replan:c-recover').describe().catch(() => null)) !== null);
    fs.writeFileSync(file, '');
    const final = await stack.waitFor('recovery ended', async () => {
      const o = await operation(started.body.workflowId);
      return o.status !== 'running' ? o : null;
    }, 120_000);
    settled.push({ operation: 'recoverRuntime', phase: 'converging', status: final.status, secondsToSettle: (Date.now() - cancelledAt) / 1000 });
    expect(final).toMatchObject({ kind: 'recoverRuntime', status: 'compensated' });
    expect(final.result.compensation.reason).toMatch(/cancellation requested/);
    expect((await workloadOf('c-recover')).replicas).toBe(1);
    await stack.waitFor(`${host} READY again`, async () => {
      const { rows } = await stack.db.query(`select status from runtimes where id = $1 and lease_expires_at > now()`, [host]);
      return rows[0]?.status === 'READY';
    });
    expect(await expectPlacementIsLive('c-recover')).toBe(1);
  });
});
