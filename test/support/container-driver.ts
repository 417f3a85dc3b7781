// The container driver's tests on any Docker-compatible engine (dockerd: test/component/
// container-driver.test.ts; podman: podman-driver.test.ts): one agent's driver per harness, the
// tasks it starts, and the checks every engine must pass alike.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CONTAINER_PORTS, createContainerDriver, LABEL } from '../../agent/drivers/container';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from '../../agent/drivers/driver';
import type { Engine } from '../../agent/drivers/engine';
import { PortAllocator } from '../../agent/ports';
import type { RestartPolicy } from '../../domain/supervision';
import type { PortRange } from '../../harness/ports';
import { waitFor as pollUntil } from '../../harness/wait-for';

export interface DriverHarness {
  runtimeId: string;
  driver: TaskDriver;
  events: { event: string; fields: unknown }[];
  stateDir: string;
  range: PortRange;
}

/** A task serving the test image's /www over httpd on the container's public port. */
export const HTTPD = { command: ['httpd', '-f', '-p', String(CONTAINER_PORTS.public), '-h', '/www'], readiness: { http: '/index.html' }, graceMs: 1000 };

/** The page a task of the test image serves. */
export const page = async (port: number) => (await fetch(`http://127.0.0.1:${port}/index.html`)).text();

/**
 * Harnesses of agents named `<prefix>-<pid>-<n>` on the engine, image and port block `on()` gives
 * (read when used: a file's beforeAll sets them).
 */
export function containerDriverHarnesses(prefix: string, on: () => { engine: Engine; image: string; block: PortRange }) {
  let runtimes = 0;
  let slices = 0;
  let tasks = 0;
  const stateDirs: string[] = [];

  /** One agent's driver; a restart (`previous`) reuses the runtime id, state folder and port range of the first. */
  function harness({ previous, policy }: { previous?: DriverHarness; policy?: RestartPolicy } = {}): DriverHarness {
    const runtimeId = previous?.runtimeId ?? `${prefix}-${process.pid}-${++runtimes}`;
    const stateDir = previous?.stateDir ?? fs.mkdtempSync(path.join(os.tmpdir(), `scalegate-${prefix}-agent-`));
    if (!previous) stateDirs.push(stateDir);
    const range = previous?.range ?? on().block.slice(8 * slices++, 8);
    const events: DriverHarness['events'] = [];
    const ctx: DriverContext = { runtimeId, stateDir, log: (event, fields) => events.push({ event, fields }), ...(policy ? { restartPolicy: policy } : {}) };
    const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 0 });
    return { runtimeId, driver: createContainerDriver(ctx, on().engine, ports, { bindHost: '127.0.0.1' }), events, stateDir, range };
  }

  function start(spec: Record<string, unknown>, overrides: Partial<TaskStart> = {}): TaskStart {
    tasks++;
    return { taskId: `${prefix}-${process.pid}-${tasks}-g1`, workload: 'box', kind: 'service', index: tasks, generation: 1, placementFence: 1, spec: { image: on().image, ...spec }, ...overrides };
  }

  const ready = async (handle: TaskHandle) => {
    await pollUntil(`${handle.taskId} ready`, () => handle.status().state === 'ready' || handle.status().state === 'failed', { timeoutMs: 30_000 });
    expect(handle.status()).toMatchObject({ state: 'ready' });
  };
  const containersOf = (runtimeId: string) => on().engine.list({ [LABEL.runtime]: runtimeId });

  return {
    harness, start, ready, containersOf,
    removeStateDirs: () => {
      for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true });
    },

    /** A start whose image cannot be pulled is refused, naming the runtime and the image, with nothing started. */
    async refusesAnUnpullableImage(): Promise<void> {
      const agent = harness();
      const missing = on().image.replace(/@sha256:[a-f0-9]{64}$/, `@sha256:${'0'.repeat(64)}`);
      const attempt = agent.driver.start(start({ ...HTTPD, image: missing }));
      await expect(attempt).rejects.toBeInstanceOf(DriverError);
      await expect(attempt).rejects.toMatchObject({ code: 'image-unavailable', message: expect.stringContaining(`runtime ${agent.runtimeId} cannot pull ${missing}`) });
      expect(await containersOf(agent.runtimeId)).toEqual([]);
    },

    /**
     * A restarted agent adopts its running container (the same container, its incarnation, still
     * serving) and its sweep removes the one no hosted task names; nothing is left after a drain.
     */
    async adoptsAndSweeps(): Promise<void> {
      const first = harness();
      const kept = start(HTTPD);
      const stray = start(HTTPD);
      const keptHandle = await first.driver.start(kept);
      await ready(keptHandle);
      await ready(await first.driver.start(stray));
      const before = new Map((await containersOf(first.runtimeId)).map((c) => [c.Labels[LABEL.task], c.Id]));
      expect(before.size).toBe(2);

      // The agent stops (its driver closes: it watches and restarts nothing more); the engine keeps
      // the containers running. A new one starts what it recorded.
      await first.driver.close!();
      const second = harness({ previous: first });
      const adopted = await second.driver.start(kept);
      expect(adopted.incarnation).toBe(keptHandle.incarnation);
      await ready(adopted);
      expect(adopted.status().counts.adopted).toBe(1);
      expect(await page(adopted.status().ports!.public)).toBe('v1\n');
      expect(await second.driver.sweep!((taskId) => taskId === kept.taskId)).toEqual([stray.taskId]);
      const after = await containersOf(first.runtimeId);
      expect(after.map((c) => [c.Labels[LABEL.task], c.Id])).toEqual([[kept.taskId, before.get(kept.taskId)]]);
      await adopted.drain({ graceMs: 1000 });
      expect(await containersOf(first.runtimeId)).toEqual([]);
    },
  };
}
