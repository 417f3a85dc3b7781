// Evidence that proves (issue 22) on the real stack: a workload's required endpoints probed by
// each recipient (the gate names the runtime that cannot reach one), a service's latency judged
// against the baseline (rolled back when it doubles), and a stepped scale-out that ends at the last
// good step. Its own file and stack so that it runs beside scale-out.test.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload, failedGates, retireAndWait, scaleAndWait, tasksOf } from '../../harness/workloads';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `node-${zone}`, labels: { zone, pool: 'main' } })) });
});
afterAll(async () => {
  await stack?.stop();
});

/** The live tasks of a workload, the agents' own list (harness/workloads.ts). */
const liveTasks = (workload: string) => tasksOf(stack, workload);

describe('connectivity and latency', () => {
  it('a required endpoint one recipient cannot reach: refused, naming that runtime and the endpoint; reachable, it goes through', async () => {
    // The endpoint admits only the runtime already hosting the service (an allowlist that refuses the other nodes).
    let admitted: string | null = null;
    const askedBy = new Set<string>();
    const endpoint = http.createServer((request, response) => {
      const runtime = /\(runtime ([a-z0-9-]+)\)/.exec(String(request.headers['user-agent']))?.[1] ?? '?';
      askedBy.add(runtime);
      response.writeHead(admitted === null || runtime === admitted ? 200 : 403).end();
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/healthz`;
    try {
      const name = 'g-requires';
      const [first] = await defineWorkload(stack, name, {
        kind: 'service', replicas: 1, selector: { pool: 'main' }, requires: [{ http: url }],
        contract: SERVICE_CONTRACT,
        spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
      }, 1);
      admitted = first.runtimeId;
      const refused = await scaleAndWait(stack, name, { replicas: 2, soakMs: 0 }, 'scaleOut');
      expect(refused.status).toBe('refused');
      expect(failedGates(refused)).toEqual(['connectivity']);
      const detail = refused.gates.rows.find((row: any) => row.gate === 'connectivity').detail;
      const [, named] = /^(node-[a-z]): cannot reach required http (\S+) \(HTTP 403\)$/.exec(detail) ?? [];
      expect({ detail, named }).toEqual({ detail: `${named}: cannot reach required http ${url} (HTTP 403)`, named: expect.stringMatching(/^node-[a-d]$/) });
      expect(named).not.toBe(first.runtimeId);
      expect(askedBy).toContain(named); // the recipient itself asked
      expect((await liveTasks(name)).length).toBe(1);

      admitted = null;
      const completed = await scaleAndWait(stack, name, { replicas: 2, soakMs: 0 }, 'scaleOut');
      expect(completed.status).toBe('completed');
      expect(completed.gates.rows.find((row: any) => row.gate === 'connectivity').detail).toMatch(/^sources, destinations and 1 required endpoint\(s\) reachable from node-[a-d]$/);
      await retireAndWait(stack, name);
    } finally {
      endpoint.closeAllConnections();
      await new Promise((resolve) => endpoint.close(resolve));
    }
  });


  it('a service whose latency doubles with a second replica is rolled back to one, naming the latency row, its test and both medians', async () => {
    const name = 'g-latency';
    const replicaDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-latency-'));
    await defineWorkload(stack, name, {
      kind: 'service', replicas: 1, selector: { pool: 'main' },
      contract: SERVICE_CONTRACT,
      spec: { command: [process.execPath, FIXTURE], env: { LATENCY_PER_REPLICA_MS: '300', REPLICA_DIR: replicaDir }, readiness: { http: '/healthz' }, graceMs: 500 },
    }, 1);
    // The agent times the readiness path once a second while the task is ready: the baseline holds
    // enough samples (5) for the Mann-Whitney test, and a soak of 6 s gives the after window as many.
    await stack.waitFor('5 latency samples at one replica', async () => {
      const [task] = await liveTasks(name);
      return (task?.latencyMs?.p50 ?? 0) >= 300 && (task?.latencySamples?.length ?? 0) >= 5;
    });

    const operation = await scaleAndWait(stack, name, { replicas: 2, soakMs: 6000 }, 'scaleOut');
    expect(operation.status).toBe('compensated');
    const latency = operation.evidence.comparison.rows.find((r: { check: string }) => r.check === 'latency');
    expect(latency).toMatchObject({ verdict: 'regression' });
    expect({ before: latency.baseline >= 300 && latency.baseline < 450, after: latency.after >= 600 }).toEqual({ before: true, after: true });
    const row = operation.evidence.comparison.reasons.find((reason: string) => reason.startsWith('latency'));
    expect(row).toMatch(/^latency worse beyond the margin: Mann-Whitney U = [\d.]+, p = [\d.e-]+ for after > baseline × 1\.1 \(margin 10 %, confidence 0\.95, n = ([5-9]|\d\d+) before, ([5-9]|\d\d+) after\)$/);
    expect(operation.compensation).toMatchObject({ replicas: 1, reason: expect.stringContaining(row) });
    await stack.waitFor(`${name} back at one replica`, async () => (await liveTasks(name)).filter((t) => t.state === 'ready').length === 1 && (await liveTasks(name)).length === 1);
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${name}&kind=scale-out`, { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'compensated', reason: expect.stringContaining('latency worse beyond the margin') });

    await retireAndWait(stack, name);
    fs.rmSync(replicaDir, { recursive: true, force: true });
  });
});

describe('the smallest step first', () => {
  it('2 → 8 in steps [2, 2, "rest"]: a regression at the third step ends at the second step\'s size, saying so', async () => {
    // Eight runtimes of their own (a service runs one replica per runtime).
    await Promise.all(Array.from({ length: 8 }, (_, i) => stack.startAgent({ id: `step-${i + 1}`, labels: { pool: 'steps' } })));
    const name = 'g-steps';
    const replicaDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-steps-'));
    await defineWorkload(stack, name, {
      kind: 'service', replicas: 2, selector: { pool: 'steps' },
      contract: SERVICE_CONTRACT,
      // fast up to 6 live replicas, 80 ms per replica past them (640 ms at 8): the third step regresses
      spec: { command: [process.execPath, FIXTURE], env: { LATENCY_PER_REPLICA_MS: '80', SLOW_ABOVE_REPLICAS: '6', REPLICA_DIR: replicaDir }, readiness: { http: '/healthz' }, graceMs: 500 },
    }, 2);
    await stack.waitFor('latency samples at two replicas', async () => (await liveTasks(name)).every((t) => t.latencyMs !== undefined));

    const operation = await scaleAndWait(stack, name, { replicas: 8, soakMs: 1500, steps: [2, 2, 'rest'] }, 'scaleOut');
    expect(operation.status).toBe('compensated');
    expect(operation.steps.map((step: any) => `${step.size}:${step.outcome} ${step.reasons.join('; ')}`)).toEqual(['4:good ', '6:good ', expect.stringMatching(/^8:regression /)]);
    // by the Mann-Whitney test where both windows hold 5 samples, else by the fixed rule (saying so in the row)
    expect(operation.steps[2].reasons.join('; ')).toMatch(/^(p50 latency grew from [\d.]+ to [\d.]+ ms|latency worse beyond the margin: Mann-Whitney U)/);
    expect(operation.compensation).toMatchObject({ replicas: 6, reason: expect.stringMatching(/^regression after scale-out \(step 3 of 3, size 8\): (p50 latency grew|latency worse beyond the margin).*\(rolling back to 6, the last good step\)$/) });
    await stack.waitFor(`${name} at the second step's size`, async () => {
      const tasks = await liveTasks(name);
      return tasks.length === 6 && tasks.every((t) => t.state === 'ready');
    });
    const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    expect(state.workloads.find((w: any) => w.name === name)).toMatchObject({ desired: 6 });
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${name}&kind=scale-out`, { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'compensated', reason: expect.stringContaining('step 3 of 3') });

    await retireAndWait(stack, name);
    fs.rmSync(replicaDir, { recursive: true, force: true });
  });

  it('a Temporal cancellation (the Web UI\'s Request Cancellation) in the first step\'s soak is compensated at that step\'s size', async () => {
    const name = 'g-steps-cancel';
    await defineWorkload(stack, name, {
      kind: 'service', replicas: 2, selector: { pool: 'main' },
      contract: SERVICE_CONTRACT,
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
    }, 2);
    const started = await stack.api('POST', `/v1/workloads/${name}/scale`, { body: { replicas: 4, soakMs: 60_000, steps: [1, 'rest'] } });
    expect(started.status).toBe(202);
    const view = async () => (await stack.api('GET', `/v1/operations/${encodeURIComponent(started.body.workflowId)}`, { role: 'viewer' })).body;
    await stack.waitFor('the first step soaking', async () => {
      const current = await view();
      return current.phase === 'soaking' && current.steps?.[0]?.outcome === 'pending';
    });
    await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).cancel();
    const ended = await stack.waitFor('the cancelled scale-out ended', async () => {
      const current = await view();
      return current.status !== 'running' ? current : null;
    });
    expect(ended).toMatchObject({ status: 'compensated', compensation: { replicas: 3 } });
    expect(ended.steps.map((step: any) => `${step.size}:${step.outcome}`)).toEqual(['3:pending', '4:pending']);
    await stack.waitFor(`${name} at the first step's size`, async () => {
      const tasks = await liveTasks(name);
      return tasks.length === 3 && tasks.every((t) => t.state === 'ready');
    });
    await retireAndWait(stack, name);
  });
});

describe('steps a workload declares', () => {
  it('are its scale-outs\' when the request gives none: 1 → 2 → 3, each compared before the next', async () => {
    const name = 'g-own-steps';
    await defineWorkload(stack, name, {
      kind: 'service', replicas: 1, selector: { pool: 'main' }, steps: [1],
      contract: SERVICE_CONTRACT,
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
    }, 1);
    const operation = await scaleAndWait(stack, name, { replicas: 3, soakMs: 0 }, 'scaleOut');
    expect(operation.status).toBe('completed');
    expect(operation.steps.map((step: any) => `${step.size}:${step.outcome}`)).toEqual(['2:good', '3:good']);
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${name}&kind=scale-out`, { role: 'viewer' })).body.events;
    expect(ledger[0]).toMatchObject({ outcome: 'completed', inputs: { steps: [2, 3] } });
    await retireAndWait(stack, name);
  });
});
