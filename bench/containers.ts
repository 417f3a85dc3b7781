// bench/containers: `npm run bench:containers` (tsx bench/containers.ts [N]) prints one JSON object.
//
// Container start → ready against a process start on the same node, measured in the same run: the
// agent's container driver on a real Docker engine (Debian's dockerd, started here with a folder of
// its own, and a real image registry; the image is the busybox root every `npm start` serves, pinned
// by digest and already on the engine) against its process driver running the very same command,
// `/bin/busybox sh -c 'exec /bin/busybox httpd -f -p "$PORT" -h "$WWW"'`, with the same HTTP
// readiness probe (/index.html). One start is timed from driver.start() until the task reports
// `ready` (what the agent tells the control plane); its stop, from drain() until the receipt (the
// container's is the engine's stop and remove; its httpd is PID 1 and ignores SIGTERM, so it is the
// grace of 1 s, then SIGKILL). N runs each (default 9), alternating which goes
// first; medians compared as container / process.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createContainerDriver } from '../agent/drivers/container';
import type { TaskDriver, TaskStart } from '../agent/drivers/driver';
import { createProcessDriver } from '../agent/drivers/process';
import { PortAllocator } from '../agent/ports';
import { BUSYBOX_WEB, containerSupportMissing, ensureBusyboxImage, startContainers } from '../embedded/container-engine';
import { waitFor } from '../harness/wait-for';

const N = Number(process.argv[2] ?? 9);
const COMMAND = ['/bin/busybox', 'sh', '-c', 'exec /bin/busybox httpd -f -p "$PORT" -h "$WWW"'];
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
const log = (line: string) => process.stderr.write(`[bench:containers] ${line}\n`);

interface Timing {
  readyMs: number;
  stopMs: number;
}

async function main(): Promise<void> {
  const missing = containerSupportMissing();
  if (missing) throw new Error(`containers cannot run here: ${missing}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-bench-containers-'));
  const drivers: TaskDriver[] = [];
  const containers = await startContainers({ dir: path.join(dir, 'containers'), log });
  try {
    const { pinned } = await ensureBusyboxImage({ engine: containers.engine, registry: containers.registry, ...BUSYBOX_WEB, workDir: dir });
    const www = path.join(dir, 'www');
    fs.mkdirSync(www);
    fs.writeFileSync(path.join(www, 'index.html'), BUSYBOX_WEB.files['www/index.html']);
    // One node: one state folder and one port range for both drivers.
    const stateDir = path.join(dir, 'agent');
    fs.mkdirSync(stateDir);
    const rangeStart = 20_000 + Math.floor(Math.random() * 9_000);
    const ports = new PortAllocator({ stateDir, rangeStart, rangeEnd: rangeStart + 199, quarantineMs: 0 });
    const ctx = { runtimeId: `bench-${process.pid}`, stateDir, log: () => {} };
    const byRuntime = {
      process: createProcessDriver(ctx, ports),
      container: createContainerDriver(ctx, containers.engine.engine, ports, { bindHost: '127.0.0.1' }),
    };
    drivers.push(byRuntime.process, byRuntime.container);
    const specs = {
      process: { command: COMMAND, env: { WWW: www }, readiness: { http: '/index.html' }, graceMs: 1000 },
      container: { image: pinned, command: COMMAND, env: { WWW: '/www' }, readiness: { http: '/index.html' }, graceMs: 1000 },
    };
    let tasks = 0;
    const once = async (runtime: 'process' | 'container'): Promise<Timing> => {
      tasks++;
      const start: TaskStart = { taskId: `bench-${tasks}-g1`, workload: `bench-${runtime}`, kind: 'service', index: tasks, generation: 1, placementFence: 1, spec: specs[runtime] };
      const began = performance.now();
      const handle = await byRuntime[runtime].start(start);
      await waitFor(`${runtime} ${start.taskId} ready`, () => {
        const state = handle.status().state;
        if (state === 'failed') throw new Error(`${runtime} ${start.taskId} failed: ${handle.status().detail}`);
        return state === 'ready';
      }, { timeoutMs: 60_000, intervalMs: 2 });
      const readyMs = performance.now() - began;
      const answer = await fetch(`http://127.0.0.1:${handle.status().ports!.public}/index.html`);
      if ((await answer.text()) !== 'v1\n') throw new Error(`${runtime} ${start.taskId}: /index.html answered ${answer.status} with something else`);
      const stopping = performance.now();
      await handle.drain({ graceMs: 1000 });
      return { readyMs, stopMs: performance.now() - stopping };
    };
    // One warm-up each (the first process start loads busybox from disk, the first container creates the network).
    await once('process');
    await once('container');
    const runs: Record<'process' | 'container', Timing[]> = { process: [], container: [] };
    for (let i = 0; i < N; i++) {
      for (const runtime of i % 2 === 0 ? (['process', 'container'] as const) : (['container', 'process'] as const)) runs[runtime].push(await once(runtime));
    }
    const summary = (timings: Timing[]) => ({
      readyMsMedian: Math.round(median(timings.map((t) => t.readyMs))),
      stopMsMedian: Math.round(median(timings.map((t) => t.stopMs))),
      readyMs: timings.map((t) => Math.round(t.readyMs)),
    });
    const processSummary = summary(runs.process);
    const containerSummary = summary(runs.container);
    process.stdout.write(`${JSON.stringify({
      bench: 'containers', cpus: os.cpus().length, loadAverage: os.loadavg().map((l) => Math.round(l * 10) / 10), runs: N,
      command: COMMAND, image: pinned, engine: 'dockerd (Debian docker.io), image on the engine already',
      process: processSummary,
      container: containerSummary,
      containerToProcess: {
        ready: ratio(containerSummary.readyMsMedian, processSummary.readyMsMedian),
        stop: ratio(containerSummary.stopMsMedian, processSummary.stopMsMedian),
      },
      // busybox httpd installs no SIGTERM handler: as a process it dies of the signal at once; as a
      // container it is PID 1, which the kernel shields from an unhandled SIGTERM, so the engine's
      // stop waits the task's grace (1 s) and then kills it
      stopNote: 'the container\'s httpd is PID 1 and ignores SIGTERM: its stop is the grace (1 s) then SIGKILL, then remove',
    }, null, 2)}\n`);
  } finally {
    await Promise.all(drivers.map((d) => d.close?.().catch(() => {})));
    await containers.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
