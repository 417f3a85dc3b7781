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
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, failedGates, scaleAndWait, tasksOf } from '../../harness/workloads';

const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    // three: a crash-looping replica moves to a runtime that does not host its workload yet
    agents: ['a', 'b', 'c'].map((zone) => ({ id: `sup-${zone}`, labels: { zone, pool: 'sup' } })),
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

  // handleCrashLoops decides: its only replica crash-loops, so the fault is the workload's own, and it is left.
  const looping = await stack.waitFor('the crash loop in /v1/state, decided', async () =>
    (await state()).crashLooping.find((c: any) => c.taskId === task.taskId && c.decision !== null) ?? null);
  expect(looping).toMatchObject({ workload: 'sup-crash', runtimeId: task.runtimeId, lastExit: { code: 3 }, decision: 'leave' });
  expect(looping.restarts).toBeGreaterThanOrEqual(3);
  expect(looping.reason).toMatch(new RegExp(`^crash-looping: task ${task.taskId} on ${task.runtimeId} restarted \\d+ time\\(s\\), last exit code 3; left running with its backoff: every replica of sup-crash crash-loops \\(1 of 1, last exit code 3\\)`));
  const s = await state();
  expect(s.workloads.find((w: any) => w.name === 'sup-crash')).toMatchObject({ status: 'degraded', ready: 0 });
  expect(s.runtimeEvents).toContainEqual(expect.objectContaining({ type: 'task.crash-looping', subject: task.taskId, detail: expect.objectContaining({ decidedBy: 'crash-loops:sup-crash' }) }));
  expect(s.runtimeEvents).toContainEqual(expect.objectContaining({ type: 'task.crash-loop-decided', subject: task.taskId, detail: expect.objectContaining({ action: 'leave', runtimeId: task.runtimeId }) }));
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

it('a replica crash-looping on one runtime while the other runs healthy is moved off it through recovery\'s path', async () => {
  const crashHere = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-sup-move-'));
  // Exits at once (code 3) while a file named after its task id exists: a fault of where this one replica runs.
  const tasks = await defineWorkload(stack, 'sup-move', {
    kind: 'service', replicas: 2, selector: { pool: 'sup' }, contract: CONTRACT,
    spec: {
      command: ['/bin/sh', '-c', `test -f "$CRASH_HERE/$SCALEGATE_TASK_ID" && exit 3; exec "${process.execPath}" "${FIXTURE}"`],
      env: { CRASH_HERE: crashHere }, readiness: { http: '/healthz' }, graceMs: 1000,
    },
  }, 2);
  expect(new Set(tasks.map((t) => t.runtimeId)).size).toBe(2);
  const [victim, healthy] = tasks;
  fs.writeFileSync(path.join(crashHere, victim.taskId), '');
  process.kill(victim.counts.pid, 'SIGKILL');

  // Decided `move`: recovery's plan replaces it on the other runtime, applied by applyPlan under scale:sup-move.
  const decided = await stack.waitFor('the move decided', async () =>
    (await stack.db.query(`select detail from events where type = 'task.crash-loop-decided' and subject = $1`, [victim.taskId])).rows[0]?.detail ?? null);
  expect(decided).toMatchObject({ reason: expect.any(String), action: 'move', runtimeId: victim.runtimeId, workload: 'sup-move', planId: expect.any(String) });
  expect(decided.reason).toBe(`task ${victim.taskId} on ${victim.runtimeId} crash-loops, last exit code 3 while 1 other replica(s) of sup-move run healthy: moved off ${victim.runtimeId} through recovery's path`);
  const moved = await stack.waitFor('two ready replicas, the crash-looping one gone', async () => {
    const now = await tasksOf(stack, 'sup-move');
    return now.length === 2 && now.every((t) => t.state === 'ready') && !now.some((t) => t.taskId === victim.taskId) ? now : null;
  });
  const replacement = moved.find((t) => t.taskId !== healthy.taskId)!;
  expect([victim.runtimeId, healthy.runtimeId]).not.toContain(replacement.runtimeId);
  expect(moved.find((t) => t.taskId === healthy.taskId)?.incarnation).toBe(healthy.incarnation); // the healthy one untouched
  // /v1/state reads what the agents' next heartbeats report
  const after = await stack.waitFor('sup-move ready 2 in /v1/state', async () => {
    const now = await state();
    return now.workloads.find((w: any) => w.name === 'sup-move')?.ready === 2 ? now : null;
  });
  expect(after.workloads.find((w: any) => w.name === 'sup-move')).toMatchObject({ status: 'placed', desired: 2, ready: 2 });
  expect(after.crashLooping.filter((c: any) => c.workload === 'sup-move')).toEqual([]);
  // the apply writes its ledger row at its end, after it stopped the crash-looping task
  const row = await stack.waitFor('the move\'s apply in the ledger', async () =>
    ((await stack.api('GET', '/v1/ledger?workload=sup-move', { role: 'viewer' })).body.events as any[]).find((e) => e.planId === decided.planId && e.outcome));
  expect(row).toMatchObject({ kind: 'apply', outcome: 'completed', reason: `crash loop: ${decided.reason}` });
  fs.rmSync(crashHere, { recursive: true, force: true });
});
