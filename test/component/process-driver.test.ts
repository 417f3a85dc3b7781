// The process driver with real child processes and real loopback ports, drawn from a port block
// this file reserves (harness/ports.ts): each harness gets its own slice of it. Waits are
// bounded polls on conditions (harness/wait-for.ts), never fixed sleeps.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from '../../agent/drivers/driver';
import { createProcessDriver } from '../../agent/drivers/process';
import { taskFolder, taskLogPath } from '../../agent/drivers/process-records';
import { PortAllocator, portKeyFor } from '../../agent/ports';
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from '../../domain/supervision';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor as pollUntil } from '../../harness/wait-for';

const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');

const stateDirs: string[] = [];
const drivers: TaskDriver[] = [];
let block: PortRange;
let slicesTaken = 0;
const SLICE_SIZE = 12;

beforeAll(async () => {
  block = await reservePortRange();
});
afterAll(async () => {
  // Whatever a failed test left running goes; then the folders and the port block.
  await Promise.all(drivers.map((driver) => driver.close?.()));
  for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true });
  block?.release();
});

interface Harness {
  stateDir: string;
  range: PortRange;
  ports: PortAllocator;
  driver: TaskDriver;
  events: Array<{ event: string; fields?: Record<string, unknown> }>;
  /** when (Date.now()) each event of `events` was logged, by position */
  loggedAt: number[];
}

/**
 * A driver over its own state folder and, unless given one (an agent restart reuses the range and
 * folder of the first), its own slice of the reserved block, so no two tests draw the same ports.
 */
function harness(
  range: PortRange = block.slice(SLICE_SIZE * slicesTaken++, SLICE_SIZE),
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-process-')),
  restartPolicy?: Partial<RestartPolicy>,
): Harness {
  if (!stateDirs.includes(stateDir)) stateDirs.push(stateDir);
  const events: Harness['events'] = [];
  const loggedAt: number[] = [];
  const ctx: DriverContext = {
    runtimeId: 'rt-test', stateDir, log: (event, fields) => loggedAt.push(Date.now()) && events.push({ event, fields }),
    ...(restartPolicy ? { restartPolicy: { ...DEFAULT_RESTART_POLICY, ...restartPolicy } } : {}),
  };
  const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 30_000 });
  const driver = createProcessDriver(ctx, ports);
  drivers.push(driver);
  return { stateDir, range, ports, driver, events, loggedAt };
}

let taskCounter = 0;
function serviceTask(spec: unknown, overrides: Partial<TaskStart> = {}): TaskStart {
  taskCounter++;
  return { taskId: `web-${taskCounter}-g1`, workload: 'web', kind: 'service', index: taskCounter, generation: 1, placementFence: 1, spec, ...overrides };
}

const fixtureSpec = (extra: Record<string, unknown> = {}) => ({ command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, ...extra });

const WAIT = { timeoutMs: 10_000, intervalMs: 25 };
const waitFor = <T>(what: string, probe: () => T | Promise<T>) => pollUntil(what, probe, WAIT);

const waitForState = (handle: TaskHandle, state: string) =>
  pollUntil(`task ${handle.taskId} to be ${state}`, () => handle.status().state === state, {
    ...WAIT,
    context: () => `it is ${handle.status().state}: ${handle.status().detail}`,
  });

/** Alive and not a zombie: an orphaned grandchild is reaped by init whenever init gets to it. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (comm) S ..." with S the state letter; Z is a zombie.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true; // no /proc (not Linux): signal 0 succeeding is the best we know
  }
}

function getJson(port: number, pathname = '/'): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: pathname, agent: false }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          try {
            resolve(JSON.parse(body));
          } catch (error) {
            reject(error);
          }
        });
      })
      .on('error', reject);
  });
}

function pidOf(handle: TaskHandle): number {
  const pid = handle.status().counts.pid;
  if (pid === undefined) throw new Error(`task ${handle.taskId} reports no pid`);
  return pid;
}

describe('process driver', () => {
  test('refuses an invalid service spec with invalid-spec', async () => {
    const { driver } = harness();
    await expect(driver.start(serviceTask({ command: [] }))).rejects.toMatchObject({ code: 'invalid-spec' });
    await expect(driver.start(serviceTask({ command: ['node'], readiness: { http: 'no-slash' } }))).rejects.toBeInstanceOf(DriverError);
  });

  test('a service has no source or destination, so the probe passes both and says why', async () => {
    const { driver } = harness();
    const probe = await driver.probe!(fixtureSpec());
    expect(probe.source.ok).toBe(true);
    expect(probe.destination.ok).toBe(true);
    expect(probe.source.detail).toMatch(/no source/);
    expect(probe.destination.detail).toMatch(/no destination/);
  });

  test('starts the fixture, becomes ready by HTTP, serves on its pair, and drains cleanly on SIGTERM', async () => {
    const { driver, ports, stateDir } = harness();
    const task = serviceTask(fixtureSpec());
    const handle = await driver.start(task);
    const { ports: pair } = handle.status();
    expect(pair).toBeDefined();

    await waitForState(handle, 'ready');
    const pid = pidOf(handle);
    const publicAnswer = await getJson(pair!.public);
    expect(publicAnswer).toMatchObject({
      port: pair!.public,
      internalPort: pair!.internal,
      taskId: task.taskId,
      incarnation: handle.incarnation,
      pid,
    });
    expect(await getJson(pair!.internal)).toMatchObject({ listener: 'internal', pid });
    expect(handle.status()).toMatchObject({ state: 'ready', generation: 1, counts: { restarts: 0, pid }, errors: 0 });

    const receipt = await handle.drain({ graceMs: 5000 });
    expect(receipt).toMatchObject({ taskId: task.taskId, incarnation: handle.incarnation, inFlight: 0, forced: false });
    expect(handle.status().state).toBe('stopped');
    expect(isRunning(pid)).toBe(false);
    // Drained: the record is gone and the pair is in quarantine.
    expect(await ports.recorded(portKeyFor(task))).toBeUndefined();
    expect(fs.readFileSync(taskLogPath(stateDir, task.taskId), 'utf8')).toContain('SIGTERM, closing');
  });

  test('a process that ignores SIGTERM is killed when the grace period runs out', async () => {
    const { driver } = harness();
    const handle = await driver.start(serviceTask(fixtureSpec({ env: { IGNORE_SIGTERM: '1' }, graceMs: 60_000 })));
    await waitForState(handle, 'ready');
    const pid = pidOf(handle);

    const draining = handle.drain({ graceMs: 300 });
    expect(handle.status().state).toBe('draining');
    const receipt = await draining;
    expect(receipt.forced).toBe(true);
    expect(handle.status().state).toBe('stopped');
    expect(() => process.kill(pid, 0)).toThrow();
  });

  test('readiness by TCP connect, and without a probe once the process stays up', async () => {
    const { driver } = harness();
    const byTcp = await driver.start(serviceTask(fixtureSpec({ readiness: { tcp: true } })));
    const noProbe = await driver.start(serviceTask({ command: [process.execPath, FIXTURE] }));
    await waitForState(byTcp, 'ready');
    await waitForState(noProbe, 'ready');
    const [tcpReceipt, noProbeReceipt] = await Promise.all([byTcp.drain({}), noProbe.drain({})]);
    expect(tcpReceipt.forced).toBe(false);
    expect(noProbeReceipt.forced).toBe(false);
  });

  test('an HTTP probe that never answers 2xx keeps the task starting, and says why', async () => {
    const { driver } = harness();
    const handle = await driver.start(serviceTask(fixtureSpec({ readiness: { http: '/missing' } })));
    // The fixture is up and a probe has been answered 404: still not ready.
    await waitFor('a probe answered 404', () => handle.status().detail?.includes('answered 404'));
    expect(handle.status().state).toBe('starting');
    const pid = pidOf(handle);
    await handle.drain({});
    expect(isRunning(pid)).toBe(false);
  });

  test('an exit nobody asked for is restarting (after a backoff) with the exit code; the env is the spec env plus ports, minus agent settings', async () => {
    // A backoff longer than the test: the task stays restarting, so env.json is the first run's.
    const { driver, stateDir } = harness(undefined, undefined, { baseMs: 600_000 });
    const previousToken = process.env.SCALEGATE_AGENT_TOKEN;
    process.env.SCALEGATE_AGENT_TOKEN = 'agent-secret-token';
    const script = [
      "require('fs').writeFileSync('env.json', JSON.stringify(process.env));",
      "console.log('to stdout'); console.error('to stderr');",
      'process.exit(3);',
    ].join(' ');
    const task = serviceTask({ command: [process.execPath, '-e', script], env: { GREETING: 'hello' } });
    try {
      const handle = await driver.start(task);
      await waitForState(handle, 'restarting');
      expect(handle.status().detail).toContain('code 3');
      expect(handle.status()).toMatchObject({ errors: 1, counts: { restarts: 1 }, lastExit: { code: 3, signal: null }, nextRestartAt: expect.any(String) });

      const env = JSON.parse(fs.readFileSync(path.join(taskFolder(stateDir, task.taskId), 'env.json'), 'utf8')) as Record<string, string>;
      const { ports: pair } = handle.status();
      expect(env).toMatchObject({
        GREETING: 'hello',
        PORT: String(pair!.public),
        INTERNAL_PORT: String(pair!.internal),
        SCALEGATE_TASK_ID: task.taskId,
        SCALEGATE_INCARNATION: handle.incarnation,
      });
      expect(env.SCALEGATE_AGENT_TOKEN).toBeUndefined();
      const log = fs.readFileSync(taskLogPath(stateDir, task.taskId), 'utf8');
      expect(log).toContain('to stdout');
      expect(log).toContain('to stderr');
    } finally {
      if (previousToken === undefined) delete process.env.SCALEGATE_AGENT_TOKEN;
      else process.env.SCALEGATE_AGENT_TOKEN = previousToken;
    }
  });

  test('a command that cannot be run is refused with spawn-failed', async () => {
    const { driver } = harness();
    await expect(driver.start(serviceTask({ command: ['/nonexistent/scalegate-no-such-binary'] }))).rejects.toMatchObject({ code: 'spawn-failed' });
  });

  test('drain reaches grandchildren through the process group', async () => {
    const { driver, stateDir } = harness();
    // sh starts a long sleep in the background and waits for it: the sleep is the grandchild.
    const task = serviceTask({ command: ['sh', '-c', 'sleep 600 & echo $! > grandchild.pid; wait'] });
    const handle = await driver.start(task);
    const pidFile = path.join(taskFolder(stateDir, task.taskId), 'grandchild.pid');
    const grandchild = await waitFor('the grandchild pid', () => {
      const text = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').trim() : '';
      return text ? Number(text) : undefined;
    });
    expect(isRunning(grandchild)).toBe(true);

    await handle.drain({ graceMs: 5000 });
    await waitFor('the grandchild to be gone', () => !isRunning(grandchild));
  });

  test('a restart finding its recorded port taken moves to a new pair and logs both pairs', async () => {
    const first = harness();
    const before = await first.driver.start(serviceTask(fixtureSpec(), { workload: 'api', index: 1, taskId: 'api-1-g1' }));
    await waitForState(before, 'ready');
    const recorded = before.status().ports!;
    await first.driver.close!();

    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(recorded.public, '127.0.0.1', resolve));
    try {
      const second = harness(first.range, first.stateDir);
      const after = await second.driver.start(serviceTask(fixtureSpec(), { workload: 'api', index: 1, taskId: 'api-1-g2', generation: 2 }));
      const moved = after.status().ports!;
      expect(moved.public).not.toBe(recorded.public);
      expect(second.events).toContainEqual({
        event: 'port-pair-moved',
        fields: expect.objectContaining({ workload: 'api', index: 1, from: recorded, to: moved }),
      });
      await waitForState(after, 'ready');
      await after.drain({});
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  test('a restart of the same workload/index (new agent, same state folder) gets the same ports', async () => {
    const first = harness();
    const firstTask = serviceTask(fixtureSpec(), { workload: 'api', index: 0, taskId: 'api-0-g1' });
    const before = await first.driver.start(firstTask);
    await waitForState(before, 'ready');
    const beforePid = pidOf(before);
    const pair = before.status().ports!;

    // Agent shutdown: every child killed, records kept.
    await first.driver.close!();
    expect(isRunning(beforePid)).toBe(false);
    expect(await first.ports.recorded('api/0')).toEqual(pair);

    const second = harness(first.range, first.stateDir);
    const after = await second.driver.start(serviceTask(fixtureSpec(), { workload: 'api', index: 0, taskId: 'api-0-g2', generation: 2 }));
    expect(after.status().ports).toEqual(pair);
    expect(after.incarnation).not.toBe(before.incarnation);
    await waitForState(after, 'ready');
    expect(await getJson(pair.public)).toMatchObject({ taskId: 'api-0-g2', incarnation: after.incarnation });
    expect(second.events.some((entry) => entry.event === 'port-pair-moved')).toBe(false);
    await after.drain({});
  });
});

// Supervision (DESIGN.md §3): a process that exits or dies on its own is started again, on the same
// task id and ports, with a backoff that grows; a drained or stopped task never is.
describe('process driver supervision', () => {
  /** When each run of the task was spawned, from the driver's own log. */
  const startsOf = (h: Harness, taskId: string) =>
    h.events.flatMap((e, i) => (e.event === 'task-started' && e.fields?.taskId === taskId ? [h.loggedAt[i]] : []));

  test('a SIGKILLed service process is replaced: a new process serves the same port, restarts 1, the kill recorded', async () => {
    const h = harness(undefined, undefined, { baseMs: 50 });
    const handle = await h.driver.start(serviceTask(fixtureSpec()));
    await waitForState(handle, 'ready');
    const before = handle.status();
    const pid = pidOf(handle);
    expect(before.counts.restarts).toBe(0);

    process.kill(pid, 'SIGKILL');
    const after = await waitFor('a new process of the task ready', () => {
      const status = handle.status();
      return status.state === 'ready' && status.counts.pid !== pid && status;
    });
    expect(after).toMatchObject({ taskId: before.taskId, ports: before.ports, counts: { restarts: 1 }, lastExit: { code: null, signal: 'SIGKILL' } });
    expect(after.incarnation).not.toBe(before.incarnation);
    expect(after.crashLooping).toBeUndefined();
    expect(isRunning(pid)).toBe(false);
    // The new process answers on the replica's port, as the new incarnation.
    expect(await getJson(before.ports!.public)).toMatchObject({ taskId: before.taskId, incarnation: after.incarnation, pid: after.counts.pid });
    await handle.drain({});
  });

  test('a command that exits at once is restarted with growing gaps, is never ready, and is crash-looping after 3 restarts', async () => {
    // Successive delays differ by at least 300 ms: more than a loaded machine's spawn jitter.
    const h = harness(undefined, undefined, { baseMs: 300, maxMs: 60_000, crashLoopRestarts: 3 });
    // A TCP probe the command never answers: ready could only come from a passing probe.
    const handle = await h.driver.start(serviceTask({ command: ['/bin/sh', '-c', 'exit 7'], readiness: { tcp: true } }));
    const seen = new Set<string>();
    let crashLoopingSeen = 0;
    await pollUntil('five runs of the command', () => {
      const status = handle.status();
      seen.add(status.state);
      if (status.crashLooping) crashLoopingSeen = Math.max(crashLoopingSeen, status.counts.restarts);
      return startsOf(h, handle.taskId).length >= 5;
    }, { timeoutMs: 30_000, intervalMs: 10 });
    const starts = startsOf(h, handle.taskId);
    const gaps = starts.slice(1).map((at, i) => at - starts[i]);
    // Each gap longer than the one before: the backoff grows (300, 600, 1200, 2400 ms asked).
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThan(gaps[i - 1]);
    const delays = h.events.filter((e) => e.event === 'task-restart-scheduled' && e.fields?.taskId === handle.taskId).map((e) => e.fields?.delayMs);
    expect(delays.slice(0, 4)).toEqual([300, 600, 1200, 2400]);
    expect(seen.has('ready')).toBe(false);
    expect(h.events.some((e) => e.event === 'task-ready' && e.fields?.taskId === handle.taskId)).toBe(false);
    expect(seen.has('restarting')).toBe(true);
    // Crash-looping from its third restart on, and it says so while it waits.
    expect(crashLoopingSeen).toBeGreaterThanOrEqual(3);
    await waitForState(handle, 'restarting');
    expect(handle.status()).toMatchObject({ crashLooping: true, lastExit: { code: 7, signal: null }, nextRestartAt: expect.any(String) });
    expect(handle.status().counts.restarts).toBeGreaterThanOrEqual(4);
    await handle.drain({});
    expect(handle.status().state).toBe('stopped');
  });

  test('an agent restarted while a task waits for its restart counts on from the recorded restarts', async () => {
    const policy = { baseMs: 600_000, maxMs: 3_600_000 };
    const first = harness(undefined, undefined, policy);
    const task = serviceTask({ command: ['/bin/sh', '-c', 'exit 5'], readiness: { tcp: true } });
    const before = await first.driver.start(task);
    await waitForState(before, 'restarting');
    expect(before.status().counts.restarts).toBe(1);
    await first.driver.close!(); // the agent's shutdown: the pending restart is cancelled, the records kept

    const second = harness(first.range, first.stateDir, policy);
    const after = await second.driver.start(task);
    await waitForState(after, 'restarting');
    expect(after.status()).toMatchObject({ counts: { restarts: 2 }, lastExit: { code: 5 } });
    // its backoff went on too: the second consecutive restart waits twice the first
    expect(second.events.find((e) => e.event === 'task-restart-scheduled')?.fields).toMatchObject({ restarts: 2, delayMs: 1_200_000 });
    await after.drain({});
  });

  test('a drained task is never restarted: neither one that exits on SIGTERM nor one drained while it waits for its restart', async () => {
    const h = harness(undefined, undefined, { baseMs: 50, maxMs: 100 });
    const ready = await h.driver.start(serviceTask(fixtureSpec()));
    const waiting = await h.driver.start(serviceTask({ command: ['/bin/sh', '-c', 'exit 1'], readiness: { tcp: true } }, { index: 1000 }));
    // A witness restarted every 100 ms at most: once it has run 5 more times, the others had time to restart.
    const witness = await h.driver.start(serviceTask({ command: ['/bin/sh', '-c', 'exit 1'], readiness: { tcp: true } }, { index: 1001 }));
    await waitForState(ready, 'ready');
    await waitForState(waiting, 'restarting');

    const receipts = await Promise.all([ready.drain({}), waiting.drain({})]);
    expect(receipts.map((r) => r.forced)).toEqual([false, false]);
    const drainedAt = Date.now();
    const witnessRuns = startsOf(h, witness.taskId).length;
    await pollUntil('the witness restarted 5 more times', () => startsOf(h, witness.taskId).length >= witnessRuns + 5, { timeoutMs: 20_000, intervalMs: 10 });

    for (const drained of [ready, waiting]) {
      expect(drained.status()).toMatchObject({ state: 'stopped' });
      expect(drained.status().nextRestartAt).toBeUndefined();
      expect(startsOf(h, drained.taskId).filter((at) => at >= drainedAt)).toEqual([]);
    }
    expect(ready.status().counts.restarts).toBe(0);
    await witness.drain({});
  });
});
