// Activities are retried after they took effect (a reply lost on the wire, a worker that died
// after the call): each must then answer as the first call did (issue 9, item 5).
//
// - A placement write retried after it committed returns that commit, not `stale-plan`.
// - A stop retried after the drain finished answers the same drain receipt, also from an agent
//   restarted from its state folder.
// - A crash-loop decision retried after it recorded a move answers that move (one plan, one event),
//   not a 'leave' that counts its own move among the recent ones.
// Real PostgreSQL (the shared test server), real task hosts running real child processes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Pool } from 'pg';
import { createProcessDriver } from '../../agent/drivers/process';
import { TaskHost } from '../../agent/host';
import { PortAllocator } from '../../agent/ports';
import { createPlanner } from '../../store/planner';
import { createActivityDeps } from '../../activities/deps';
import { createActivities } from '../../activities';
import type { TaskStart } from '../../protocol';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createTestDatabase } from '../../harness/database';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor } from '../../harness/wait-for';

const HTTP_SERVER = path.resolve(__dirname, '../../harness/fixtures/http-server.js');

let db: Pool;
let block: PortRange;
const roots: string[] = [];
const hosts: TaskHost[] = [];

beforeAll(async () => {
  db = createPool((await createTestDatabase('retry')).databaseUrl, { max: 4 });
  await migrate(db);
  block = await reservePortRange();
});
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.close()));
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  block?.release();
  await db?.end();
});

describe('a placement write retried after it committed', () => {
  it('returns the write it already made instead of failing its own compare-and-set', async () => {
    const deps = createActivityDeps({ db });
    const activities = createActivities(deps);
    await deps.stores.runtimes.register({ id: 'rt-a', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 4 }, 60_000);
    await deps.stores.registry.putWorkload('web', { kind: 'service', replicas: 1, selector: {}, contract: { ownership: 'none', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' }, spec: { command: ['node', 'x.js'], env: {}, graceMs: 100 } });
    const workload = await deps.stores.registry.getWorkload('web');
    const plan = await createPlanner(deps.stores, Date.now).plan(workload!, 1, {});
    const write = {
      workload: 'web', basis: plan.basis, assignments: plan.target, generation: plan.generation,
      unplaced: plan.unplaced, writer: 'test', planId: plan.id,
    };

    const first = await activities.commitPlacement(write);
    const retried = await activities.commitPlacement(write); // the same call again: its reply was lost
    expect(retried).toEqual(first);
    expect(first.fence).toBe(plan.basis.placementFence + 1);
    expect((await deps.stores.registry.getPlacement('web'))?.fence).toBe(first.fence);

    // Another plan on the same (now moved) basis is still refused: recognition is by plan id only.
    await expect(activities.commitPlacement({ ...write, planId: 'plan-someone-else' })).rejects.toMatchObject({ type: 'stale-plan' });
  });
});

describe('a crash-loop decision retried after it took effect', () => {
  it('answers the move it recorded: one plan, one event, the same plan id', async () => {
    const deps = createActivityDeps({ db });
    const activities = createActivities(deps);
    const fences: Record<string, number> = {};
    for (const id of ['rt-loop-a', 'rt-loop-b', 'rt-loop-c']) {
      fences[id] = (await deps.stores.runtimes.register({ id, endpoint: 'http://127.0.0.1:9', labels: { pool: 'loop' }, slots: 4 }, 60_000)).fence;
    }
    await deps.stores.registry.putWorkload('loopy', { kind: 'service', replicas: 2, selector: { pool: 'loop' }, contract: { ownership: 'none', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' }, spec: { command: ['node', 'x.js'], env: {}, graceMs: 100 } });
    const plan = await createPlanner(deps.stores, Date.now).plan((await deps.stores.registry.getWorkload('loopy'))!, 2, {});
    await activities.commitPlacement({ workload: 'loopy', basis: plan.basis, assignments: plan.target, generation: plan.generation, unplaced: plan.unplaced, writer: 'test', planId: plan.id });
    const [looping, healthy] = (await deps.stores.registry.getPlacement('loopy'))!.assignments;
    expect(looping.runtimeId).not.toBe(healthy.runtimeId);
    const report = (a: typeof looping, crashLooping: boolean) => ({ taskId: a.taskId, workload: 'loopy', incarnation: 'i-1', state: crashLooping ? 'restarting' as const : 'ready' as const, counts: { restarts: crashLooping ? 3 : 0 }, errors: 0, crashLooping });
    await deps.stores.runtimes.heartbeat(looping.runtimeId, fences[looping.runtimeId], [report(looping, true)], 60_000);
    await deps.stores.runtimes.heartbeat(healthy.runtimeId, fences[healthy.runtimeId], [report(healthy, false)], 60_000);

    // The same activity execution twice: its first reply was lost, Temporal runs it again.
    const attempt = new MockActivityEnvironment({ activityId: '7', workflowExecution: { workflowId: 'crash-loops:loopy', runId: 'run-1' } });
    const input = { workload: 'loopy', runtimeId: looping.runtimeId, taskId: looping.taskId, windowMs: 60_000 };
    const first = await attempt.run(activities.decideCrashLoop, input);
    expect(first).toMatchObject({ action: 'move', planId: expect.any(String) });
    const retried = await attempt.run(activities.decideCrashLoop, input);
    expect(retried).toEqual(first);
    const events = (await db.query(`select count(*)::int as n from events where type = 'task.crash-loop-decided' and subject = $1`, [looping.taskId])).rows[0].n;
    expect(events).toBe(1);

    // Another decision (another activity) about the same task decides anew: a move within the window already.
    const later = await new MockActivityEnvironment({ activityId: '8', workflowExecution: { workflowId: 'crash-loops:loopy', runId: 'run-1' } }).run(activities.decideCrashLoop, input);
    expect(later).toMatchObject({ action: 'leave', planId: null, reason: expect.stringMatching(/moved already within the crash-loop window/) });
  });
});

describe('a stop retried after the drain finished', () => {
  function host(stateDir: string, range: PortRange): TaskHost {
    const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 0 });
    const created = new TaskHost({ service: createProcessDriver({ runtimeId: 'rt-retry', stateDir, log: () => {} }, ports) }, { stateDir });
    hosts.push(created);
    return created;
  }

  it('answers the same receipt, also after the agent restarted', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-retry-'));
    roots.push(root);
    const stateDir = path.join(root, 'agent');
    const range = block.slice(0, 16);
    const first = host(stateDir, range);
    const start: TaskStart = {
      taskId: 'web-0-g1', workload: 'web', kind: 'service', index: 0, generation: 1, placementFence: 1,
      spec: { command: [process.execPath, HTTP_SERVER], readiness: { http: '/healthz' } },
    };
    await first.ensure(start);
    await waitFor('the task ready', () => first.get(start.taskId)?.state === 'ready');

    const receipt = await first.drainTask(start.taskId, { graceMs: 5_000 });
    expect(receipt).toMatchObject({ taskId: start.taskId, inFlight: 0 });
    expect(first.get(start.taskId)).toBeNull();
    expect(await first.drainTask(start.taskId)).toEqual(receipt); // the retry of a stop whose reply was lost
    await first.close();

    const restarted = host(stateDir, range);
    await restarted.restore();
    expect(restarted.get(start.taskId)).toBeNull(); // not started again
    expect(await restarted.drainTask(start.taskId)).toEqual(receipt);
    expect(await restarted.drainTask('never-hosted-0-g1')).toBeNull();
  });
});
