// The autoscaler on the real stack (API, worker, PostgreSQL, Temporal, agent processes): tier
// policies, signals by signal-with-start, decisions in the ledger, scale-out/scale-in children under
// scale:<workload>, never two operations on one workload, and continue-as-new under a burst.
// Each `it` has its own tier and workloads; windows are short so nothing waits long.
import path from 'node:path';
import { runLoad } from '../../store/source-feed';
import { verifyExactlyOnce } from '../../store/sink-audit';
import { run as cli } from '../../cli/main';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload } from '../../harness/workloads';
import { autoscalerStatusQuery, observeUpdate, policyUpdate } from '../../workflows/autoscaler';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const service = (replicas: number) => ({
  kind: 'service', replicas,
  contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
});
const CONSUMER_CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const consumer = (name: string, replicas: number, partitions: number) => ({
  kind: 'consumer', replicas, contract: { ...CONSUMER_CONTRACT, partitions },
  spec: { partitions, source: `${name.replace(/-/g, '_')}_in`, sink: `${name.replace(/-/g, '_')}_out`, workMs: 1 },
});
/** Short windows: each test turns on what it checks. */
const policy = (workloads: string[], patch: Record<string, unknown> = {}) => ({
  workloads, minReplicas: 1, maxReplicas: 3, targets: { qpsPerInstance: 100 }, tolerance: 0.1,
  scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, soakMs: 0, ...patch,
});

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `as-${zone}`, labels: { zone }, slots: 8 })) });
});
afterAll(async () => {
  await stack?.stop();
});

const putPolicy = async (tier: string, body: unknown) => {
  const response = await stack.api('PUT', `/v1/tiers/${tier}/policy`, { body });
  expect(response.status).toBeLessThan(300);
  return response.body;
};
const signal = async (tier: string, body: Record<string, unknown>, role: 'operator' | 'agent' = 'operator') => {
  const response = await stack.api('POST', `/v1/tiers/${tier}/signals`, { body, role });
  expect(response).toMatchObject({ status: 202, body: { workflowId: `autoscale:${tier}` } });
};
/** The tier's autoscale rows, oldest first, with the decision label. */
const rowsOf = async (tier: string) =>
  (await stack.db.query(`select id, at, workload, from_replicas, to_replicas, reason, outcome, inputs from ledger where tier = $1 and kind = 'autoscale' order by id`, [tier]))
    .rows.map((r) => ({ ...r, decision: r.inputs.decision as string }));
const replicasOf = async (workload: string) => (await stack.api('GET', `/v1/workloads/${workload}`, { role: 'viewer' })).body.placement?.assignments.length ?? 0;
const scaleIdle = async (workload: string) => {
  const d = await stack.temporal.workflow.getHandle(`scale:${workload}`).describe().catch(() => null);
  return d === null || d.status.name !== 'RUNNING';
};
/** Every run of a workflow id, from Temporal's visibility. */
const runsOf = async (workflowId: string) => {
  const runs: { type: string; status: string; start: number; close: number | null; historyLength: number }[] = [];
  for await (const info of stack.temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` })) {
    runs.push({ type: info.type, status: info.status.name, start: info.startTime.getTime(), close: info.closeTime?.getTime() ?? null, historyLength: info.historyLength });
  }
  return runs.sort((a, b) => a.start - b.start);
};
/** At most one scale:<workload> at a time: each run started after the previous one closed. */
const expectNoOverlap = async (workload: string) => {
  const runs = await runsOf(`scale:${workload}`);
  for (let i = 1; i < runs.length; i++) {
    expect(runs[i - 1].close).not.toBeNull();
    expect(runs[i].start).toBeGreaterThanOrEqual(runs[i - 1].close!);
  }
  return runs;
};
const tierView = async (tier: string) => (await stack.api('GET', `/v1/tiers/${tier}`, { role: 'viewer' })).body;

describe('policy', () => {
  it('validates with 422 naming the field, stores revisions, and reaches the running autoscaler as a signal', async () => {
    const bad = async (body: unknown, field: string) => {
      const response = await stack.api('PUT', '/v1/tiers/pol/policy', { body });
      expect(response.status).toBe(422);
      expect(response.body.issues.map((i: any) => i.path)).toContain(field);
    };
    await bad({ ...policy(['pol-web']), minReplicas: 4 }, 'body.maxReplicas');
    await bad({ ...policy(['pol-web']), targets: { qpsPerInstance: 0 } }, 'body.targets.qpsPerInstance');
    await bad({ ...policy(['pol-web']), targets: {} }, 'body.targets');
    await bad({ ...policy(['pol-web']), surprise: true }, 'body');
    await bad({ ...policy(['pol-web']), changeWindows: [{ cron: '61 * * * *', durationMs: 1000 }] }, 'body.changeWindows.0.cron');
    await bad({ ...policy(['pol-web']), changeWindows: [{ cron: '0 9 * * *', durationMs: 8 * 86_400_000 }] }, 'body.changeWindows.0.durationMs');
    expect((await stack.api('POST', '/v1/tiers/pol/signals', { body: { qps: 1 } })).status).toBe(404); // no policy yet
    expect((await stack.api('POST', '/v1/tiers/pol/signals', { body: { qps: 1, cpu: 2 } })).status).toBe(422);

    const first = await stack.api('PUT', '/v1/tiers/pol/policy', { body: policy(['pol-web']) });
    expect(first).toMatchObject({ status: 201, body: { tier: 'pol', revision: 1, workflowId: 'autoscale:pol', policy: { tolerance: 0.1 } } });
    expect((await stack.api('POST', '/v1/tiers/pol/signals', { body: { qps: 1 }, role: 'viewer' })).status).toBe(403);
    const second = await putPolicy('pol', policy(['pol-web'], { maxReplicas: 7 }));
    expect(second.revision).toBe(2);
    const status = await stack.waitFor('the autoscaler on revision 2', async () => {
      const s = await stack.temporal.workflow.getHandle('autoscale:pol').query<{ revision: number; policy: { maxReplicas: number } }>('status').catch(() => null);
      return s?.revision === 2 ? s : null;
    });
    expect(status).toMatchObject({ revision: 2, policy: { maxReplicas: 7 } });
    expect(await tierView('pol')).toMatchObject({ source: 'workflow', revision: 2, autoscaler: { status: 'running' }, lastDecision: null });

    // The same as Updates, for a sender that wants to know (`temporal workflow update execute --name observe`):
    // a bad observation or policy is refused to its sender, naming the field, and leaves no trace; a good one is answered.
    const handle = stack.temporal.workflow.getHandle('autoscale:pol');
    const counts = async () => (await handle.query(autoscalerStatusQuery)).counts;
    const before = await counts();
    await expect(handle.executeUpdate(observeUpdate, { args: [{ qps: -1 }] })).rejects.toMatchObject({ cause: { message: expect.stringMatching(/^invalid observation: qps: /) } });
    await expect(handle.executeUpdate(observeUpdate, { args: [{}] })).rejects.toMatchObject({ cause: { message: expect.stringMatching(/^invalid observation: \(body\): a signal carries at least one of/) } });
    await expect(handle.executeUpdate(policyUpdate, { args: [{ policy: { ...policy(['pol-web']), minReplicas: 4 }, revision: 3 }] }))
      .rejects.toMatchObject({ cause: { message: expect.stringMatching(/^invalid policy: maxReplicas: /) } });
    expect(await counts()).toEqual(before);
    expect(await handle.executeUpdate(observeUpdate, { args: [{ qps: 5 }] })).toEqual({ seq: before.signals + 1, window: expect.any(Number) });
    expect(await counts()).toMatchObject({ signals: before.signals + 1, rejectedSignals: before.rejectedSignals });
    // an older revision changes nothing, and says so
    expect(await handle.executeUpdate(policyUpdate, { args: [{ policy: policy(['pol-web']), revision: 1 }] })).toEqual({ applied: false, revision: 2 });
  });
});

describe('autoscaler', () => {
  it('scales a QPS burst out to ceil(load / ratio), clamped to max and stepped', async () => {
    await defineWorkload(stack, 'bo-web', service(1), 1);
    await putPolicy('bo', policy(['bo-web'], { maxReplicas: 3, maxStep: 1 }));
    await signal('bo', { qps: 1000 }, 'agent'); // ceil(1000 / 100) = 10, clamped to 3, one step at a time
    await stack.waitFor('bo-web at 3 replicas, idle', async () => (await replicasOf('bo-web')) === 3 && (await scaleIdle('bo-web')), 120_000);
    const rows = await rowsOf('bo');
    const changes = rows.filter((r) => r.decision === 'scale-out');
    expect(changes.map((r) => [r.from_replicas, r.to_replicas])).toEqual([[1, 2], [2, 3]]);
    expect(changes[0].inputs).toMatchObject({
      tier: 'bo', targets: { qpsPerInstance: 100 }, observation: { qps: 1000 },
      desiredPerSignal: [{ signal: 'qps', observed: 1000, desired: 3 }], recommended: 3,
    });
    const runs = await expectNoOverlap('bo-web');
    expect(runs.filter((r) => r.type === 'scaleOut').map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED']);
    const view = await tierView('bo');
    expect(view).toMatchObject({ source: 'workflow', latest: { qps: 1000 }, runningOperations: [] });
    expect(view.lastDecision.decision).toMatch(/^no-change|^scale-out/);
    // the CLI's table of the same
    const lines: string[] = [];
    process.env.SCALEGATE_VIEWER_TOKEN = stack.tokens.viewer;
    await cli(['tiers', 'show', 'bo', '--api', stack.apiUrl], (t) => lines.push(t));
    expect(lines.join('\n')).toMatch(/LAST DECISION[\s\S]*decision:\s+(no-change|scale-out)/);
    expect(lines.join('\n')).toMatch(/targets:\s+qpsPerInstance 100/);
  });

  it('scales quiet load in only after the scale-down stabilization window, by draining, exactly-once', async () => {
    await defineWorkload(stack, 'qi-orders', consumer('qi-orders', 3, 6), 3);
    // The load runs until the scale-in has ended (its count only bounds a failed run): the audit
    // below counts what it wrote, and a load still writing at the end proves it spanned the drains.
    const LOAD_BOUND = 30_000;
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl: stack.databaseUrl, source: 'qi_orders_in', partitions: 6, ratePerSec: 300, count: LOAD_BOUND, signal: stopLoad.signal });
    try {
      await putPolicy('qi', policy(['qi-orders'], { scaleDownStabilizationMs: 2000, drainTimeoutMs: 30_000 }));
      await signal('qi', { qps: 300 });
      await stack.waitFor('the first decision', async () => (await rowsOf('qi')).length > 0);
      await signal('qi', { qps: 40 }); // desired 1, held by the 3 of the last 2 s
      await stack.waitFor('qi-orders at 1 replica, idle', async () => (await replicasOf('qi-orders')) === 1 && (await scaleIdle('qi-orders')), 120_000);
    } finally {
      stopLoad.abort();
    }
    const written = await load;
    expect(written.written).toBeLessThan(LOAD_BOUND); // still writing when the scale-in ended

    const rows = await rowsOf('qi');
    expect(rows[0].decision).toBe('no-change: within tolerance');
    const stabilizing = rows.findIndex((r) => r.decision === 'no-change: stabilizing');
    const scaleIn = rows.findIndex((r) => r.decision === 'scale-in');
    expect(stabilizing).toBeGreaterThan(0);
    expect(scaleIn).toBeGreaterThan(stabilizing);
    expect(rows[scaleIn]).toMatchObject({ from_replicas: 3, to_replicas: 1 });
    // the 3 recommended with the first signal left the 2 s window before the scale-in was decided
    expect(rows[scaleIn].at.getTime() - rows[0].at.getTime()).toBeGreaterThanOrEqual(1500);

    const scaleInRow = (await stack.api('GET', '/v1/ledger?workload=qi-orders&kind=scale-in', { role: 'viewer' })).body.events[0];
    expect(scaleInRow).toMatchObject({ outcome: 'completed', fromReplicas: 3, toReplicas: 1 });
    expect(scaleInRow.evidence.scaleIn.receipts.length).toBe(2); // both victims drained
    for (const receipt of scaleInRow.evidence.scaleIn.receipts) expect(receipt.receipt).toMatchObject({ inFlight: 0 });

    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'qi_orders_in', sink: 'qi_orders_out' });
      return a.sinkCount >= written.written ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: written.written, sinkCount: written.written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
  });

  it('starts no operation while load oscillates inside the tolerance band, and says why', async () => {
    await defineWorkload(stack, 'tol-web', service(2), 2);
    await putPolicy('tol', policy(['tol-web'], { tolerance: 0.2 }));
    const values = [190, 210, 175, 230, 200, 185, 215, 201];
    for (const qps of values) await signal('tol', { qps });
    await stack.waitFor('the decision on the last observation', async () => {
      const view = await tierView('tol');
      return view.lastDecision?.observation?.qps === 201 && view.latest?.qps === 201;
    });
    const rows = await rowsOf('tol');
    expect(rows.length).toBeGreaterThan(0);
    expect([...new Set(rows.map((r) => r.decision))]).toEqual(['no-change: within tolerance']);
    expect(rows[0].reason).toMatch(/within tolerance 0.2/);
    expect((await runsOf('scale:tol-web')).filter((r) => r.type !== 'applyPlan')).toEqual([]);
    expect(await replicasOf('tol-web')).toBe(2);
  });

  it('refuses a scale-in inside a change window, and the ledger says so', async () => {
    await defineWorkload(stack, 'cw-web', service(3), 3);
    await putPolicy('cw', policy(['cw-web'], { changeWindows: [{ cron: '* * * * *', durationMs: 3_600_000 }] }));
    await signal('cw', { qps: 50 }); // desired 1
    const row = await stack.waitFor('a change-window row', async () => (await rowsOf('cw')).find((r) => r.decision === 'no-change: change window'));
    expect(row).toMatchObject({ from_replicas: 3, to_replicas: 3 });
    expect(row.reason).toMatch(/change window "\* \* \* \* \*"/);
    expect((await tierView('cw')).lastDecision.decision).toBe('no-change: change window');
    expect((await runsOf('scale:cw-web')).filter((r) => r.type === 'scaleIn')).toEqual([]);
    expect(await replicasOf('cw-web')).toBe(3);
  });

  it('never runs two operations on one workload: an operator\'s scale makes it wait, then it goes on', async () => {
    await defineWorkload(stack, 'op-web', service(1), 1);
    // its soak keeps it running well past the autoscaler's first decision (about 0.3 s after this POST)
    const operator = await stack.api('POST', '/v1/workloads/op-web/scale', { body: { replicas: 2, soakMs: 2000 } });
    expect(operator.status).toBe(202);
    await putPolicy('op', policy(['op-web']));
    await signal('op', { qps: 300 }); // desired 3 while the operator's scale:op-web runs
    const waiting = await stack.waitFor('a wait row', async () => (await rowsOf('op')).find((r) => r.decision === 'no-change: operation running'));
    expect(waiting.reason).toMatch(/scale:op-web is running/);
    // meanwhile an operator's second request is refused too
    expect((await stack.api('POST', '/v1/workloads/op-web/scale', { body: { replicas: 3 } })).status).toBe(409);
    await stack.waitFor('op-web at 3 replicas, idle', async () => (await replicasOf('op-web')) === 3 && (await scaleIdle('op-web')), 120_000);
    const rows = await rowsOf('op');
    expect(rows.findIndex((r) => r.decision === 'scale-out')).toBeGreaterThan(rows.indexOf(rows.find((r) => r.decision === 'no-change: operation running')!));
    const runs = await expectNoOverlap('op-web');
    expect(runs.filter((r) => r.type === 'scaleOut')).toHaveLength(2); // the operator's, then the autoscaler's
  });

  it('takes 1,000 signals in a burst: one operation at a time, the newest observation decides, history bounded', async () => {
    await defineWorkload(stack, 'bb-web', service(1), 1);
    await putPolicy('bb', policy(['bb-web'], { maxStep: 1 }));
    const base = Date.now();
    const count = 1000;
    const at = (i: number) => new Date(base + i).toISOString();
    let next = 0;
    await Promise.all(Array.from({ length: 20 }, async () => {
      while (next < count) {
        const i = next++;
        // the newest (i = 999) asks for 3; the others anything from 1 to 3
        await signal('bb', { qps: i === count - 1 ? 250 : (i * 37) % 300, at: at(i) }, i % 2 ? 'agent' : 'operator');
      }
    }));
    const view = await stack.waitFor('the newest observation decided, bb-web at 3, idle', async () => {
      const v = await tierView('bb');
      const settled = v.latest?.atMs === base + count - 1 && v.lastDecision?.observation?.atMs === base + count - 1 && v.runningOperations.length === 0;
      return settled && (await replicasOf('bb-web')) === 3 && (await scaleIdle('bb-web')) ? v : null;
    }, 180_000);
    expect(view.counts.signals).toBe(count);
    expect(view.lastDecision.observation.qps).toBe(250);
    await expectNoOverlap('bb-web');
    const runs = await runsOf('autoscale:bb');
    expect(runs.length).toBeGreaterThanOrEqual(2); // continued as new
    for (const run of runs.filter((r) => r.status === 'CONTINUED_AS_NEW')) expect(run.historyLength).toBeLessThan(2500);
  });
});
