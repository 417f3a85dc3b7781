// The converge wait (activities/tasks.ts awaitTasksReady) ends as soon as its wait cannot end well:
// a task its agent no longer runs and that no placement assigns there any more was moved by
// another change (chaos network seed 1862: a recovery waited its whole 60 s deadline for a replica
// that the recovery of the runtime it had been placed on had moved away). A task its agent no
// longer runs but a placement still assigns there is waited for, as before, to the deadline.
//
// Real PostgreSQL (a database of its own), a real agent (the agent's HTTP server over a task host
// running a real child process), real HTTP between activity and agent.
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import type { ActivityDeps } from '../../activities/ports';
import { WorkloadDefinitionSchema, type TaskStart, type TaskStatus } from '../../protocol';
import { newRuntimeCredential } from '../../store/runtimes';
import { InProcessAgents } from '../../harness/in-process-agents';
import { waitFor } from '../../harness/wait-for';

const HTTP_SERVER = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
/** Far past the test's own timeout: a wait that runs to it fails the test. */
const NEVER_MS = 60 * 60_000;

const agents = new InProcessAgents('convergewait');
afterAll(() => agents.close());

const WORKLOAD = 'web';
const task = (placementFence: number): TaskStart => ({
  taskId: `${WORKLOAD}-0-g1`, workload: WORKLOAD, kind: 'service', index: 0, generation: 1, placementFence,
  spec: { command: [process.execPath, HTTP_SERVER], readiness: { http: '/healthz' }, graceMs: 500 },
});
const ref = { runtimeId: 'rt-a', taskId: `${WORKLOAD}-0-g1` };

/** rt-a's agent running web's one replica, placed there (fence 1). */
async function placedAndRunning(): Promise<{ deps: ActivityDeps; agent: Awaited<ReturnType<InProcessAgents['start']>> }> {
  const deps = await agents.freshDeps();
  const credential = newRuntimeCredential();
  const agent = await agents.start('rt-a', credential);
  await agents.register(deps, 'rt-a', agent.endpoint, credential);
  await deps.stores.registry.putWorkload(WORKLOAD, WorkloadDefinitionSchema.parse({
    kind: 'service', replicas: 1, spec: { command: [process.execPath, HTTP_SERVER] },
  }));
  const placement = await deps.stores.registry.writePlacement(WORKLOAD, 0, [{ ...ref, index: 0 }], { generation: 1 });
  await agent.host.ensure(task(placement.fence));
  return { deps, agent };
}

const awaitReady = (deps: ActivityDeps, timeoutMs: number) =>
  new MockActivityEnvironment().run(createActivities(deps).awaitTasksReady, { tasks: [ref], timeoutMs }) as Promise<TaskStatus[]>;

describe('the converge wait', () => {
  test('answers once the placed task is ready', async () => {
    const { deps } = await placedAndRunning();
    const [status] = await awaitReady(deps, NEVER_MS);
    expect(status).toMatchObject({ taskId: ref.taskId, state: 'ready' });
  });

  test('fails at once, naming it, when its task was stopped and moved off the runtime', async () => {
    const { deps, agent } = await placedAndRunning();
    await agent.host.drainTask(ref.taskId, { graceMs: 500 });
    expect(agent.host.get(ref.taskId)).toBeNull(); // the agent answers 404 for it
    // Another change moved the replica to rt-b.
    await deps.stores.registry.writePlacement(WORKLOAD, 1, [{ runtimeId: 'rt-b', taskId: ref.taskId, index: 0 }], { generation: 1 });

    const wait = awaitReady(deps, NEVER_MS);
    await expect(wait).rejects.toMatchObject({ type: 'task-failed', nonRetryable: true });
    await expect(wait).rejects.toThrow(`not ready: ${ref.taskId}@rt-a no longer placed there and not running`);
  });

  test('fails at once for a task its agent never ran and no placement assigns', async () => {
    const { deps } = await placedAndRunning();
    const wait = new MockActivityEnvironment().run(createActivities(deps).awaitTasksReady, {
      tasks: [ref, { runtimeId: 'rt-a', taskId: 'web-7-g1' }], timeoutMs: NEVER_MS,
    });
    await expect(wait).rejects.toThrow('not ready: web-7-g1@rt-a no longer placed there');
  });

  test('waits to its deadline for a stopped task a placement still assigns there', async () => {
    const { deps, agent } = await placedAndRunning();
    await agent.host.drainTask(ref.taskId, { graceMs: 500 });
    await waitFor('the task gone from its agent', () => agent.host.get(ref.taskId) === null);

    const wait = awaitReady(deps, 1_500);
    await expect(wait).rejects.toMatchObject({ type: 'converge-deadline', nonRetryable: true });
    await expect(wait).rejects.toThrow(`not ready within 1500 ms: ${ref.taskId}@rt-a`);
  });
});
