// The container driver on the run's real Docker engine and image registry (test/support/
// shared-servers.ts: Debian's dockerd and docker-registry; the image is a busybox root pushed there
// and pinned by digest). Each harness is one "agent": its own runtime id, state folder and ports.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CONTAINER_PORTS, createContainerDriver, LABEL } from '../../agent/drivers/container';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from '../../agent/drivers/driver';
import { createEngine, type Engine } from '../../agent/drivers/engine';
import { PortAllocator } from '../../agent/ports';
import type { RestartPolicy } from '../../domain/supervision';
import { testEnv } from '../../harness/env';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor as pollUntil } from '../../harness/wait-for';

const env = testEnv();
let engine: Engine;
let image: string;
let block: PortRange;
let slices = 0;
const stateDirs: string[] = [];

beforeAll(async () => {
  // Containers are part of what CI proves: no engine here is a failure that says why, not a skip.
  if (!env.containers) throw new Error(`no container engine for this run: ${env.containersOff}`);
  engine = createEngine(env.containers.dockerHost.slice('unix://'.length));
  image = env.containers.image;
  block = await reservePortRange(64);
});
afterAll(async () => {
  for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true });
  block?.release();
});

interface Harness {
  runtimeId: string;
  driver: TaskDriver;
  events: string[];
  stateDir: string;
  range: PortRange;
}

let runtimes = 0;
/** One agent's container driver; a restart reuses the runtime id, state folder and port range of the first. */
function harness({ previous, policy }: { previous?: Harness; policy?: RestartPolicy } = {}): Harness {
  const runtimeId = previous?.runtimeId ?? `ct-${process.pid}-${++runtimes}`;
  const stateDir = previous?.stateDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-container-'));
  if (!previous) stateDirs.push(stateDir);
  const range = previous?.range ?? block.slice(8 * slices++, 8);
  const events: string[] = [];
  const ctx: DriverContext = { runtimeId, stateDir, log: (event) => events.push(event), ...(policy ? { restartPolicy: policy } : {}) };
  const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 0 });
  return { runtimeId, driver: createContainerDriver(ctx, engine, ports, { bindHost: '127.0.0.1' }), events, stateDir, range };
}

let tasks = 0;
const httpd = { command: ['httpd', '-f', '-p', String(CONTAINER_PORTS.public), '-h', '/www'], readiness: { http: '/index.html' }, graceMs: 1000 };
function start(spec: Record<string, unknown>, overrides: Partial<TaskStart> = {}): TaskStart {
  tasks++;
  return { taskId: `box-${process.pid}-${tasks}-g1`, workload: 'box', kind: 'service', index: tasks, generation: 1, placementFence: 1, spec: { image, ...spec }, ...overrides };
}

const ready = (handle: TaskHandle) => pollUntil(`${handle.taskId} ready`, () => handle.status().state === 'ready' || handle.status().state === 'failed', { timeoutMs: 30_000 });
const containersOf = async (runtimeId: string) => engine.list({ [LABEL.runtime]: runtimeId });

describe('the container driver', () => {
  it('runs the pinned image with the engine\'s limits and labels, serves the task\'s port, and leaves nothing after a drain', async () => {
    const agent = harness();
    const task = start({ ...httpd, limits: { cpus: 0.5, memoryMiB: 64 } });
    const handle = await agent.driver.start(task);
    await ready(handle);
    const status = handle.status();
    expect(status).toMatchObject({ state: 'ready', taskId: task.taskId, generation: 1 });
    expect(await (await fetch(`http://127.0.0.1:${status.ports!.public}/index.html`)).text()).toBe('v1\n');

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

  it('refuses a start whose image cannot be pulled, naming the runtime and the image, with nothing started', async () => {
    const agent = harness();
    const missing = image.replace(/@sha256:[a-f0-9]{64}$/, `@sha256:${'0'.repeat(64)}`);
    const attempt = agent.driver.start(start({ ...httpd, image: missing }));
    await expect(attempt).rejects.toBeInstanceOf(DriverError);
    await expect(attempt).rejects.toMatchObject({ code: 'image-unavailable', message: expect.stringContaining(`runtime ${agent.runtimeId} cannot pull ${missing}`) });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('refuses an image that is not pinned by digest', async () => {
    const agent = harness();
    await expect(agent.driver.start(start({ ...httpd, image: `${env.containers!.registry}/scalegate/web:v1` }))).rejects.toMatchObject({ code: 'invalid-spec' });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('a restarted agent adopts its running container (same id) and the sweep removes the ones no hosted task names', async () => {
    const first = harness();
    const kept = start(httpd);
    const stray = start(httpd);
    const keptHandle = await first.driver.start(kept);
    await ready(keptHandle);
    await ready(await first.driver.start(stray));
    const before = new Map((await containersOf(first.runtimeId)).map((c) => [c.Labels[LABEL.task], c.Id]));
    expect(before.size).toBe(2);

    // The agent is gone (its driver with it); the containers run on. A new one starts what it recorded.
    const second = harness({ previous: first });
    const adopted = await second.driver.start(kept);
    expect(adopted.incarnation).toBe(keptHandle.incarnation);
    await ready(adopted);
    expect(adopted.status().counts.adopted).toBe(1);
    expect(await second.driver.sweep!((taskId) => taskId === kept.taskId)).toEqual([stray.taskId]);
    const after = await containersOf(first.runtimeId);
    expect(after.map((c) => [c.Labels[LABEL.task], c.Id])).toEqual([[kept.taskId, before.get(kept.taskId)]]);
    await adopted.drain({ graceMs: 1000 });
  });

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
    expect(await (await fetch(`http://127.0.0.1:${port}/index.html`)).text()).toBe('v1\n');
    await handle.drain({ graceMs: 1000 });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
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
});
