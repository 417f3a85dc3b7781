// Unambiguous starts (DESIGN.md §4): a 503 means nothing started, ever, and a retry with the same
// Idempotency-Key answers the operation that key started. Temporal is paused for real: this file's
// own dev server gets SIGSTOP while a scale is asked, and SIGCONT after the API answered.
import path from 'node:path';
import { startTemporalOnFreePorts, type RunningTemporal } from '../../embedded/temporal-server';
import { ADMIT_BY_MEMO } from '../../protocol';
import { testEnv } from '../../harness/env';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload } from '../../harness/workloads';

const FIXTURE = path.join(__dirname, '..', '..', 'harness', 'fixtures', 'http-server.js');
const body = {
  kind: 'service', replicas: 1, contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 1000 },
};

let stack: Stack;
/** This file pauses its Temporal server (SIGSTOP): a server of its own, so the files beside it keep theirs. */
let temporal: RunningTemporal;

beforeAll(async () => {
  temporal = await startTemporalOnFreePorts({ logFile: path.join(testEnv().tmpDir, 'temporal-unambiguous.log') });
  // A short request deadline: the admission deadline is 1 s after the request arrives.
  stack = await startStack({ temporalAddress: temporal.address, env: { SCALEGATE_REQUEST_DEADLINE_MS: '3000' }, agents: [{ id: 'us-a' }, { id: 'us-b' }] });
});
afterAll(async () => {
  await stack?.stop();
  await temporal?.stop();
});

it('a scale answered 503 while Temporal is paused never starts afterwards; a retry with the same Idempotency-Key returns the one it started', async () => {
  await defineWorkload(stack, 'paused', body, 1);
  const before = (await stack.api('GET', '/v1/workloads/paused', { role: 'viewer' })).body;
  const scale = (key: string) => fetch(`${stack.apiUrl}/v1/workloads/paused/scale`, {
    method: 'POST', body: JSON.stringify({ replicas: 2, soakMs: 0 }),
    headers: { authorization: `Bearer ${stack.tokens.operator}`, 'content-type': 'application/json', 'idempotency-key': key },
  }).then(async (r) => ({ status: r.status, body: await r.json() as any }));

  const applied = (await stack.temporal.workflow.getHandle('scale:paused').describe()).runId; // the definition's apply
  // Temporal paused: the start the API sends waits in the server's socket, and reaches it late.
  process.kill(temporal.pid!, 'SIGSTOP');
  let refused;
  try {
    refused = await scale('retry-me-1');
  } finally {
    process.kill(temporal.pid!, 'SIGCONT');
  }
  expect(refused.status).toBe(503);
  expect(refused.body.message).toMatch(/nothing was started/);

  const untouched = (await stack.api('GET', '/v1/workloads/paused', { role: 'viewer' })).body;
  expect(untouched.placement.fence).toBe(before.placement.fence);
  expect(untouched.replicas).toBe(1);

  // The retry with the same key starts it now; every further retry answers that same operation.
  // The held start may reach Temporal just before it: that late copy holds scale:paused until it has
  // refused itself (checked below), and the retry is then refused 409 like any request meeting a
  // running operation; it asks again once that run ended, as a client does.
  let started = await scale('retry-me-1');
  for (let retry = 0; retry < 3 && started.status === 409 && started.body.error === 'operation-in-progress'; retry++) {
    await stack.temporal.workflow.getHandle('scale:paused').result().catch(() => null);
    started = await scale('retry-me-1');
  }
  expect(started.status).toBe(202);
  expect(started.body.runId).not.toBe(applied);
  const again = await scale('retry-me-1');
  expect(again).toEqual({ status: 202, body: started.body });
  await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result();
  expect((await stack.api('GET', '/v1/workloads/paused', { role: 'viewer' })).body.replicas).toBe(2);
  const afterDone = await scale('retry-me-1');
  expect(afterDone).toEqual({ status: 202, body: started.body });
  // Counted: one scale-out ran, the retry's; the request answered 503 ran nowhere (a late copy of it refuses itself).
  const ledger = (await stack.api('GET', '/v1/ledger?workload=paused&kind=scale-out', { role: 'viewer' })).body.events;
  expect(ledger.map((e: any) => `${e.workflowId}/${e.runId}:${e.outcome}`)).toEqual([`scale:paused/${started.body.runId}:completed`]);
  // Any other run of scale:paused is the held start, arrived after the API's 503: it refused itself.
  const runs: { runId: string; status: string }[] = [];
  for await (const run of stack.temporal.workflow.list({ query: 'WorkflowId = "scale:paused"' })) runs.push({ runId: run.runId, status: run.status.name });
  for (const late of runs.filter((r) => r.runId !== applied && r.runId !== started.body.runId)) {
    expect(late.status).toBe('FAILED');
    const failure = await stack.temporal.workflow.getHandle('scale:paused', late.runId).result().then(() => null, (e: Error) => e);
    expect(String((failure?.cause as Error | undefined)?.message)).toMatch(/after its admission deadline/);
  }

  // The same key on another request is refused, naming what it started; a malformed key is a 400.
  const other = await fetch(`${stack.apiUrl}/v1/runtimes/us-a/recover`, {
    method: 'POST', body: '{}', headers: { authorization: `Bearer ${stack.tokens.operator}`, 'content-type': 'application/json', 'idempotency-key': 'retry-me-1' },
  });
  expect(other.status).toBe(422);
  expect(await other.json()).toMatchObject({ error: 'idempotency-key-reused', workflowId: 'scale:paused', runId: started.body.runId });
  const malformed = await scale('not a key!');
  expect(malformed.status).toBe(400);
});

it('a start that reaches Temporal after its admission deadline refuses itself before any command', async () => {
  await defineWorkload(stack, 'late', body, 1);
  const before = (await stack.api('GET', '/v1/workloads/late', { role: 'viewer' })).body;
  // What a start held up past the API's 503 looks like when it finally arrives: the deadline is behind it.
  const handle = await stack.temporal.workflow.start('scaleOut', {
    taskQueue: stack.taskQueue, workflowId: 'scale:late', args: [{ workload: 'late', replicas: 2, soakMs: 0 }],
    memo: { [ADMIT_BY_MEMO]: new Date(Date.now() - 1000).toISOString() },
  });
  const failure = await handle.result().then(() => null, (e: Error) => e);
  expect(String((failure?.cause as Error | undefined)?.message)).toMatch(/after its admission deadline/);
  const history = await handle.fetchHistory();
  expect(history.events?.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
  // Nothing changed, as the API's 503 said: its outcome is refused, not failed (chaos seed 34).
  expect((await handle.describe()).searchAttributes?.ScalegateOutcome).toEqual(['refused']);
  const after = (await stack.api('GET', '/v1/workloads/late', { role: 'viewer' })).body;
  expect(after.placement.fence).toBe(before.placement.fence);
  expect(after.replicas).toBe(1);
});

it('a start Temporal took in time runs even when no worker picks it up until after the admission deadline', async () => {
  await defineWorkload(stack, 'awaited', body, 1);
  // Every worker away (a deploy, or busy elsewhere): Temporal records the start, nobody runs it yet.
  await stack.worker!.stop(5000);
  const started = await stack.api('POST', '/v1/workloads/awaited/scale', { body: { replicas: 2, soakMs: 0 } });
  expect(started.status).toBe(202);
  const handle = stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId);
  const admitBy = Date.parse((await handle.describe()).memo?.[ADMIT_BY_MEMO] as string);
  await stack.waitFor('the admission deadline behind us', async () => Date.now() > admitBy + 200);
  await stack.startWorker();
  // The 202 stands: the run is judged by Temporal's record of the start, not by when a worker took it.
  const status = await handle.result();
  expect(status.outcome).toBe('completed');
  expect((await stack.api('GET', '/v1/workloads/awaited', { role: 'viewer' })).body.replicas).toBe(2);
});

it('a workload PUT while Temporal is paused is answered at once; its wake of the reconcile loop gives up at its deadline, and the loop places the workload once Temporal is back', async () => {
  const gaveUp = () => stack.logs.filter((line) => line.includes('the reconcile loop was not woken')).length;
  const before = gaveUp();
  process.kill(temporal.pid!, 'SIGSTOP');
  try {
    expect((await stack.api('PUT', '/v1/workloads/put-paused', { body })).status).toBe(201);
    // Still paused: the wake did not wait for Temporal (without its deadline it would, and nothing would be logged yet).
    await stack.waitFor('the wake given up', async () => gaveUp() > before, 20_000);
  } finally {
    process.kill(temporal.pid!, 'SIGCONT');
  }
  await stack.waitFor('put-paused placed by the loop\'s own pass', async () => {
    const { body: workload } = await stack.api('GET', '/v1/workloads/put-paused', { role: 'viewer' });
    return (workload.placement?.assignments.length ?? 0) === 1;
  });
});
