// Container services on the real stack, its agents on the run's real Docker engine and registry
// (issue 34): a tag is pinned to its digest when the workload is defined, every replica runs that
// digest with the engine's limits, and a scale-in leaves no container of a removed replica.
import { LABEL } from '../../agent/drivers/container';
import { createEngine, type Engine } from '../../agent/drivers/engine';
import { testEnv } from '../../harness/env';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, scaleAndWait, tasksOf } from '../../harness/workloads';

const env = testEnv();
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
let stack: Stack;
let engine: Engine;
const AGENTS = ['a', 'b', 'c'].map((zone) => ({ id: `box-${zone}-${process.pid}`, labels: { zone } }));

beforeAll(async () => {
  if (!env.containers) throw new Error(`no container engine for this run: ${env.containersOff}`);
  engine = createEngine(env.containers.dockerHost.slice('unix://'.length));
  // A lease longer than an agent restart: the agent killed below comes back before anyone declares it LOST.
  stack = await startStack({ agents: AGENTS, leaseTtlMs: 60_000 });
});
afterAll(async () => {
  await stack?.stop();
});

const tagged = () => `${env.containers!.registry}/scalegate/web:v1`;
const webService = (image: string, replicas: number) => ({
  kind: 'service', replicas, contract: SERVICE_CONTRACT,
  spec: { image, command: ['httpd', '-f', '-p', '8080', '-h', '/www'], readiness: { http: '/index.html' }, limits: { cpus: 0.25, memoryMiB: 32 }, graceMs: 1000 },
});
/** The containers the stack's agents run for `workload`, as the engine lists them. */
async function containersOf(workload: string) {
  const all = await Promise.all(AGENTS.map((agent) => engine.list({ [LABEL.runtime]: agent.id, [LABEL.workload]: workload })));
  return all.flat();
}

describe('a container service', () => {
  it('is defined with its tag pinned to the digest the registry serves', async () => {
    const put = await stack.api('PUT', '/v1/workloads/pinned', { body: webService(tagged(), 1) });
    expect(put.status).toBe(201);
    expect(put.body.spec.image).toBe(env.containers!.image);
  });

  it('is refused when its registry has no such tag, with nothing defined', async () => {
    const put = await stack.api('PUT', '/v1/workloads/untagged', { body: webService(`${env.containers!.registry}/scalegate/web:no-such-tag`, 1) });
    expect(put).toMatchObject({ status: 422, body: { error: 'invalid-spec', message: expect.stringContaining('has no scalegate/web:no-such-tag') } });
    expect((await stack.api('GET', '/v1/workloads/untagged', { role: 'viewer' })).status).toBe(404);
  });

  it('is refused when its image comes from a registry the control plane does not pull from, before anyone is asked', async () => {
    const put = await stack.api('PUT', '/v1/workloads/elsewhere', { body: webService('registry.example/team/web:v1', 1) });
    expect(put).toMatchObject({ status: 422, body: { error: 'invalid-spec', message: expect.stringContaining('registry registry.example is not one this control plane pulls from') } });
    const hub = await stack.api('PUT', '/v1/workloads/elsewhere', { body: webService('busybox:1.36', 1) });
    expect(hub.body.message).toContain('registry registry-1.docker.io is not one');
    expect((await stack.api('GET', '/v1/workloads/elsewhere', { role: 'viewer' })).status).toBe(404);
  });

  it('scales 1 → 3 → 1: every replica runs the pinned digest with its limits and answers on its port; the removed leave no container', async () => {
    await defineWorkload(stack, 'boxes', webService(tagged(), 1), 1);
    const out = await scaleAndWait(stack, 'boxes', { replicas: 3, soakMs: 0 }, 'scaleOut');
    expect(out.status).toBe('completed');
    const ready = await stack.waitFor('3 ready replicas', async () => {
      const tasks = (await tasksOf(stack, 'boxes')).filter((t) => t.state === 'ready');
      return tasks.length === 3 ? tasks : null;
    });
    const running = await containersOf('boxes');
    expect(running.map((c) => c.Labels[LABEL.task]).sort()).toEqual(ready.map((t) => t.taskId).sort());
    for (const container of running) {
      const inspected = (await engine.inspect(container.Id))!;
      expect(inspected.Config.Image).toBe(env.containers!.image);
      expect(inspected.HostConfig).toMatchObject({ NanoCpus: 250_000_000, Memory: 32 * 1024 * 1024 });
    }
    for (const task of ready) expect(await (await fetch(`http://127.0.0.1:${task.ports.public}/index.html`)).text()).toBe('v1\n');

    const inOperation = await scaleAndWait(stack, 'boxes', { replicas: 1 }, 'scaleIn');
    expect(inOperation.status).toBe('completed');
    const removed = inOperation.scaleIn.victims.map((v: { taskId: string }) => v.taskId).sort();
    expect(removed).toHaveLength(2);
    const left = await containersOf('boxes');
    expect(left.map((c) => c.Labels[LABEL.task])).toEqual([ready.map((t) => t.taskId).find((id) => !removed.includes(id))]);
  });

  it('survives its agent: SIGKILLed and back, the agent adopts its containers (same ids), replaces the one removed by hand, and removes the one no placement names', async () => {
    for (const name of ['kept', 'lost']) await defineWorkload(stack, name, webService(env.containers!.image, 3), 3);
    const host = AGENTS[0].id;
    // (the host also runs the earlier tests' replicas: only these two workloads' containers are looked at)
    const before = new Map((await engine.list({ [LABEL.runtime]: host })).map((c) => [c.Labels[LABEL.workload], c.Id]));
    const agent = stack.agents[host];
    agent.process.kill('SIGKILL');
    await agent.process.exited;
    // While it is away: one of its containers goes, and one appears that no placement names.
    await engine.remove(before.get('lost')!);
    const stray = await engine.create({
      name: `stray-${process.pid}`, image: env.containers!.image, command: ['sleep', '600'], env: {}, publish: {}, network: 'bridge',
      labels: { [LABEL.runtime]: host, [LABEL.workload]: 'kept', [LABEL.task]: 'kept-9-g1' },
    });
    await engine.start(stray);

    await stack.startAgent(AGENTS[0]);
    const settled = await stack.waitFor('the agent adopted, replaced and swept', async () => {
      const now = (await engine.list({ [LABEL.runtime]: host })).filter((c) => ['kept', 'lost'].includes(c.Labels[LABEL.workload]));
      const tasks = (await tasksOf(stack, 'lost')).filter((t) => t.runtimeId === host && t.state === 'ready');
      return now.length === 2 && tasks.length === 1 ? now : null;
    });
    const after = new Map(settled.map((c) => [c.Labels[LABEL.workload], c.Id]));
    expect(after.get('kept')).toBe(before.get('kept'));
    expect(after.get('lost')).not.toBe(before.get('lost'));
    expect(await engine.inspect(stray)).toBeNull();
    const placed = await Promise.all(['kept', 'lost'].map(async (name) => (await stack.api('GET', `/v1/workloads/${name}`, { role: 'viewer' })).body.placement.assignments));
    const placedHere = placed.flat().filter((a: { runtimeId: string }) => a.runtimeId === host).map((a: { taskId: string }) => a.taskId).sort();
    expect(settled.map((c) => c.Labels[LABEL.task]).sort()).toEqual(placedHere);
  });
});
