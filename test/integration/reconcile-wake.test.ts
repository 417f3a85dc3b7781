// The reconcile loop woken by the API (workflows/reconcile.ts `wake`): on a stack whose loop passes
// only every 10 minutes, a workload PUT is placed at once, and so is an `all` workload's task on a
// runtime that registers. Without the wake each would wait for the interval (and these tests time out).
// A cancellation of the loop still ends it (the woken timer's cancellation is not mistaken for it).
import path from 'node:path';
import { startStack, Stack } from '../../harness/stack';
import { tasksOf } from '../../harness/workloads';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const service = (replicas: number | 'all') => ({ kind: 'service', replicas, spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 } });
const TEN_MINUTES = 600_000;

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, env: { SCALEGATE_RECONCILE_INTERVAL_MS: String(TEN_MINUTES) }, agents: [{ id: 'wake-a', labels: { zone: 'a' } }] });
  // The loop's first pass (at the worker's start) is behind it: what follows is left to wakes and the 10-minute timer.
  await stack.waitFor('the reconcile loop waiting for its next pass', async () => (await stack.db.query('select passes + skips as n from reconcile_state')).rows[0].n >= 1);
});
afterAll(async () => {
  await stack?.stop();
});

const ready = (name: string, count: number) =>
  stack.waitFor(`${count} ready task(s) of ${name}`, async () => (await tasksOf(stack, name)).filter((t) => t.state === 'ready').length === count, 30_000);

it('a workload PUT is placed at once, not at the next interval', async () => {
  expect((await stack.api('PUT', '/v1/workloads/woken', { body: service(1) })).status).toBe(201);
  await ready('woken', 1);
});

it('a runtime that registers gets its task of an `all` workload at once', async () => {
  expect((await stack.api('PUT', '/v1/workloads/everywhere', { body: service('all') })).status).toBe(201);
  await ready('everywhere', 1);
  await stack.startAgent({ id: 'wake-b', labels: { zone: 'b' } });
  await ready('everywhere', 2);
});

it('a cancelled loop ends cancelled, woken or not', async () => {
  const loop = stack.temporal.workflow.getHandle(`reconcile:${stack.taskQueue}`);
  await loop.signal('wake');
  await loop.cancel();
  await expect(loop.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
});
