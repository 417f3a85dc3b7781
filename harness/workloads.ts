// Helpers the scaling tests share: what the agents run for a workload, and defining a workload and
// waiting until the reconcile loop has placed and applied it.
import type { Stack } from './stack';

/** Every task of `workload` on every agent of the stack, as the agents report them, with the runtime that hosts it. */
export async function tasksOf(stack: Stack, workload: string): Promise<any[]> {
  const perAgent = await Promise.all(Object.keys(stack.agents).map(async (runtimeId) => {
    // An agent that does not answer (killed, frozen) runs nothing anyone can see.
    const answer = await stack.agentApi(runtimeId, 'GET', '/v1/tasks').catch(() => null);
    return ((answer?.status === 200 ? answer.body.tasks : []) as any[]).map((task) => ({ ...task, runtimeId }));
  }));
  return perAgent.flat().filter((t) => t.workload === workload);
}

/** PUTs the workload, waits for `ready` ready tasks and for its apply (scale:<name>) to finish. */
export async function defineWorkload(stack: Stack, name: string, body: unknown, ready: number): Promise<any[]> {
  const put = await stack.api('PUT', `/v1/workloads/${name}`, { body });
  if (put.status >= 300) throw new Error(`PUT ${name}: ${put.status} ${JSON.stringify(put.body)}`);
  const tasks = await stack.waitFor(`${ready} ready tasks of ${name}`, async () => {
    const readyTasks = (await tasksOf(stack, name)).filter((t) => t.state === 'ready');
    return readyTasks.length === ready ? readyTasks : null;
  }).catch(async (error: Error) => {
    throw new Error(`${error.message}\n${await whereIs(stack, name)}`);
  });
  await waitForApply(stack, name);
  return tasks;
}

/**
 * Where a workload got to, for a test that waited for it in vain: its state (status, placement,
 * unplaced reason), its ledger, the reconcile loop's marker and workflow, and its scale:<name> run.
 */
export async function whereIs(stack: Stack, name: string): Promise<string> {
  const read = async (what: string, reader: () => Promise<unknown>) => `${what}: ${JSON.stringify(await reader().catch((error: Error) => `unreadable (${error.message})`))}`;
  const describe = async (workflowId: string) => {
    const d = await stack.temporal.workflow.getHandle(workflowId).describe();
    const pending = (d.raw.pendingActivities ?? []).map((a) => ({
      activity: a.activityType?.name, state: a.state, attempt: a.attempt, lastFailure: a.lastFailure?.message,
    }));
    return { status: d.status.name, type: d.type, runId: d.runId, startTime: d.startTime, historyLength: d.historyLength, pending };
  };
  return (await Promise.all([
    read('workload', async () => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body.workloads.find((w: { name: string }) => w.name === name) ?? 'not in /v1/state'),
    read('ledger', async () => (await stack.api('GET', `/v1/ledger?workload=${encodeURIComponent(name)}`, { role: 'viewer' })).body.events),
    read('reconcile marker', async () => (await stack.db.query('select * from reconcile_state')).rows),
    read(`reconcile:${stack.taskQueue}`, () => describe(`reconcile:${stack.taskQueue}`)),
    read(`scale:${name}`, () => describe(`scale:${name}`)),
  ])).join('\n');
}

/** Waits until the apply of `name`'s placement (workflow scale:<name>) has run and finished. */
export async function waitForApply(stack: Stack, name: string): Promise<void> {
  await stack.waitFor(`the placement of ${name} applied`, async () => {
    const description = await stack.temporal.workflow.getHandle(`scale:${name}`).describe().catch(() => null);
    return description !== null && description.status.name !== 'RUNNING';
  });
}

/** POSTs a scale, expects it to start `kind` under scale:<name>, waits for it to end, answers the operation. */
export async function scaleAndWait(stack: Stack, name: string, body: Record<string, unknown>, kind: 'scaleOut' | 'scaleIn'): Promise<any> {
  let response = await stack.api('POST', `/v1/workloads/${name}/scale`, { body });
  // Another operation holds scale:<name> (the reconcile loop retrying an unplaced shortfall):
  // 409 operation-in-progress, and a user waits for it to end and asks again.
  for (let retry = 0; retry < 3 && response.status === 409 && response.body?.error === 'operation-in-progress'; retry++) {
    await stack.temporal.workflow.getHandle(`scale:${name}`).result().catch(() => null);
    response = await stack.api('POST', `/v1/workloads/${name}/scale`, { body });
  }
  expect(response).toMatchObject({ status: 202, body: { workflowId: `scale:${name}`, kind } });
  await stack.temporal.workflow.getHandle(response.body.workflowId, response.body.runId).result().catch(() => null);
  return (await stack.api('GET', `/v1/operations/${encodeURIComponent(response.body.workflowId)}`, { role: 'viewer' })).body;
}

/** The gate rows an operation failed, by name, in order. */
export const failedGates = (operation: { gates: { rows: { gate: string; passed: boolean }[] } }): string[] =>
  operation.gates.rows.filter((row) => !row.passed).map((row) => row.gate);

/** DELETEs a workload and waits for its retirement to end (its placement emptied, its slots free) and its tasks to be gone. */
export async function retireAndWait(stack: Stack, name: string): Promise<void> {
  // 409 operation-in-progress: another operation holds scale:<name> (the reconcile loop placing a
  // replica, a recovery's apply): retire once it is over, never skip the retirement.
  const response = await stack.waitFor(`the retirement of ${name} started`, async () => {
    const answer = await stack.api('DELETE', `/v1/workloads/${name}`);
    if (answer.status === 409 && answer.body?.error === 'operation-in-progress') return null;
    return answer;
  });
  expect(response.status).toBe(202);
  await stack.temporal.workflow.getHandle(response.body.workflowId, response.body.runId).result();
  await stack.waitFor(`${name} retired`, async () => (await tasksOf(stack, name)).length === 0);
}
