// Registry, placement and plan/apply on the real stack: real agent processes start and stop real
// service processes through workflows; placement is sticky and fenced; plans carry a basis.
import path from 'node:path';
import { createRegistryStore, StalePlacementError } from '../../store/registry';
import { createPool } from '../../store/db';
import { startStack, Stack } from '../../harness/stack';
import { waitForApply, whereIs } from '../../harness/workloads';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const service = (replicas: number | 'all', extra: Record<string, unknown> = {}) => ({
  kind: 'service',
  replicas,
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 2000 },
  ...extra,
});

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: 3000,
    // Each agent draws its process ports from a free block the stack reserved for it. Every test
    // places workloads of its own, so the agents have slots for all of them at once.
    agents: [
      { id: 'agent-a', labels: { zone: 'a' }, slots: 12 },
      { id: 'agent-b', labels: { zone: 'b' }, slots: 12 },
      { id: 'agent-c', labels: { zone: 'c' }, slots: 12 },
    ],
  });
});
afterAll(async () => {
  await stack?.stop();
});

const workloadState = async (name: string) => {
  const { body } = await stack.api('GET', '/v1/state', { role: 'viewer' });
  return { state: body, workload: body.workloads.find((w: { name: string }) => w.name === name) };
};
const tasksOn = async (agent: string) => (await stack.agentApi(agent, 'GET', '/v1/tasks')).body.tasks as any[];
const allTasks = async () => (await Promise.all(Object.keys(stack.agents).map(tasksOn))).flat();
const waitReady = (name: string, count: number) =>
  stack.waitFor(`${count} ready tasks of ${name}`, async () => {
    const tasks = (await allTasks()).filter((t) => t.workload === name && t.state === 'ready');
    return tasks.length === count ? tasks : null;
  });
/** PUTs a new service workload, waits for `count` ready tasks of it and for its apply to finish. */
const defineService = async (name: string, body: unknown, count: number) => {
  const put = await stack.api('PUT', `/v1/workloads/${name}`, { body });
  expect(put.status).toBe(201);
  const tasks = await waitReady(name, count).catch(async (error: Error) => {
    throw new Error(`${error.message}\n${await whereIs(stack, name)}`);
  });
  await waitForApply(stack, name);
  return tasks;
};

// Every test defines the workloads it asserts on (no test reads what an earlier one left behind).
describe('a service workload', () => {
  it('replicas 3 is placed by the reconcile loop: three real processes with distinct recorded port pairs', async () => {
    const tasks = await defineService('web', service(3), 3);
    const { workload } = await stack.waitFor('placement recorded with ports', async () => {
      const s = await workloadState('web');
      return s.workload?.placement?.assignments.every((a: any) => a.ports) ? s : null;
    });
    expect(workload.status).toBe('placed');
    expect(new Set(workload.placement.assignments.map((a: any) => a.runtimeId)).size).toBe(3);
    const ports: Record<string, { public: number; internal: number }> = Object.fromEntries(tasks.map((t) => [t.taskId, t.ports]));
    const all = Object.values(ports).flatMap((p) => [p.public, p.internal]);
    expect(new Set(all).size).toBe(6);
    for (const p of all) expect(p).toBeLessThan(32768);
    for (const a of workload.placement.assignments) expect(a.ports).toEqual(ports[a.taskId]);
    // every process answers on its public and internal ports, as itself
    for (const [taskId, p] of Object.entries(ports)) {
      const answer = (await (await fetch(`http://127.0.0.1:${p.public}/`)).json()) as Record<string, unknown>;
      expect(answer).toMatchObject({ taskId, port: p.public, internalPort: p.internal, listener: 'public' });
      expect(((await (await fetch(`http://127.0.0.1:${p.internal}/`)).json()) as Record<string, unknown>).listener).toBe('internal');
    }
    const ledger = await stack.waitFor('the apply in the ledger', async () => {
      const events = (await stack.api('GET', '/v1/ledger?workload=web', { role: 'viewer' })).body.events;
      return events.length ? events : null;
    });
    expect(ledger.map((e: any) => [e.kind, e.outcome, e.toReplicas])).toContainEqual(['apply', 'completed', 3]);
  });

  it('keeps its port pairs across an agent restart, and the process answers again', async () => {
    // pinned to agent-a, the agent this test restarts
    await defineService('pinned', service(1, { selector: { zone: 'a' } }), 1);
    const agentA = stack.agents['agent-a'];
    const before = (await tasksOn('agent-a')).find((t) => t.workload === 'pinned');
    await agentA.process.stop();
    await stack.startAgent({ id: 'agent-a', labels: { zone: 'a' }, slots: 12 }); // same id: same state folder and port block
    const after = await stack.waitFor('pinned restored on agent-a', async () =>
      (await tasksOn('agent-a')).find((t) => t.workload === 'pinned' && t.state === 'ready'));
    expect(after.taskId).toBe(before.taskId);
    expect(after.incarnation).not.toBe(before.incarnation); // really restarted
    expect(after.ports).toEqual(before.ports);
    const answer = (await (await fetch(`http://127.0.0.1:${after.ports.public}/`)).json()) as Record<string, unknown>;
    expect(answer.incarnation).toBe(after.incarnation);
  });

  it('plans a change with a basis and refuses it as stale once the basis moved', async () => {
    await defineService('based', service(3), 3);
    const plan = await stack.api('POST', '/v1/workloads/based/plan', { body: { replicas: 2 } });
    expect(plan.status).toBe(201);
    expect(plan.body.stops).toHaveLength(1);
    expect(plan.body.basis).toEqual({ registryRevision: expect.any(Number), placementFence: expect.any(Number) });
    await stack.api('PUT', '/v1/workloads/based', { body: service(3, { selector: {} }) }); // moves the registry revision
    const apply = await stack.api('POST', `/v1/plans/${plan.body.id}/apply`);
    expect(apply.status).toBe(409);
    expect(apply.body.error).toBe('stale-plan');
    expect((await allTasks()).filter((t) => t.workload === 'based')).toHaveLength(3); // nothing changed
  });

  it('applies a fresh plan 3 → 2: one process stopped, the other two untouched', async () => {
    const before = await defineService('shrink', service(3), 3);
    const plan = (await stack.api('POST', '/v1/workloads/shrink/plan', { body: { replicas: 2 } })).body;
    const apply = await stack.api('POST', `/v1/plans/${plan.id}/apply`);
    expect(apply).toMatchObject({ status: 202, body: { workflowId: 'scale:shrink' } });
    await stack.temporal.workflow.getHandle(apply.body.workflowId, apply.body.runId).result();
    const after = (await allTasks()).filter((t) => t.workload === 'shrink');
    expect(after.map((t) => t.taskId).sort()).toEqual(plan.target.map((a: any) => a.taskId).sort());
    for (const t of after) expect(before.find((b) => b.taskId === t.taskId)?.incarnation).toBe(t.incarnation);
    const stoppedPort = before.find((t) => t.taskId === plan.stops[0].taskId).ports.public;
    await expect(fetch(`http://127.0.0.1:${stoppedPort}/`)).rejects.toThrow();
  });
});

describe('fleet changes', () => {
  it('a new agent moves nothing sticky, and an `all` workload gains a task on it', async () => {
    const agentsBefore = Object.keys(stack.agents).length;
    await defineService('anchored', service(2), 2);
    await defineService('everywhere', service('all'), agentsBefore);
    const anchoredBefore = (await workloadState('anchored')).workload.placement;
    await stack.startAgent({ id: 'agent-d', labels: { zone: 'd' } });
    const tasks = await waitReady('everywhere', agentsBefore + 1);
    expect(tasks.map((t) => t.taskId)).toEqual(expect.arrayContaining([expect.stringMatching(/^everywhere-/)]));
    expect((await tasksOn('agent-d')).map((t) => t.workload)).toEqual(['everywhere']);
    const anchoredAfter = (await workloadState('anchored')).workload.placement;
    expect(anchoredAfter.assignments).toEqual(anchoredBefore.assignments);
    expect(anchoredAfter.fence).toBe(anchoredBefore.fence);
  });

  it('a workload whose scale:<name> is busy when the loop plans it is planned again on the next pass and placed once the id is free', async () => {
    // The id held by an open run (a rollout, a scale: here a run on a queue no worker polls).
    const holder = await stack.temporal.workflow.start('holdsTheId', { taskQueue: `${stack.taskQueue}-idle`, workflowId: 'scale:held' });
    try {
      expect((await stack.api('PUT', '/v1/workloads/held', { body: service(1) })).status).toBe(201);
      const plansOfHeld = async () => Number((await stack.db.query("select count(*) as n from plans where workload = 'held'")).rows[0].n);
      // A pass that found it busy is not recorded as seen: the next pass plans it again.
      await stack.waitFor('two passes planning the busy workload', async () => (await plansOfHeld()) >= 2);
    } finally {
      await holder.terminate('the test frees scale:held');
    }
    await waitReady('held', 1);
  });

  it('records a workload whose selector matches nothing as unplaced with placement-unavailable', async () => {
    await stack.api('PUT', '/v1/workloads/nowhere', { body: service(2, { selector: { zone: 'mars' } }) });
    const { state } = await stack.waitFor('nowhere unplaced', async () => {
      const s = await workloadState('nowhere');
      return s.state.unplaced.some((u: any) => u.workload === 'nowhere') ? s : null;
    });
    expect(state.unplaced.find((u: any) => u.workload === 'nowhere')).toMatchObject({ reason: 'placement-unavailable', missing: 2 });
    expect(state.reconcile.at).toEqual(expect.any(String));
  });

  it('refuses replicas 0 with a message saying to retire or delete', async () => {
    const { status, body } = await stack.api('PUT', '/v1/workloads/zero', { body: service(0) });
    expect(status).toBe(422);
    expect(body.message).toMatch(/retire|delete/);
  });

  it('retires a workload through a workflow that stops its tasks', async () => {
    await defineService('retiree', service('all'), Object.keys(stack.agents).length);
    const del = await stack.api('DELETE', '/v1/workloads/retiree');
    expect(del.status).toBe(202);
    await stack.temporal.workflow.getHandle(del.body.workflowId, del.body.runId).result();
    expect((await allTasks()).filter((t) => t.workload === 'retiree')).toHaveLength(0);
    expect((await workloadState('retiree')).workload.status).toBe('retired');
  });
});

describe('fenced placement writes', () => {
  it('two coordinators racing on one placement: one wins, the other gets the fence error and writes nothing', async () => {
    await stack.api('PUT', '/v1/workloads/race', { body: service(1, { selector: { zone: 'mars' } }) });
    const poolA = createPool(stack.databaseUrl, { max: 2 });
    const poolB = createPool(stack.databaseUrl, { max: 2 });
    try {
      const a = createRegistryStore(poolA);
      const b = createRegistryStore(poolB);
      const base = (await a.getPlacement('race'))?.fence ?? 0;
      const results = await Promise.allSettled([
        a.writePlacement('race', base, [{ runtimeId: 'agent-a', index: 0, taskId: 'race-0-g1' }], { writer: 'A' }),
        b.writePlacement('race', base, [{ runtimeId: 'agent-b', index: 0, taskId: 'race-0-g1' }], { writer: 'B' }),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].reason).toBeInstanceOf(StalePlacementError);
      const stored = await a.getPlacement('race');
      expect(stored!.fence).toBe(base + 1);
      const winner = (won[0] as PromiseFulfilledResult<any>).value;
      expect(stored!.assignments).toEqual(winner.assignments);
    } finally {
      await poolA.end();
      await poolB.end();
    }
  });
});
