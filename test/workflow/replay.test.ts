// Replay (determinism) tests for workflows/placement.ts, scale-out.ts, scale-in.ts and ping.ts. Each case runs the
// real workflow bundle on the shared test Temporal server with typed fake activities (no agents,
// no database), then replays the recorded history against the same bundle: a workflow change that
// alters the command sequence would make these replays throw. A deliberately reordered applyPlan
// shows the check can fail.
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import crypto from 'node:crypto';
import path from 'node:path';
import type { createActivities } from '../../activities';
import type { TaskStatus } from '../../protocol';
import type { Assignment } from '../../protocol';
import { UNKNOWN_CONTRACT } from '../../protocol';
import type { Workload } from '../../protocol';
import type { LedgerEntry } from '../../store/ledger';
import type { StoredPlan } from '../../store/plans';
import { testEnv } from '../support/env';

type Activities = ReturnType<typeof createActivities>;

const env = testEnv();
const suffix = crypto.randomBytes(3).toString('hex'); // the Temporal server is shared by every test file
let connection: Connection;
let client: Client;
let nativeConnection: NativeConnection;

beforeAll(async () => {
  // Workers log every state change at INFO; keep the test output to warnings and errors.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  connection = await Connection.connect({ address: env.temporalAddress });
  client = new Client({ connection });
  nativeConnection = await NativeConnection.connect({ address: env.temporalAddress });
});
afterAll(async () => {
  await nativeConnection?.close();
  await connection?.close();
});

const assignment = (workload: string, index: number, generation: number): Assignment => ({
  runtimeId: `rt-${index}`, index, taskId: `${workload}-${index}-g${generation}`,
});

/** A plan growing the workload from one replica to three: two starts and one stop, so every apply step runs. */
function planFor(workload: string, id: string, generation: number): StoredPlan {
  const target = [0, 1, 2].map((i) => assignment(workload, i, generation));
  return {
    id, createdAt: '2030-01-01T00:00:00.000Z', appliedWorkflow: null,
    workload, kind: 'service', fromReplicas: 1, replicas: 3, target, generation,
    starts: target.slice(1), stops: [{ runtimeId: 'rt-9', index: 0, taskId: `${workload}-old` }], moves: [],
    warnings: [], evidenceRequired: [], unplaced: null,
    basis: { registryRevision: 7, placementFence: generation - 1 },
  };
}

const taskStatus = (workload: string, taskId: string, state: TaskStatus['state']): TaskStatus => ({
  taskId, workload, incarnation: `${taskId}-1`, state, counts: {}, errors: 0, generation: 1,
});

interface Scenario {
  /** commitPlacement refuses the plan: its basis moved */
  stalePlan?: boolean;
  /** the first awaitTasksReady misses its deadline (after the commit) */
  convergeDeadlineOnce?: boolean;
}

/**
 * In-memory fakes of every activity the placement and ping workflows proxy, typed against the real
 * factory so a signature change breaks this file's compile rather than drifting silently.
 */
function fakeActivities(workload: string, scenario: Scenario = {}) {
  const calls: string[] = [];
  const ledger: LedgerEntry[] = [];
  let fence = 0;
  let awaits = 0;
  const definition: Workload = {
    name: workload, kind: 'service', replicas: 3, selector: {}, contract: UNKNOWN_CONTRACT, revision: 7, retired: false,
    spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 },
  };
  const activities: Partial<Activities> = {
    async loadPlan(planId) {
      calls.push('loadPlan');
      return planFor(workload, planId, 1);
    },
    async preparePlan(input) {
      calls.push('preparePlan');
      return { ...planFor(input.workload, `replan-${input.workload}`, 2), replicas: input.replicas };
    },
    async commitPlacement(input) {
      calls.push('commitPlacement');
      if (scenario.stalePlan) {
        throw ApplicationFailure.create({ type: 'stale-plan', message: `placement of ${input.workload} moved past fence ${input.basis.placementFence}`, nonRetryable: true });
      }
      fence += 1;
      return { workload: input.workload, fence, generation: input.generation, assignments: input.assignments };
    },
    async loadWorkload(name) {
      calls.push('loadWorkload');
      return name === workload ? definition : null;
    },
    async loadPlacement(name) {
      calls.push('loadPlacement');
      return fence ? { workload: name, fence, generation: 1, assignments: [0, 1, 2].map((i) => assignment(name, i, 1)) } : null;
    },
    async startTasks(input) {
      calls.push('startTasks');
      return input.assignments.map((a) => taskStatus(input.workload, a.taskId, 'starting'));
    },
    async awaitTasksReady(input) {
      calls.push('awaitTasksReady');
      awaits += 1;
      if (scenario.convergeDeadlineOnce && awaits === 1) {
        throw ApplicationFailure.create({ type: 'converge-deadline', message: `not ready within ${input.timeoutMs} ms`, nonRetryable: true });
      }
      return input.tasks.map((t) => taskStatus(workload, t.taskId, 'ready'));
    },
    async stopTasks(input) {
      calls.push('stopTasks');
      return input.tasks.map((t) => ({ ...t, state: 'stopped' }));
    },
    async stopAllTasksOfWorkload(input) {
      calls.push('stopAllTasksOfWorkload');
      return [0, 1, 2].map((i) => ({ runtimeId: `rt-${i}`, taskId: `${input.workload}-${i}-g1` }));
    },
    async clearPlacement() {
      calls.push('clearPlacement');
    },
    async appendLedger(entry) {
      calls.push('appendLedger');
      ledger.push(entry);
      return ledger.length;
    },
    async reconcilePass() {
      calls.push('reconcilePass');
      return { skipped: true, inputsKey: 'fake', planIds: [] };
    },
    async storePing() {
      calls.push('storePing');
      return { runtimes: 3, ready: 2, workloads: 1 };
    },
  };
  const count = (name: keyof Activities) => calls.filter((c) => c === name).length;
  return { activities, calls, ledger, count };
}

/** Runs `work` while an in-process worker with these fakes polls its own task queue. */
async function withWorker<T>(activities: Partial<Activities>, work: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = `replay-${suffix}-${crypto.randomBytes(3).toString('hex')}`;
  const worker = await Worker.create({
    connection: nativeConnection, namespace: 'default', taskQueue, activities,
    workflowBundle: { codePath: env.workflowBundlePath },
  });
  return worker.runUntil(work(taskQueue));
}

const replay = async (workflowId: string, runId?: string) =>
  Worker.runReplayHistory({ workflowBundle: { codePath: env.workflowBundlePath } }, await client.workflow.getHandle(workflowId, runId).fetchHistory(), workflowId);

describe('applyPlan', () => {
  it('happy path: commits, starts, converges, stops the removed task, ledgers; its history replays', async () => {
    const workload = `rp-${suffix}-happy`;
    const fake = fakeActivities(workload);
    const workflowId = `scale:${workload}`;
    const result = await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('applyPlan', { taskQueue, workflowId, args: [{ planId: `plan-${workload}`, convergeTimeoutMs: 5000 }] }));

    expect(result).toMatchObject({ workload, fence: 1, generation: 1, compensated: false, stopped: [`${workload}-old`] });
    expect(fake.calls).toEqual(['loadPlan', 'commitPlacement', 'loadWorkload', 'startTasks', 'awaitTasksReady', 'stopTasks', 'appendLedger']);
    expect(fake.ledger.map((e) => [e.kind, e.outcome])).toEqual([['apply', 'completed']]);
    await expect(replay(workflowId)).resolves.toBeUndefined();
  });

  it('a converge deadline after the commit runs the stopTheWorldReplan child; both histories replay', async () => {
    const workload = `rp-${suffix}-deadline`;
    const fake = fakeActivities(workload, { convergeDeadlineOnce: true });
    const workflowId = `scale:${workload}`;
    const result = await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('applyPlan', { taskQueue, workflowId, args: [{ planId: `plan-${workload}`, convergeTimeoutMs: 5000 }] }));

    expect(result).toMatchObject({ workload, generation: 2, compensated: true });
    expect(fake.ledger.map((e) => [e.kind, e.outcome])).toEqual([['apply', 'compensated'], ['replan', 'completed']]);
    expect(fake.ledger[0].reason).toContain('apply failed after the placement write');
    expect(fake.count('stopAllTasksOfWorkload')).toBe(1);
    expect(fake.count('preparePlan')).toBe(1);
    expect(fake.count('awaitTasksReady')).toBe(2);

    await expect(replay(workflowId)).resolves.toBeUndefined();
    const child = fake.ledger[1];
    expect(child.workflowId).toBe(`replan:${workload}`);
    await expect(replay(`replan:${workload}`, child.runId ?? undefined)).resolves.toBeUndefined();
  });

  it('a stale plan fails the workflow before any change, with no replan; the failed history replays', async () => {
    const workload = `rp-${suffix}-stale`;
    const fake = fakeActivities(workload, { stalePlan: true });
    const workflowId = `scale:${workload}`;
    const error = await withWorker(fake.activities, (taskQueue) =>
      client.workflow
        .execute('applyPlan', { taskQueue, workflowId, args: [{ planId: `plan-${workload}` }] })
        .then(() => null, (e: unknown) => e));

    expect(error).toBeInstanceOf(WorkflowFailedError);
    const activityFailure = (error as WorkflowFailedError).cause;
    expect(activityFailure).toBeInstanceOf(ActivityFailure);
    expect((activityFailure as ActivityFailure).cause).toMatchObject({ type: 'stale-plan', nonRetryable: true });
    expect(fake.calls).toEqual(['loadPlan', 'commitPlacement']);
    // no compensation: nothing was written, so neither the replan child nor a ledger row happened
    expect(fake.count('stopAllTasksOfWorkload')).toBe(0);
    expect(fake.count('preparePlan')).toBe(0);
    expect(fake.ledger).toEqual([]);

    await expect(replay(workflowId)).resolves.toBeUndefined();
  });

  it('a reordered applyPlan fails to replay a recorded history (the check has teeth)', async () => {
    const workload = `rp-${suffix}-teeth`;
    const fake = fakeActivities(workload);
    const workflowId = `scale:${workload}`;
    await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('applyPlan', { taskQueue, workflowId, args: [{ planId: `plan-${workload}` }] }));
    const history = await client.workflow.getHandle(workflowId).fetchHistory();

    const changed = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, 'fixtures', 'changed-apply-plan.ts'),
      logger: new DefaultLogger('WARN'),
    });
    // positive control first: the same history replays cleanly against the real bundle
    await expect(Worker.runReplayHistory({ workflowBundle: { codePath: env.workflowBundlePath } }, history, workflowId)).resolves.toBeUndefined();
    await expect(Worker.runReplayHistory({ workflowBundle: changed }, history, workflowId)).rejects.toMatchObject({
      name: 'DeterminismViolationError',
      message: expect.stringMatching(/nondeterminism/i),
    });
  });
});

describe('ping', () => {
  it('reads the store through its activity; its history replays', async () => {
    const fake = fakeActivities(`rp-${suffix}-ping`);
    const workflowId = `ping:${suffix}`;
    const result = await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('ping', { taskQueue, workflowId, args: [{ note: 'replay' }] }));

    expect(result).toEqual({ runtimes: 3, ready: 2, workloads: 1, note: 'replay' });
    expect(fake.calls).toEqual(['storePing']);
    await expect(replay(workflowId)).resolves.toBeUndefined();
  });
});

/** A consumer with a known contract and four replicas owning partitions p % 4, for scaleOut and scaleIn. */
function scaleFakes(workload: string, replicas: number, target: number) {
  const base = fakeActivities(workload);
  const definition: Workload = {
    name: workload, kind: 'consumer', replicas, selector: {}, revision: 7, retired: false,
    contract: { ownership: 'partitioned', partitions: 8, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign' },
    spec: { partitions: 8, source: 'in_t', sink: 'out_t', workMs: 1 },
  };
  const current = Array.from({ length: replicas }, (_, i) => ({ ...assignment(workload, i, 1), partitions: [0, 1, 2, 3, 4, 5, 6, 7].filter((p) => p % replicas === i) }));
  const record = (name: string) => base.calls.push(name);
  const activities: Partial<Activities> = {
    ...base.activities,
    async loadWorkload() {
      record('loadWorkload');
      return definition;
    },
    async loadPlacement(name) {
      record('loadPlacement');
      return { workload: name, fence: 3, generation: 1, assignments: current };
    },
    async captureEvidence() {
      record('captureEvidence');
      // the capture after the change sees the target size ready
      const ready = base.calls.filter((c) => c === 'captureEvidence').length > 1 ? target : current.length;
      return {
        atMs: 0, ready, processed: 100, ratePerSec: 10, latencyP50Ms: 5, latencyP95Ms: 9, backlog: 0, errors: 0,
        tasks: current.map((a) => ({
          taskId: a.taskId, runtimeId: a.runtimeId, incarnation: 'i', state: 'ready', processed: 25, errors: 0, backlog: 0,
          ownedPartitions: a.partitions.length, inFlight: 0, ratePerSec: a.index === 1 ? 0 : 5,
        })),
      };
    },
    async preparePlan(input) {
      record('preparePlan');
      const target = Array.from({ length: input.replicas as number }, (_, i) => assignment(workload, i, 1));
      return { ...planFor(workload, 'plan-out', 1), fromReplicas: current.length, replicas: input.replicas, target, starts: target.slice(current.length), stops: [], basis: { registryRevision: 7, placementFence: 3 } };
    },
    async gatherGateFacts(input) {
      record('gatherGateFacts');
      const ok = { ok: true, detail: 'reachable' };
      return {
        eligible: ['rt-0', 'rt-1', 'rt-2', 'rt-3'].map((id, i) => ({ id, freeSlots: 4, alreadyHostsWorkload: i < current.length })),
        probes: input.recipientRuntimeIds.map((runtimeId) => ({ runtimeId, source: ok, destination: ok })),
      };
    },
    async savePlan(plan) {
      record('savePlan');
      return { ...plan, id: 'plan-in', createdAt: '2030-01-01T00:00:00.000Z', appliedWorkflow: null };
    },
    async confirmRemoved(input) {
      record('confirmRemoved');
      return { runtimes: input.removed.map((t) => t.runtimeId), tasks: input.removed.map((t) => t.taskId), assignmentsLeft: 0, ownedPartitions: 0 };
    },
  };
  return { ...base, activities };
}

describe('scaleOut and scaleIn', () => {
  it('scaleOut 2 → 4 passes its gates, applies and ledgers; its history replays', async () => {
    const workload = `rp-${suffix}-out`;
    const fake = scaleFakes(workload, 2, 4);
    const workflowId = `scale:${workload}`;
    const result = await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('scaleOut', { taskQueue, workflowId, args: [{ workload, replicas: 4, soakMs: 0 }] }));
    expect(result).toMatchObject({ kind: 'scaleOut', outcome: 'completed', fromReplicas: 2, toReplicas: 4 });
    expect(fake.ledger.map((e) => [e.kind, e.outcome])).toEqual([['scale-out', 'completed']]);
    await expect(replay(workflowId)).resolves.toBeUndefined();
  });

  it('scaleIn 4 → 2 drains the idle and least loaded replicas first; its history replays', async () => {
    const workload = `rp-${suffix}-in`;
    const fake = scaleFakes(workload, 4, 2);
    const workflowId = `scale:${workload}`;
    const result = await withWorker(fake.activities, (taskQueue) =>
      client.workflow.execute('scaleIn', { taskQueue, workflowId, args: [{ workload, replicas: 2 }] }));
    expect(result).toMatchObject({ kind: 'scaleIn', outcome: 'completed', fromReplicas: 4, toReplicas: 2 });
    expect((result as any).scaleIn.victims.map((v: Assignment) => v.index)).toEqual([1, 3]); // idle (rate 0) first, then highest index
    expect(fake.calls.indexOf('stopTasks')).toBeLessThan(fake.calls.indexOf('commitPlacement')); // drain before the hand-over
    expect(fake.ledger.map((e) => [e.kind, e.outcome])).toEqual([['scale-in', 'completed']]);
    await expect(replay(workflowId)).resolves.toBeUndefined();
  });
});
