// The stream stop-the-world classifies what its agents answer (issue 33, item 5: "every error has a
// path"), as every stop does (activities/tasks.ts `agentCalls`):
//
// - a refusal (409 stale-fence: another decision moved the job since) fails the activity
//   non-retryably, naming the job, the fence and the agent's answer; it was listed as an
//   unreachable runtime before, and the replan placed around an agent that had answered;
// - a transient failure (a closed port: the agent restarting) is tried again while the runtime's
//   lease runs, so an agent that comes back has its subtasks stopped; it was listed as unreachable
//   at the first refused connection before;
// - a runtime whose lease ran out, behind a closed port, is listed as unreachable.
//
// Real PostgreSQL (a database of its own per test), real agents (the agent's HTTP server over a
// task host with the process driver, running real child processes), real closed ports. The tasks
// are process tasks named after the job: the stop finds a job's tasks by workload name, whatever
// their driver.
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { createActivities } from '../../activities';
import type { ActivityDeps } from '../../activities/ports';
import { freePort } from '../../embedded/processes';
import { WorkloadDefinitionSchema, type TaskStart } from '../../protocol';
import { newRuntimeCredential } from '../../store/runtimes';
import { InProcessAgents } from '../../harness/in-process-agents';
import { waitFor } from '../../harness/wait-for';

const HTTP_SERVER = path.resolve(__dirname, '../../harness/fixtures/http-server.js');

const agents = new InProcessAgents('streamstop');
afterAll(() => agents.close());
const freshDeps = () => agents.freshDeps();
const startAgent = agents.start.bind(agents);
const register = agents.register.bind(agents);

const JOB = 'clicks';
const subtask = (index: number, placementFence: number): TaskStart => ({
  taskId: `${JOB}-${index}-g1`, workload: JOB, kind: 'service', index, generation: 1, placementFence,
  spec: { command: [process.execPath, HTTP_SERVER], readiness: { http: '/healthz' }, graceMs: 500 },
});

/** The job defined and placed (fence 1) on the given runtimes, one subtask each. */
async function placeJob(deps: ActivityDeps, runtimeIds: string[]): Promise<number> {
  const definition = WorkloadDefinitionSchema.parse({
    kind: 'stream',
    spec: {
      source: 'clicks_in', sink: 'clicks_out', partitions: 2, checkpointIntervalMs: 1000, maxParallelism: 16,
      operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    },
  });
  await deps.stores.registry.putWorkload(JOB, definition);
  const placement = await deps.stores.registry.writePlacement(JOB, 0, runtimeIds.map((runtimeId, index) => ({ runtimeId, index, taskId: `${JOB}-${index}-g1` })), { generation: 1 });
  return placement.fence;
}

describe('the stream stop-the-world', () => {
  test('an agent that refuses the stop (409 stale-fence) fails it, naming the refusal: it is not listed as unreachable', async () => {
    const deps = await freshDeps();
    const credential = newRuntimeCredential();
    const agent = await startAgent('rt-a', credential);
    await register(deps, 'rt-a', agent.endpoint, credential);
    const fence = await placeJob(deps, ['rt-a']);
    // The agent has seen a newer decision for the job than the placement the stop reads.
    await agent.host.ensure(subtask(0, fence + 5));

    const stop = createActivities(deps).stopStreamJob({ workload: JOB });
    await expect(stop).rejects.toBeInstanceOf(ApplicationFailure);
    await expect(stop).rejects.toMatchObject({ type: 'stale-fence', nonRetryable: true });
    await expect(stop).rejects.toThrow(`the stop of job ${JOB} (placement fence ${fence}) was refused`);
    await expect(stop).rejects.toThrow(`this agent has seen fence ${fence + 5}`);
    // Refused, so nothing stopped: the subtask still runs.
    expect(agent.host.get(`${JOB}-0-g1`)).not.toBeNull();
  });

  test('an agent behind a closed port is tried again while its lease runs: when it comes back its subtask is stopped; one whose lease ran out is unreachable', async () => {
    const deps = await freshDeps();
    const credentials = { a: newRuntimeCredential(), b: newRuntimeCredential(), gone: newRuntimeCredential() };
    const a = await startAgent('rt-a', credentials.a);
    await register(deps, 'rt-a', a.endpoint, credentials.a);
    // rt-b: live lease, its agent not listening yet (restarting); rt-gone: a closed port and a lapsed lease.
    const portB = await freePort();
    await register(deps, 'rt-b', `http://127.0.0.1:${portB}`, credentials.b);
    await register(deps, 'rt-gone', `http://127.0.0.1:${await freePort()}`, credentials.gone, 1);
    const fence = await placeJob(deps, ['rt-a', 'rt-b', 'rt-gone']);
    await a.host.ensure(subtask(0, fence));

    // Counts how often the stop looked rt-b up after a failed call (the real store, observed).
    let lookedUpB = 0;
    const get = deps.stores.runtimes.get.bind(deps.stores.runtimes);
    deps.stores.runtimes.get = async (id: string) => {
      if (id === 'rt-b') lookedUpB++;
      return get(id);
    };
    await waitFor('the lease of rt-gone to run out', async () => Date.parse((await get('rt-gone'))!.leaseExpiresAt) <= Date.now());

    const stop = createActivities(deps).stopStreamJob({ workload: JOB });
    let settled = false;
    void stop.then(() => (settled = true), () => (settled = true));
    // rt-b's agent refused the connection at least twice and the stop still waits for it.
    await waitFor('the stop to try rt-b again', () => lookedUpB >= 2);
    expect(settled).toBe(false);
    const b = await startAgent('rt-b', credentials.b, portB, [subtask(1, fence)]);

    const result = await stop;
    expect(result.unreachable).toEqual(['rt-gone']);
    expect(result.stopped.map((t) => `${t.taskId}@${t.runtimeId}`).sort()).toEqual([`${JOB}-0-g1@rt-a`, `${JOB}-1-g1@rt-b`]);
    expect(a.host.get(`${JOB}-0-g1`)).toBeNull();
    expect(b.host.get(`${JOB}-1-g1`)).toBeNull();
  });
});
