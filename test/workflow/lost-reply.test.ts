// A placement write whose reply was lost (issue 9, item 5): the write committed, the activity
// failed anyway, Temporal retried it. The retry must recognise its own earlier success, so the
// operation completes instead of ending failed with the placement changed and nothing started.
//
// Real Temporal (the shared test server), real PostgreSQL, the real activities and workflow bundle;
// only the agent port is an in-memory fake (no agent is the point here), and commitPlacement's
// first reply is dropped after its real commit.
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import { createActivities } from '../../activities';
import type { AgentClient } from '../../activities/agent-client';
import { createActivityDeps } from '../../activities/deps';
import { createPlanner } from '../../store/planner';
import type { TaskStatus } from '../../protocol';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { applyPlan } from '../../workflows/apply-plan';
import { createTestDatabase } from '../../harness/database';
import { testEnv } from '../../harness/env';

let db: Pool;
let connection: Connection;
let nativeConnection: NativeConnection;

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') }); // the dropped reply is logged as a warning by design
  db = createPool((await createTestDatabase('lost')).databaseUrl, { max: 4 });
  await migrate(db);
  connection = await Connection.connect({ address: testEnv().temporalAddress });
  nativeConnection = await NativeConnection.connect({ address: testEnv().temporalAddress });
});
afterAll(async () => {
  await nativeConnection?.close();
  await connection?.close();
  await db?.end();
});

/** Agents that start every task at once and report it ready. */
function readyAgents(): AgentClient {
  const status = (taskId: string): TaskStatus => ({ taskId, workload: 'web', incarnation: `${taskId}-1`, state: 'ready', counts: {}, errors: 0, generation: 1 });
  return {
    startTask: async (_agent, taskId) => status(taskId),
    drainTask: async () => ({ state: 'absent' }),
    taskStatus: async (_agent, taskId) => status(taskId),
    listTasks: async () => [],
    probe: async () => ({ source: { ok: true, detail: 'fake' }, destination: { ok: true, detail: 'fake' } }),
    checkpointClock: async () => {
      throw new Error('no stream job here');
    },
    armCutover: async () => {
      throw new Error('no stream job here');
    },
  };
}

it('completes an applyPlan whose placement write committed but whose reply was lost', async () => {
  const deps = { ...createActivityDeps({ db }), agents: readyAgents() };
  const real = createActivities(deps);
  let replies = 0;
  const activities = {
    ...real,
    async commitPlacement(input: Parameters<typeof real.commitPlacement>[0]) {
      const placement = await real.commitPlacement(input);
      replies += 1;
      if (replies === 1) throw new Error('connection reset after commit: the reply was lost');
      return placement;
    },
  };
  for (const id of ['rt-a', 'rt-b']) await deps.stores.runtimes.register({ id, endpoint: 'http://127.0.0.1:9', labels: {}, slots: 4 }, 600_000);
  await deps.stores.registry.putWorkload('web', {
    kind: 'service', replicas: 2, selector: {}, spec: { command: ['node', 'x.js'], env: {}, graceMs: 100 },
    contract: { ownership: 'none', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
  });
  const plan = await createPlanner(deps.stores, Date.now).plan((await deps.stores.registry.getWorkload('web'))!, 2, {});

  const taskQueue = `lost-reply-${crypto.randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: nativeConnection, taskQueue, activities, workflowBundle: { codePath: testEnv().workflowBundlePath },
  });
  const client = new Client({ connection });
  const result = await worker.runUntil(
    client.workflow.execute(applyPlan, { taskQueue, workflowId: `scale:web-${taskQueue}`, args: [{ planId: plan.id }] }),
  );

  expect(replies).toBe(2); // the lost reply, then the retry that recognised its own write
  expect(result).toMatchObject({ compensated: false, fence: plan.basis.placementFence + 1 });
  const placement = await deps.stores.registry.getPlacement('web');
  expect(placement?.fence).toBe(plan.basis.placementFence + 1); // written once, not twice
  expect(placement?.assignments.map((a) => a.taskId).sort()).toEqual(plan.target.map((a) => a.taskId).sort());
  const { rows } = await db.query(`select kind, outcome from ledger where workload = 'web'`);
  expect(rows).toEqual([{ kind: 'apply', outcome: 'completed' }]);
});
