// Supervision on the real stack (issue 33 item 3, DESIGN.md §3 "Supervision"): a service replica
// whose process is SIGKILLed is started again by its agent on the same task id and port, and its
// restart shows in the agent's task list, GET /v1/state, `scalegate state` and the metrics; a
// replica that crash-loops makes its workload degraded, records the control plane's decision, and
// refuses a scale-out's baseline gate, named, until it runs healthy again.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../support/cli';
import { startStack, type Stack } from '../support/stack';
import { defineWorkload, failedGates, scaleAndWait, tasksOf } from '../support/workloads';

const FIXTURE = path.resolve(__dirname, '../fixtures/http-server.js');
const CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    agents: ['a', 'b'].map((zone) => ({ id: `sup-${zone}`, labels: { zone, pool: 'sup' } })),
    // Restarts after 200 ms doubling to 1 s; 3 within a minute are a crash loop; 2 s ready is healthy.
    env: {
      SCALEGATE_RESTART_BACKOFF_MS: '200', SCALEGATE_RESTART_BACKOFF_MAX_MS: '1000', SCALEGATE_RESTART_HEALTHY_MS: '2000',
      SCALEGATE_CRASH_LOOP_RESTARTS: '3', SCALEGATE_CRASH_LOOP_WINDOW_MS: '60000',
      // each exit is a task error: after 1 s it is no longer the current error rate the baseline judges
      SCALEGATE_ERROR_WINDOW_MS: '1000',
    },
  });
});
afterAll(async () => {
  await stack?.stop();
});

function getJson(port: number): Promise<any> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve(JSON.parse(body)));
    }).on('error', reject);
  });
}

const state = async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
const placedTaskOf = async (workload: string, taskId: string) =>
  (await state()).workloads.find((w: any) => w.name === workload)?.tasks.find((t: any) => t.taskId === taskId);

it('a SIGKILLed service replica is restarted on its port: restarts 1 in the agent, /v1/state, `scalegate state` and the metrics', async () => {
  const [task] = await defineWorkload(stack, 'sup-web', {
    kind: 'service', replicas: 1, selector: { pool: 'sup' }, contract: CONTRACT,
    spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 1000 },
  }, 1);
  expect(task.counts.restarts).toBe(0);
  process.kill(task.counts.pid, 'SIGKILL');

  const restarted = await stack.waitFor('the replica restarted and ready', async () =>
    (await tasksOf(stack, 'sup-web')).find((t) => t.taskId === task.taskId && t.state === 'ready' && t.counts.pid !== task.counts.pid) ?? null);
  expect(restarted).toMatchObject({ ports: task.ports, counts: { restarts: 1 }, lastExit: { signal: 'SIGKILL' } });
  expect(restarted.incarnation).not.toBe(task.incarnation);
  expect(await getJson(task.ports.public)).toMatchObject({ taskId: task.taskId, incarnation: restarted.incarnation });

  // The next heartbeat carries it to the control plane.
  const placed = await stack.waitFor('restarts 1 in /v1/state', async () => {
    const t = await placedTaskOf('sup-web', task.taskId);
    return t?.restarts === 1 && t.state === 'ready' ? t : null;
  });
  expect(placed).toMatchObject({ runtimeId: task.runtimeId, crashLooping: false, lastExit: { code: null, signal: 'SIGKILL' }, nextRestartAt: null });
  expect((await state()).workloads.find((w: any) => w.name === 'sup-web')).toMatchObject({ status: 'placed', ready: 1 });

  const cli = await runCli(stack, ['state']);
  expect(cli.code).toBe(0);
  const line = cli.stdout.split('\n').find((l) => l.includes(task.taskId));
  expect(line).toBeDefined();
  expect(line!.trim().split(/\s+/)).toEqual(['sup-web', task.taskId, task.runtimeId, 'ready', '1', 'no', expect.stringMatching(/^r-[0-9a-f]{12}$/)]);

  const metrics = (await stack.api('GET', '/metrics', { role: null })).body as string;
  expect(metrics).toMatch(/^scalegate_task_restarts\{workload="sup-web"\} 1$/m);
});

it('a crash-looping replica degrades its workload, is recorded with the decision, and refuses a scale-out naming it until it runs healthy', async () => {
  const flag = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sg-sup-')), 'may-run');
  fs.writeFileSync(flag, '');
  // Runs the fixture while the flag exists, and exits at once (code 3) once it is gone.
  const [task] = await defineWorkload(stack, 'sup-crash', {
    kind: 'service', replicas: 1, selector: { pool: 'sup' }, contract: CONTRACT,
    spec: { command: ['/bin/sh', '-c', `test -f "$FLAG" || exit 3; exec "${process.execPath}" "${FIXTURE}"`], env: { FLAG: flag }, readiness: { http: '/healthz' }, graceMs: 1000 },
  }, 1);
  fs.rmSync(flag);
  process.kill(task.counts.pid, 'SIGKILL');

  const looping = await stack.waitFor('the crash loop in /v1/state', async () =>
    (await state()).crashLooping.find((c: any) => c.taskId === task.taskId) ?? null);
  expect(looping).toMatchObject({ workload: 'sup-crash', runtimeId: task.runtimeId, lastExit: { code: 3 } });
  expect(looping.restarts).toBeGreaterThanOrEqual(3);
  expect(looping.reason).toMatch(new RegExp(`^crash-looping: task ${task.taskId} on ${task.runtimeId} restarted \\d+ time\\(s\\), last exit code 3; left running with its backoff`));
  const s = await state();
  expect(s.workloads.find((w: any) => w.name === 'sup-crash')).toMatchObject({ status: 'degraded', ready: 0 });
  expect(s.runtimeEvents).toContainEqual(expect.objectContaining({ type: 'task.crash-looping', subject: task.taskId, detail: expect.objectContaining({ decision: 'left running with its backoff' }) }));
  expect((await runCli(stack, ['state'])).stdout).toContain(looping.reason.slice(0, looping.reason.indexOf(' restarted')));

  const refused = await scaleAndWait(stack, 'sup-crash', { replicas: 2, soakMs: 0 }, 'scaleOut');
  expect(refused.status).toBe('refused');
  expect(failedGates(refused)).toEqual(['baseline']);
  expect(refused.evidenceGap).toMatch(new RegExp(`^baseline: baseline is not healthy: task ${task.taskId} on ${task.runtimeId} is crash-looping`, 'm'));
  expect((await tasksOf(stack, 'sup-crash')).map((t) => t.taskId)).toEqual([task.taskId]); // nothing started

  // Allowed to run again, its next restart stays up: once healthy (2 s ready) the scale-out passes.
  fs.writeFileSync(flag, '');
  await stack.waitFor('sup-crash placed again, nothing crash-looping', async () => {
    const now = await state();
    return now.crashLooping.length === 0 && now.workloads.find((w: any) => w.name === 'sup-crash')?.status === 'placed';
  });
  const scaled = await scaleAndWait(stack, 'sup-crash', { replicas: 2, soakMs: 0 }, 'scaleOut');
  expect({ status: scaled.status, evidenceGap: scaled.evidenceGap }).toEqual({ status: 'completed', evidenceGap: null });
});
