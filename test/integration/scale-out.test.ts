// scaleOut on the real stack: evidence gates that stop before any change, a consumer 2 → 4 under
// load proved exactly-once by counting, a converge deadline ending in the replan, a worker killed
// mid-workflow, and bad input from the API and from the temporal CLI.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { runLoad } from '../../store/source-feed';
import { findTemporalCli } from '../../embedded/temporal-cli';
import { ownershipOverlaps, verifyExactlyOnce } from '../../store/sink-audit';
import { testEnv } from '../../harness/env';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload, failedGates, retireAndWait, tasksOf as sharedTasksOf, scaleAndWait } from '../../harness/workloads';

let stack: Stack;
const ERROR_WINDOW_MS = 4_000;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const KNOWN_CONTRACT = { ownership: 'partitioned', partitions: 8, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const consumer = (name: string, replicas: number, overrides: { contract?: Record<string, unknown>; selector?: Record<string, string>; partitions?: number } = {}) => ({
  kind: 'consumer',
  replicas,
  selector: overrides.selector ?? { pool: 'main' },
  contract: { ...KNOWN_CONTRACT, partitions: overrides.partitions ?? 8, ...overrides.contract },
  spec: { partitions: overrides.partitions ?? 8, source: `${name.replace(/-/g, '_')}_in`, sink: `${name.replace(/-/g, '_')}_out`, workMs: 1 },
});

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: 3000,
    // errors older than 4 s are no longer the current error rate (the baseline test below)
    agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `node-${zone}`, labels: { zone, pool: 'main' }, env: { SCALEGATE_ERROR_WINDOW_MS: String(ERROR_WINDOW_MS) } })),
  });
});
afterAll(async () => {
  await stack?.stop();
});

const tasksOf = (workload: string) => sharedTasksOf(stack, workload);
const define = (name: string, body: unknown, ready: number) => defineWorkload(stack, name, body, ready);
const scale = (name: string, body: Record<string, unknown>) => scaleAndWait(stack, name, body, 'scaleOut');

describe('evidence gates: each failing alone stops before any change', () => {
  const gated: Record<string, { replicas: number; [field: string]: unknown }> = {
    'g-delivery': consumer('g-delivery', 1, { contract: { delivery: 'unknown' } }),
    'g-parts': consumer('g-parts', 1, { partitions: 2 }),
    'g-capacity': consumer('g-capacity', 1, { selector: { zone: 'a' } }),
    'g-downstream': consumer('g-downstream', 1, { contract: { downstream: { maxReplicas: 1 } } }),
    'g-unknown-downstream': consumer('g-unknown-downstream', 1, { contract: { downstream: undefined } }),
    'g-unmeasured': {
      kind: 'service', replicas: 1, selector: { pool: 'main' },
      contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: { maxRatePerSec: 100 } },
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
    },
  };
  // Defined side by side (independent workloads; each test's refusal changes nothing, its own workload included).
  beforeAll(() => Promise.all(Object.entries(gated).map(([name, body]) => define(name, body, body.replicas))));

  /** `alsoUnproven`: rows that cannot be proven once the expected one fails (no recipient → nothing to probe). */
  const refusedWithoutStarts = async (name: string, replicas: number, expectedRow: string, alsoUnproven: string[] = []) => {
    const body = gated[name];
    const before = await tasksOf(name);
    expect(before.filter((t) => t.state === 'ready')).toHaveLength(body.replicas);
    const operation = await scale(name, { replicas, soakMs: 0 });
    expect(operation.status).toBe('refused');
    expect(failedGates(operation)).toEqual([expectedRow, ...alsoUnproven]);
    expect(operation.evidenceGap).toContain(`${expectedRow}:`);
    const after = await tasksOf(name);
    expect(after.map((t) => `${t.taskId}/${t.incarnation}`).sort()).toEqual(before.map((t) => `${t.taskId}/${t.incarnation}`).sort());
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${name}&kind=scale-out`, { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'refused', fromReplicas: body.replicas, toReplicas: replicas });
  };

  it('delivery unknown', () => refusedWithoutStarts('g-delivery', 2, 'delivery'));
  it('target above partitions', () => refusedWithoutStarts('g-parts', 3, 'input-ownership'));
  it('no free eligible runtime (connectivity is then unproven too)', () => refusedWithoutStarts('g-capacity', 2, 'capacity', ['connectivity']));
  it('downstream maxReplicas', () => refusedWithoutStarts('g-downstream', 2, 'downstream'));

  it('downstream unknown: refused naming what to declare; accepted by the request it goes through, and the ledger keeps the acceptance', async () => {
    const name = 'g-unknown-downstream';
    await refusedWithoutStarts(name, 2, 'downstream');
    const refused = (await stack.api('GET', `/v1/operations/scale:${name}`, { role: 'viewer' })).body;
    expect(refused.evidenceGap).toMatch(/^downstream: downstream unknown: the contract does not say what the output lands on.*contract\.downstream: its limits .*"none".*accept: \["downstream"\]/m);

    const accepted = await scale(name, { replicas: 2, soakMs: 0, accept: ['downstream'] });
    expect(accepted.status).toBe('completed');
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${name}&kind=scale-out`, { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'completed', toReplicas: 2 });
    expect(ledger[0].inputs.gates.find((row: any) => row.gate === 'downstream')).toMatchObject({ passed: true, detail: expect.stringMatching(/accepted by the request \(accept: \["downstream"\]\)$/) });
    // its slots back for the tests after it
    await retireAndWait(stack, name);
  });

  it('a declared maxRatePerSec with no rate to compare (a service counts no records): refused as unknown, naming the limit', async () => {
    const name = 'g-unmeasured';
    await refusedWithoutStarts(name, 2, 'downstream');
    const refused = (await stack.api('GET', `/v1/operations/scale:${name}`, { role: 'viewer' })).body;
    expect(refused.evidenceGap).toMatch(/^downstream: downstream maxRatePerSec 100 declared, but no rate is known to compare with/m);
    await retireAndWait(stack, name);
  });

  it('a failing probe', async () => {
    // An agent that cannot reach PostgreSQL: the only runtime a new replica could go to.
    await Promise.all([
      stack.startAgent({ id: 'node-x', labels: { zone: 'x', pool: 'probe' }, env: { DATABASE_URL: 'postgres://nobody:wrong@127.0.0.1:1/none' } }),
      stack.startAgent({ id: 'node-y', labels: { zone: 'y', pool: 'probe' } }),
    ]);
    const body = consumer('g-probe', 1, { selector: { zone: 'y' } });
    await define('g-probe', body, 1);
    expect((await stack.api('PUT', '/v1/workloads/g-probe', { body: { ...body, selector: { pool: 'probe' } } })).status).toBe(200);
    const before = await tasksOf('g-probe');
    const operation = await scale('g-probe', { replicas: 2, soakMs: 0 });
    expect(operation.status).toBe('refused');
    expect(failedGates(operation)).toEqual(['connectivity']);
    expect(operation.evidenceGap).toMatch(/node-x/);
    expect((await tasksOf('g-probe')).map((t) => t.incarnation)).toEqual(before.map((t) => t.incarnation));
  });
});

describe('the baseline reads the current error rate, not every error since the start', () => {
  it('refuses a scale-out while the task is failing now; once its errors are older than the window, completes it', async () => {
    const body = consumer('g-errors', 1);
    const { databaseUrl } = stack;
    await runLoad({ databaseUrl, source: body.spec.source, partitions: 8, ratePerSec: 1_000, count: 100 });
    const [task] = await define('g-errors', body, 1);
    const sinkCount = async () => (await verifyExactlyOnce({ databaseUrl, source: body.spec.source, sink: body.spec.sink })).sinkCount;
    await stack.waitFor('the first 100 in the sink', async () => (await sinkCount()) === 100);
    const taskStatus = async () => (await stack.agentApi(task.runtimeId, 'GET', `/v1/tasks/${task.taskId}`)).body;

    // The agents' role loses INSERT on the sink: every batch fails, now.
    await stack.db.query(`revoke insert on ${body.spec.sink} from scalegate_agent`);
    await runLoad({ databaseUrl, source: body.spec.source, partitions: 8, ratePerSec: 1_000, count: 50 });
    await stack.waitFor('the task failing batches', async () => (await taskStatus()).recentErrors > 0);
    const refused = await scale('g-errors', { replicas: 2, soakMs: 0 });
    expect(refused.status).toBe('refused');
    // the recipient's probe finds the missing privilege too
    expect(failedGates(refused)).toEqual(['baseline', 'connectivity']);
    expect(refused.evidenceGap).toMatch(/baseline: baseline is not healthy \(baseline has \d+ task error\(s\) within the agents' error window \(\d+ since the tasks started\)\)/);

    // The privilege is back: the task catches up; its errors stay in its total, and age out of the window.
    await stack.db.query(`grant insert on ${body.spec.sink} to scalegate_agent`);
    await stack.waitFor('all 150 in the sink', async () => (await sinkCount()) === 150);
    const recovered = await stack.waitFor('the errors older than the window', async () => {
      const status = await taskStatus();
      return status.recentErrors === 0 ? status : null;
    });
    expect(recovered.errors).toBeGreaterThan(0);
    expect(recovered.incarnation).toBe(task.incarnation);
    const completed = await scale('g-errors', { replicas: 2, soakMs: 500 });
    expect({ status: completed.status, gates: failedGates(completed), regression: completed.evidence.comparison.reasons })
      .toEqual({ status: 'completed', gates: [], regression: [] });
    expect(completed.evidence.baseline.errors).toBeGreaterThan(0);
    expect(completed.evidence.baseline.recentErrors).toBe(0);
    // its slots back for the tests below
    await retireAndWait(stack, 'g-errors');
  });
});

describe('consumer 2 → 4 under load', () => {
  it('loses and duplicates nothing, keeps per-partition order, and passes the verdict', async () => {
    const body = consumer('orders', 2);
    await define('orders', body, 2);
    const databaseUrl = stack.databaseUrl;
    // The load runs until the scale-out has ended, soak and verdict included (its count only bounds a
    // failed run): the audit below counts what it wrote, and a load still writing at the end proves
    // it spanned the operation.
    const LOAD_BOUND = 40_000;
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: body.spec.source, partitions: 8, ratePerSec: 400, count: LOAD_BOUND, signal: stopLoad.signal });
    const operation = await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: body.spec.source, sink: body.spec.sink })).sinkCount > 200)
      .then(() => scale('orders', { replicas: 4, soakMs: 1500 }))
      .finally(() => stopLoad.abort());
    const written = await load;
    expect(written.written).toBeLessThan(LOAD_BOUND); // still writing when the scale-out ended
    expect({ status: operation.status, kind: operation.kind, gap: operation.evidenceGap }).toEqual({ status: 'completed', kind: 'scaleOut', gap: null });
    expect(operation.gates.passed).toBe(true);
    expect(operation.evidence.comparison.verdict).toBe('pass');
    expect(operation.plan.starts).toHaveLength(2);
    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl, source: body.spec.source, sink: body.spec.sink });
      return a.sinkCount >= written.written ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: written.written, sinkCount: written.written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'orders' })).toEqual([]);
    const tasks = (await tasksOf('orders')).filter((t) => t.state === 'ready');
    expect(tasks).toHaveLength(4);
    expect(tasks.flatMap((t) => t.partitions).sort((a: number, b: number) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=orders&kind=scale-out', { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'completed', fromReplicas: 2, toReplicas: 4 });
  });
});

describe('failure after apply', () => {
  it('a new replica that never becomes ready → converge deadline → replan at the requested size, both in the ledger', async () => {
    const readyFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sg-ready-')), 'ready');
    fs.writeFileSync(readyFile, '');
    const body = {
      kind: 'service', replicas: 1, selector: { pool: 'main' }, contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
      spec: { command: [process.execPath, FIXTURE], env: { READY_FILE: readyFile }, readiness: { http: '/healthz' }, graceMs: 1000 },
    };
    await define('stubborn', body, 1);
    fs.rmSync(readyFile); // new replicas will not become ready
    const response = await stack.api('POST', '/v1/workloads/stubborn/scale', { body: { replicas: 2, soakMs: 0, convergeTimeoutMs: 1000 } });
    expect(response.status).toBe(202);
    await stack.waitFor('compensation started', async () =>
      (await stack.api('GET', '/v1/operations/scale%3Astubborn', { role: 'viewer' })).body.phase === 'compensating', 60_000);
    fs.writeFileSync(readyFile, ''); // the replan's redeploy can converge
    await stack.temporal.workflow.getHandle('scale:stubborn').result();
    const operation = (await stack.api('GET', '/v1/operations/scale%3Astubborn', { role: 'viewer' })).body;
    expect(operation.status).toBe('compensated');
    expect(operation.compensation.reason).toMatch(/converge-deadline|not ready within/);
    expect(operation.compensation.replicas).toBe(2);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=stubborn', { role: 'viewer' })).body.events;
    expect(ledger.map((e: any) => `${e.kind}:${e.outcome}`)).toEqual(expect.arrayContaining(['scale-out:compensated', 'replan:completed']));
    const tasks = await tasksOf('stubborn');
    expect(tasks.filter((t) => t.state === 'ready')).toHaveLength(2);
    expect(tasks.every((t) => /-g2$/.test(t.taskId))).toBe(true); // a new generation
  });
});

describe('durability and input', () => {
  it('completes after the orchestrator worker is killed and restarted mid-workflow', async () => {
    await define('durable', consumer('durable', 1), 1);
    const response = await stack.api('POST', '/v1/workloads/durable/scale', { body: { replicas: 2, approval: 'manual', soakMs: 0 } });
    expect(response.status).toBe(202);
    await stack.waitFor('awaiting approval', async () =>
      (await stack.api('GET', '/v1/operations/scale%3Adurable', { role: 'viewer' })).body.phase === 'awaiting-approval');
    expect((await stack.api('POST', '/v1/workloads/durable/scale', { body: { replicas: 3 } })).body).toMatchObject({ error: 'operation-in-progress', workflowId: 'scale:durable' });
    stack.worker!.kill('SIGKILL');
    await stack.worker!.exited;
    await stack.startWorker();
    const approved = await stack.api('POST', '/v1/operations/scale%3Adurable/approve');
    expect(approved.status).toBe(200);
    await stack.temporal.workflow.getHandle('scale:durable').result();
    expect((await stack.api('GET', '/v1/operations/scale%3Adurable', { role: 'viewer' })).body.status).toBe('completed');
    expect((await tasksOf('durable')).filter((t) => t.state === 'ready')).toHaveLength(2);
  });

  it('refuses invalid input through the API with 422', async () => {
    const { status, body } = await stack.api('POST', '/v1/workloads/orders/scale', { body: { replicas: -1 } });
    expect(status).toBe(422);
    expect(body.message).toMatch(/replicas/);
  });

  it('fails a temporal CLI start with bad input non-retryably, naming the field', async () => {
    const cli = findTemporalCli();
    expect(cli).not.toBeNull();
    const run = await promisify(execFile)(cli!.path, [
      'workflow', 'execute', '--address', testEnv().temporalAddress, '--type', 'scaleOut', '--task-queue', stack.taskQueue,
      '--workflow-id', `cli-bad-${Date.now()}`, '--input', '{"workload":"orders","replicas":"four"}',
    ]).then(() => ({ out: '' }), (error: { stdout: string; stderr: string }) => ({ out: `${error.stdout}\n${error.stderr}` }));
    expect(run.out).toMatch(/invalid input: replicas/);
  });
});
