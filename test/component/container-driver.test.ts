// The container driver on the run's real Docker engine and image registry (test/support/
// shared-servers.ts: Debian's dockerd and docker-registry; the image is a busybox root pushed there
// and pinned by digest). Each harness is one "agent": its own runtime id, state folder and ports.
import { LABEL } from '../../agent/drivers/container';
import { Pool } from 'undici';
import { createEngine, ENGINE_API_VERSION, type Engine } from '../../agent/drivers/engine';
import { testEnv } from '../../harness/env';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor as pollUntil } from '../../harness/wait-for';
import { containerDriverHarnesses, HTTPD as httpd, page } from '../support/container-driver';

const env = testEnv();
let engine: Engine;
let image: string;
let block: PortRange;
const { harness, start, ready, containersOf, removeStateDirs, refusesAnUnpullableImage, adoptsAndSweeps } = containerDriverHarnesses('ct', () => ({ engine, image, block }));

beforeAll(async () => {
  // Containers are part of what CI proves: no engine here is a failure that says why, not a skip.
  if (!env.containers) throw new Error(`no container engine for this run: ${env.containersOff}`);
  engine = createEngine(env.containers.dockerHost.slice('unix://'.length));
  image = env.containers.image;
  block = await reservePortRange(64);
});
afterAll(async () => {
  removeStateDirs();
  block?.release();
});

describe('the container driver', () => {
  it('runs the pinned image with the engine\'s limits and labels, serves the task\'s port, and leaves nothing after a drain', async () => {
    const agent = harness();
    const task = start({ ...httpd, limits: { cpus: 0.5, memoryMiB: 64 } });
    const handle = await agent.driver.start(task);
    await ready(handle);
    const status = handle.status();
    expect(status).toMatchObject({ state: 'ready', taskId: task.taskId, generation: 1 });
    expect(await page(status.ports!.public)).toBe('v1\n');

    const [summary] = await containersOf(agent.runtimeId);
    const inspected = (await engine.inspect(summary.Id))!;
    expect(inspected.HostConfig).toMatchObject({ Memory: 64 * 1024 * 1024, NanoCpus: 500_000_000 });
    expect(inspected.Config.Image).toBe(image);
    expect(inspected.Config.Labels).toMatchObject({ [LABEL.workload]: 'box', [LABEL.task]: task.taskId, [LABEL.incarnation]: handle.incarnation });

    const receipt = await handle.drain({ graceMs: 1000 });
    expect(receipt).toMatchObject({ taskId: task.taskId, incarnation: handle.incarnation, inFlight: 0 });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
    expect(handle.status().state).toBe('stopped');
  });

  it('refuses a start whose image cannot be pulled, naming the runtime and the image, with nothing started', () => refusesAnUnpullableImage());

  it('refuses an image that is not pinned by digest', async () => {
    const agent = harness();
    await expect(agent.driver.start(start({ ...httpd, image: `${env.containers!.registry}/scalegate/web:v1` }))).rejects.toMatchObject({ code: 'invalid-spec' });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('a restarted agent adopts its running container (same id, still serving) and the sweep removes the ones no hosted task names', () => adoptsAndSweeps());

  it('restarts a container that ends or is removed behind its back: a new container on the same port, counted', async () => {
    const agent = harness();
    const handle = await agent.driver.start(start(httpd));
    await ready(handle);
    const port = handle.status().ports!.public;
    const [first] = await containersOf(agent.runtimeId);
    await engine.remove(first.Id);
    await pollUntil('restarted and ready', () => handle.status().state === 'ready' && handle.status().counts.restarts === 1, { timeoutMs: 30_000 });
    const [second] = await containersOf(agent.runtimeId);
    expect(second.Id).not.toBe(first.Id);
    expect(handle.status().lastExit).toMatchObject({ code: null });
    expect(await page(port)).toBe('v1\n');
    await handle.drain({ graceMs: 1000 });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('a stopped agent leaves its container running and watches it no more: one removed afterwards is not restarted (beside an agent that does)', async () => {
    // Two agents watch a container each; one closes (its SIGTERM). Both containers are then removed
    // behind their backs: the open agent restarts its own, and by then the closed one had the same
    // watch and backoff to restart its own had it still been watching.
    const policy = { baseMs: 50, maxMs: 50, healthyAfterMs: 60_000, crashLoopRestarts: 100, crashLoopWindowMs: 600_000 };
    const [closed, open] = [harness({ policy }), harness({ policy })];
    const [closedHandle, openHandle] = await Promise.all([closed.driver.start(start(httpd)), open.driver.start(start(httpd))]);
    await Promise.all([ready(closedHandle), ready(openHandle)]);
    await closed.driver.close!();
    const [kept] = await containersOf(closed.runtimeId);
    expect(kept.State).toBe('running');
    for (const agent of [closed, open]) for (const container of await containersOf(agent.runtimeId)) await engine.remove(container.Id);
    await pollUntil('the open agent restarted its container', () => openHandle.status().state === 'ready' && openHandle.status().counts.restarts === 1, { timeoutMs: 30_000 });
    expect(closed.events.filter((e) => e.event === 'task-restart-scheduled')).toEqual([]);
    expect(await containersOf(closed.runtimeId)).toEqual([]);
    await openHandle.drain({ graceMs: 1000 });
  });

  it('a container that exits at once is restarted with growing delays, never ready, and crash-loops; a drain ends it for good', async () => {
    const agent = harness({ policy: { baseMs: 100, maxMs: 10_000, healthyAfterMs: 60_000, crashLoopRestarts: 3, crashLoopWindowMs: 600_000 } });
    const handle = await agent.driver.start(start({ command: ['sh', '-c', 'exit 3'], readiness: { tcp: true }, graceMs: 500 }));
    const delays: number[] = [];
    await pollUntil('three restarts scheduled', () => {
      const status = handle.status();
      expect(status.state).not.toBe('ready');
      if (status.state === 'restarting' && status.nextRestartAt && status.counts.restarts > delays.length) {
        delays.push(Date.parse(status.nextRestartAt) - Date.parse(status.lastExit!.at));
      }
      return delays.length >= 3;
    }, { timeoutMs: 30_000 });
    expect(delays[1]).toBeGreaterThan(delays[0]);
    expect(delays[2]).toBeGreaterThan(delays[1]);
    expect(handle.status()).toMatchObject({ crashLooping: true, lastExit: { code: 3 } });
    await handle.drain({ graceMs: 500 });
    expect(handle.status().state).toBe('stopped');
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('twin networks of one name (agents that created it at once) heal to the earliest, whose id the driver starts containers on', async () => {
    const name = `scalegate-twins-${process.pid}`;
    // Straight to the engine's socket, past the driver's checks.
    const socket = new Pool('http://localhost', { socketPath: engine.socketPath });
    const raw = async (method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) => {
      const answer = await socket.request({
        method, path: `/${ENGINE_API_VERSION}${path}`, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await answer.body.text();
      return { status: answer.statusCode, body: (text ? JSON.parse(text) : {}) as { Id?: string; message?: string } };
    };
    // What two agents' creates at once can leave on dockerd, whose duplicate check is not atomic.
    const first = (await raw('POST', '/networks/create', { Name: name, Driver: 'bridge', CheckDuplicate: false })).body.Id!;
    const second = (await raw('POST', '/networks/create', { Name: name, Driver: 'bridge', CheckDuplicate: false })).body.Id!;
    try {
      expect((await raw('GET', `/networks/${name}`)).body.message).toMatch(/ambiguous/);
      expect(await engine.ensureNetwork(name)).toEqual({ id: first, created: false, warnings: [] });
      // the twin is gone: the name is no longer ambiguous
      expect(await raw('GET', `/networks/${name}`)).toMatchObject({ status: 200, body: { Id: first } });
    } finally {
      for (const id of [first, second]) await raw('DELETE', `/networks/${id}`);
      await socket.close();
    }
  });
});
