// The container driver against podman's Docker-compatible socket (issue 34): a real `podman system
// service` (Debian's podman 4.3, embedded/podman-engine.ts) with its state in a folder of this
// file, pulling the run's test image by digest from the run's real registry (test/support/
// shared-servers.ts: pushed there by the run's dockerd). Each harness is one "agent".
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LABEL, WORKLOAD_NETWORK } from '../../agent/drivers/container';
import type { ContainerInspect, Engine } from '../../agent/drivers/engine';
import type { RunningEngine } from '../../embedded/container-engine';
import { podmanSupportMissing, startPodmanEngine } from '../../embedded/podman-engine';
import { testEnv } from '../../harness/env';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor as pollUntil } from '../../harness/wait-for';
import { containerDriverHarnesses, HTTPD as httpd, page } from '../support/container-driver';

const env = testEnv();
let podman: RunningEngine | undefined;
let engine: Engine;
let image: string;
let dir: string;
let block: PortRange;
const { harness, start, ready, containersOf, removeStateDirs, refusesAnUnpullableImage, adoptsAndSweeps } = containerDriverHarnesses('pm', () => ({ engine, image, block }));

beforeAll(async () => {
  // podman is part of what CI proves (.ci/run installs it): missing, the file fails and says why.
  if (!env.containers) throw new Error(`no image registry for this run: ${env.containersOff}`);
  const missing = podmanSupportMissing();
  if (missing) throw new Error(`podman is required for this test: ${missing}`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg-podman-'));
  podman = await startPodmanEngine({ dir, insecureRegistries: [env.containers.registry] });
  engine = podman.engine;
  image = env.containers.image;
  block = await reservePortRange(40);
});
afterAll(async () => {
  await podman?.stop();
  removeStateDirs();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  block?.release();
});

describe('the container driver on podman', () => {
  it('pulls the pinned image, runs it with podman\'s limits and labels, serves the task\'s port, reads memory from its stats, and a drain removes it', async () => {
    expect(await engine.imageId(image)).toBeNull(); // a fresh podman: the driver pulls it
    const agent = harness();
    const task = start({ ...httpd, limits: { cpus: 0.5, memoryMiB: 64 } });
    const handle = await agent.driver.start(task);
    await ready(handle);
    expect(await engine.imageId(image)).toMatch(/^sha256:[a-f0-9]{64}$/);
    expect(await page(handle.status().ports!.public)).toBe('v1\n');

    const [summary] = await containersOf(agent.runtimeId);
    const inspected = (await engine.inspect(summary.Id))!;
    expect(inspected.HostConfig).toMatchObject({ Memory: 64 * 1024 * 1024, NanoCpus: 500_000_000 });
    expect(inspected.Config.Image).toBe(image);
    expect(inspected.Config.Labels).toMatchObject({ [LABEL.runtime]: agent.runtimeId, [LABEL.workload]: 'box', [LABEL.task]: task.taskId, [LABEL.incarnation]: handle.incarnation });
    // podman creates the workload network but says it does not know the ICC option (docs/security.md)
    expect(agent.events.find((e) => e.event === 'workload-network-created')?.fields).toMatchObject({
      network: WORKLOAD_NETWORK, warnings: [expect.stringContaining('com.docker.network.bridge.enable_icc')],
    });

    // the memory evidence is the container's, as podman's stats count it, under its limit
    await pollUntil('memory sampled', () => handle.status().counts.rssBytes !== undefined, { timeoutMs: 15_000 });
    expect(handle.status().counts.rssBytes).toBeGreaterThan(0);
    expect(handle.status().counts.rssBytes).toBeLessThanOrEqual(64 * 1024 * 1024);

    const receipt = await handle.drain({ graceMs: 1000 });
    expect(receipt).toMatchObject({ taskId: task.taskId, incarnation: handle.incarnation, inFlight: 0 });
    expect(handle.status().state).toBe('stopped');
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('measures a busy container\'s CPU against the wall clock: under its 0.5-CPU limit, not against podman\'s busy-only system time', async () => {
    const agent = harness();
    const handle = await agent.driver.start(start({ command: ['sh', '-c', 'while :; do :; done'], limits: { cpus: 0.5 }, graceMs: 500 }));
    await ready(handle);
    await pollUntil('CPU sampled', () => (handle.status().counts.cpuPercent ?? 0) > 0, { timeoutMs: 15_000 });
    // the quota caps it at 50 % of one CPU; podman's system_cpu_usage (the host's busy time only)
    // would have read it as its share of that busy time times the CPUs, up to 200 % on 2 idle cores
    expect(handle.status().counts.cpuPercent).toBeLessThanOrEqual(60);
    await handle.drain({ graceMs: 500 });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });

  it('refuses a start whose image cannot be pulled, naming the runtime and the image, with nothing started', () => refusesAnUnpullableImage());

  it('a restarted agent adopts its running container (same id, still serving) and the sweep removes the ones no hosted task names', () => adoptsAndSweeps());

  it('does not enforce inter-container isolation on the workload network: another container reaches a task\'s port by its address', async () => {
    const agent = harness();
    const handle = await agent.driver.start(start(httpd));
    await ready(handle);
    const [served] = await containersOf(agent.runtimeId);
    const inspected = (await engine.inspect(served.Id)) as ContainerInspect & { NetworkSettings: { Networks: Record<string, { IPAddress: string }> } };
    const address = inspected.NetworkSettings.Networks[WORKLOAD_NETWORK].IPAddress;
    expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

    // a container of its own on the same network: exit 0 when the page came back through nc
    const request = 'printf "GET /index.html HTTP/1.0\\r\\n\\r\\n" | nc -w 3 "$1" 8080 | grep -qx v1';
    const client = await engine.create({
      name: `pm-icc-${process.pid}`, image, command: ['sh', '-c', request, 'sh', address], env: {},
      labels: { [LABEL.runtime]: agent.runtimeId }, publish: {}, network: WORKLOAD_NETWORK,
    });
    await engine.start(client);
    const ended = await pollUntil('the client container ended', async () => {
      const state = (await engine.inspect(client))!.State;
      return state.Running ? null : state;
    }, { timeoutMs: 15_000 });
    expect(ended.ExitCode).toBe(0);
    await engine.remove(client);
    await handle.drain({ graceMs: 1000 });
    expect(await containersOf(agent.runtimeId)).toEqual([]);
  });
});
