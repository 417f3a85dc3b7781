// Static stability on the agent side (issue 10, DESIGN.md §3 "Static stability"): one process per
// task across an agent restart, and no task stopped but the ones the control plane revokes.
//
//   - a real agent process (agent/main.ts) SIGKILLed and started again over its state folder adopts
//     the process its task left running: one OS process per task (counted with pgrep), same
//     incarnation, still serving on its recorded port; SIGTERM of the agent stops it;
//   - a process that cannot be adopted (another spec) is replaced, never doubled; a recorded pid
//     that now belongs to another process is neither adopted nor signalled;
//   - the heartbeat loop against a scripted control plane (503s, a dropped connection, 404, 401,
//     409 stale-fence revoking one task, then 200) stops exactly the revoked task.
//
// Real processes, real loopback ports (harness/ports.ts), a real node:http fake control
// plane on port 0. Waits are bounded polls on conditions, never fixed sleeps or timed assertions.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { AgentConfigSchema } from '../../agent/config';
import type { TaskStart } from '../../agent/drivers/driver';
import { createProcessDriver } from '../../agent/drivers/process';
import { processRecordPath, readProcessRecord, type ProcessRecord } from '../../agent/drivers/process-records';
import { identify } from '../../agent/drivers/proc';
import { TaskHost } from '../../agent/host';
import { TASK_RECORDS_FILE } from '../../agent/state-files';
import { CREDENTIAL_FILE, LeaseKeeper } from '../../agent/lease';
import { retryDelayMs } from '../../lib/backoff';
import { PortAllocator } from '../../agent/ports';
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from '../../domain/supervision';
import { freePort, spawnService, type ServiceProcess } from '../../embedded/processes';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor } from '../../harness/wait-for';
import { setTimeout as sleep } from 'node:timers/promises';

const HTTP_SERVER = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const AGENT_TOKEN = `restart-agent-token-${randomBytes(12).toString('hex')}`;
const SLICE_SIZE = 16;
const WAIT = { timeoutMs: 30_000, intervalMs: 50 };

let block: PortRange;
let slicesTaken = 0;
const roots: string[] = [];
const hosts: TaskHost[] = [];
const agents: ServiceProcess[] = [];
const decoys: ChildProcess[] = [];
const servers: http.Server[] = [];
/** every marker a task was started with, so whatever a failed test left running is found and killed */
const markers: string[] = [];

beforeAll(async () => {
  block = await reservePortRange();
});
afterAll(async () => {
  for (const agent of agents) agent.kill('SIGKILL');
  await Promise.all(hosts.map((host) => host.close().catch(() => {})));
  for (const marker of markers) for (const pid of pidsRunning(marker)) killQuietly(pid);
  for (const decoy of decoys) decoy.kill('SIGKILL');
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  block?.release();
});

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** The OS processes whose command line holds `marker` (pgrep -f), zombies excluded (they run nothing). */
function pidsRunning(marker: string): number[] {
  let out = '';
  try {
    out = execFileSync('pgrep', ['-f', '--', marker], { encoding: 'utf8' });
  } catch (error) {
    if ((error as { status?: number }).status === 1) return []; // pgrep: nothing matched
    throw error;
  }
  return out
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => identify(pid) !== null);
}

/** A unique argument on a task's command line, so its processes can be counted. */
function newMarker(): string {
  const marker = `--scalegate-restart-test=${randomUUID()}`;
  markers.push(marker);
  return marker;
}

function newStateDir(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-restart-'));
  roots.push(root);
  return path.join(root, 'agent');
}

const nextSlice = () => block.slice(SLICE_SIZE * slicesTaken++, SLICE_SIZE);

interface Agent {
  stateDir: string;
  range: PortRange;
  host: TaskHost;
  events: Array<{ event: string; fields?: Record<string, unknown> }>;
}

/** A task host over the real process driver, as agent/main.ts builds it; a restart passes the folder and range of the first. */
function hostAgent(stateDir = newStateDir(), range: PortRange = nextSlice(), restartPolicy?: RestartPolicy): Agent {
  const events: Agent['events'] = [];
  const log = (event: string, fields?: Record<string, unknown>) => events.push({ event, fields });
  const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 30_000 });
  const host = new TaskHost({ service: createProcessDriver({ runtimeId: 'rt-restart', stateDir, log, ...(restartPolicy ? { restartPolicy } : {}) }, ports) }, { stateDir, log });
  hosts.push(host);
  return { stateDir, range, host, events };
}

const serviceSpec = (marker: string, extra: Record<string, unknown> = {}) => ({
  command: [process.execPath, HTTP_SERVER, marker],
  readiness: { http: '/healthz' },
  graceMs: 2000,
  ...extra,
});

function serviceStart(taskId: string, index: number, spec: unknown): TaskStart {
  return { taskId, workload: 'web', kind: 'service', index, generation: 1, placementFence: 1, spec };
}

const readyOn = (host: TaskHost, taskId: string) =>
  waitFor(`task ${taskId} ready`, () => host.get(taskId)?.state === 'ready' && host.get(taskId)!, {
    ...WAIT,
    context: () => JSON.stringify(host.get(taskId)),
  });

/** GET / of the fixture: who serves on that port (task, incarnation, pid). */
async function whoServes(port: number): Promise<{ taskId: string; incarnation: string; pid: number }> {
  const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2000) });
  return (await response.json()) as { taskId: string; incarnation: string; pid: number };
}

// ---- a fake control plane ---------------------------------------------------------------------

interface Seen {
  method: string;
  path: string;
  bearer: string;
  body: any;
}

type Answer = { status: number; body?: unknown } | 'drop';

/** A node:http control plane on port 0 answering through `answer`; `seen` records every request. */
async function fakeControlPlane(answer: (request: Seen) => Answer): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const request: Seen = {
        method: req.method ?? '',
        path: req.url ?? '',
        bearer: (req.headers.authorization ?? '').replace(/^Bearer /, ''),
        body: text ? JSON.parse(text) : undefined,
      };
      seen.push(request);
      const answered = answer(request);
      if (answered === 'drop') {
        req.socket.destroy();
        return;
      }
      res.writeHead(answered.status, { 'content-type': 'application/json' }).end(JSON.stringify(answered.body ?? {}));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const newCredential = () => randomBytes(32).toString('base64url');

// ---- (a) a real agent process, SIGKILLed and restarted ------------------------------------------

describe('an agent restarted over its state folder runs one process per task', () => {
  test('a SIGKILLed agent leaves its task running; started again it adopts that process (same incarnation, one process, still serving); SIGTERM stops it', async () => {
    const credential = newCredential();
    const api = await fakeControlPlane((request) => {
      if (request.path === '/v1/runtimes') {
        if (request.bearer === AGENT_TOKEN) return { status: 201, body: { id: 'rt-a', fence: 1, leaseTtlMs: 3000, heartbeatIntervalMs: 1000, credential, resumed: false } };
        if (request.bearer === credential) return { status: 200, body: { id: 'rt-a', fence: 1, leaseTtlMs: 3000, heartbeatIntervalMs: 1000, resumed: true } };
        return { status: 401, body: { error: 'invalid-credential' } };
      }
      if (request.path === '/v1/runtimes/rt-a/heartbeat') return { status: 200, body: { fence: 1, revoked: [] } };
      return { status: 404, body: { error: 'not-found' } };
    });
    const stateDir = newStateDir();
    const range = nextSlice();
    const port = await freePort();
    const agentUrl = `http://127.0.0.1:${port}`;
    const output: string[] = [];
    const startAgent = async () => {
      const agent = spawnService({
        name: 'agent:rt-a',
        entry: 'agent/main.ts',
        args: ['--id', 'rt-a', '--port', String(port), '--state-dir', stateDir, '--api', api.url, '--port-range', range.label],
        env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_AGENT_TOKEN: AGENT_TOKEN },
        output: (_name, line) => output.push(line),
      });
      agents.push(agent);
      // It answers its own API only once it has registered (or resumed) with its credential.
      await waitFor('the agent registered and answering', async () => {
        if (agent.child.exitCode !== null) throw new Error(`the agent exited:\n${output.slice(-20).join('\n')}`);
        const response = await fetch(`${agentUrl}/v1/health`, { headers: { authorization: `Bearer ${credential}` } }).catch(() => null);
        return response?.status === 200;
      }, { ...WAIT, context: () => output.slice(-20).join('\n') });
      return agent;
    };
    const agentCall = async (method: string, urlPath: string, body?: unknown) => {
      const response = await fetch(`${agentUrl}${urlPath}`, {
        method,
        headers: { authorization: `Bearer ${credential}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const taskState = async () => (await agentCall('GET', '/v1/tasks/web-0-g1')).body;

    const marker = newMarker();
    const first = await startAgent();
    const started = await agentCall('PUT', '/v1/tasks/web-0-g1', { workload: 'web', kind: 'service', index: 0, generation: 1, placementFence: 1, spec: serviceSpec(marker) });
    expect(started.status).toBe(201);
    const ready = await waitFor('the task ready', async () => {
      const task = await taskState();
      return task.state === 'ready' && task;
    }, WAIT);
    const [pid] = pidsRunning(marker);
    expect(pidsRunning(marker)).toEqual([ready.counts.pid]);
    expect(fs.existsSync(processRecordPath(stateDir, 'web-0-g1'))).toBe(true);

    // SIGKILL: the agent gets no chance to stop anything, and its task does not notice.
    first.kill('SIGKILL');
    await first.exited;
    expect(pidsRunning(marker)).toEqual([pid]);
    expect(await whoServes(ready.ports.public)).toMatchObject({ taskId: 'web-0-g1', incarnation: ready.incarnation, pid });

    // Started again over the same folder: it resumes, restores, and adopts the process it left.
    const second = await startAgent();
    const adopted = await waitFor('the task adopted and ready', async () => {
      const task = await taskState();
      return task.state === 'ready' && task;
    }, WAIT);
    expect(adopted).toMatchObject({ incarnation: ready.incarnation, ports: ready.ports, counts: { pid, adopted: 1 } });
    expect(pidsRunning(marker)).toEqual([pid]); // one process for the task, not two
    expect(await whoServes(ready.ports.public)).toMatchObject({ incarnation: ready.incarnation, pid });
    expect(output.some((line) => line.includes('"event":"task-adopted"') && line.includes('web-0-g1'))).toBe(true);
    // The heartbeats report it as it was: same incarnation, nothing restarted.
    await waitFor('a heartbeat reporting the adopted task', () =>
      api.seen.some((r) => r.path.endsWith('/heartbeat') && r.body.tasks.some((t: any) => t.taskId === 'web-0-g1' && t.incarnation === ready.incarnation && t.state === 'ready')), WAIT);

    // SIGKILLed again, and this time its task dies too while no agent runs: the next agent starts
    // it afresh (a new incarnation), still exactly one process.
    second.kill('SIGKILL');
    await second.exited;
    process.kill(pid!, 'SIGKILL');
    await waitFor('the task process gone', () => pidsRunning(marker).length === 0, WAIT);
    const third = await startAgent();
    const fresh = await waitFor('the task started afresh and ready', async () => {
      const task = await taskState();
      return task.state === 'ready' && task;
    }, WAIT);
    expect(fresh.incarnation).not.toBe(ready.incarnation);
    expect(fresh.counts.adopted).toBeUndefined();
    expect(pidsRunning(marker)).toEqual([fresh.counts.pid]);

    // The agent's own shutdown (SIGTERM, as Ctrl-C of `npm start`) stops its tasks.
    await third.stop(15_000);
    await waitFor('the task process stopped with the agent', () => pidsRunning(marker).length === 0, WAIT);
  });

  test('a host restarted over the folder of one that was killed adopts its processes; an adopted process ending is noticed and restarted, its restart count recorded for the next host; a drain stops it', async () => {
    // `first` is abandoned below as if SIGKILLed, but its timers live on in this jest process: a
    // restart backoff longer than the test keeps it from restarting the process it lost too.
    const first = hostAgent(undefined, undefined, { ...DEFAULT_RESTART_POLICY, baseMs: 3_600_000 });
    const marker = newMarker();
    const start = serviceStart('web-0-g1', 0, serviceSpec(marker));
    await first.host.ensure(start);
    const before = await readyOn(first.host, start.taskId);
    // `first` is abandoned without close(): as if its agent had been SIGKILLed.

    const second = hostAgent(first.stateDir, first.range);
    await second.host.restore();
    const adopted = await readyOn(second.host, start.taskId);
    expect(adopted).toMatchObject({ incarnation: before.incarnation, ports: before.ports, counts: { pid: before.counts.pid, adopted: 1 } });
    expect(pidsRunning(marker)).toEqual([before.counts.pid]);
    expect(second.events).toContainEqual({ event: 'task restored', fields: expect.objectContaining({ taskId: start.taskId, adopted: true }) });

    // Its end is seen by polling (it is not this host's child), and the host's driver starts it
    // again itself (supervision): a new incarnation on the same ports, one restart, its end recorded.
    process.kill(before.counts.pid!, 'SIGKILL');
    const restarted = await waitFor('the adopted task restarted', () => {
      const status = second.host.get(start.taskId);
      return status?.state === 'ready' && status.incarnation !== before.incarnation && status;
    }, { ...WAIT, context: () => JSON.stringify(second.host.get(start.taskId)) });
    expect(restarted).toMatchObject({ ports: before.ports, counts: { restarts: 1 }, lastExit: { code: null, signal: null } });
    expect(restarted.counts.adopted).toBeUndefined();
    expect(restarted.counts.pid).not.toBe(before.counts.pid);
    expect(pidsRunning(marker)).toEqual([restarted.counts.pid]);
    // Its record names the new process and its restarts: what the next agent adopts it with (adopt()).
    expect(readProcessRecord(first.stateDir, start.taskId)).toMatchObject({ incarnation: restarted.incarnation, pid: restarted.counts.pid, restarts: 1 });

    // A drain stops it and nothing is left.
    await second.host.drainTask(start.taskId);
    expect(pidsRunning(marker)).toEqual([]);
  });

  test('a left process that cannot be adopted (its task now has another spec) is stopped (its process group) before the fresh one starts', async () => {
    const first = hostAgent();
    const marker = newMarker();
    const start = serviceStart('web-0-g1', 0, serviceSpec(marker));
    await first.host.ensure(start);
    const before = await readyOn(first.host, start.taskId);

    // The recorded start now says another spec (e.g. applied in place after the process started).
    const recordFile = path.join(first.stateDir, TASK_RECORDS_FILE);
    const recorded = JSON.parse(fs.readFileSync(recordFile, 'utf8')) as TaskStart[];
    fs.writeFileSync(recordFile, JSON.stringify(recorded.map((s) => ({ ...s, spec: serviceSpec(marker, { env: { FLAVOUR: 'new' } }) }))));

    const second = hostAgent(first.stateDir, first.range);
    await second.host.restore();
    const replaced = await readyOn(second.host, start.taskId);
    expect(replaced.incarnation).not.toBe(before.incarnation);
    expect(replaced.counts.adopted).toBeUndefined();
    expect(pidsRunning(marker)).toEqual([replaced.counts.pid]);
    expect(second.events).toContainEqual({ event: 'task-left-process-replaced', fields: expect.objectContaining({ taskId: start.taskId, reason: 'it runs another spec' }) });
    await second.host.drainTask(start.taskId);
    expect(pidsRunning(marker)).toEqual([]);
  });

  test('a recorded pid that now belongs to another process is neither adopted nor signalled', async () => {
    const first = hostAgent();
    const marker = newMarker();
    const start = serviceStart('web-0-g1', 0, serviceSpec(marker));
    await first.host.ensure(start);
    const before = await readyOn(first.host, start.taskId);
    const record = readProcessRecord(first.stateDir, start.taskId)!;
    expect(record).toMatchObject({ pid: before.counts.pid, incarnation: before.incarnation });
    await first.host.close(); // the task's process is gone …

    // … and its pid has been handed to another process: a group leader of its own, as a task is.
    const decoyMarker = newMarker();
    const decoy = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)', '--', decoyMarker], { detached: true, stdio: 'ignore' });
    decoys.push(decoy);
    await waitFor('the decoy running', () => pidsRunning(decoyMarker).length === 1, WAIT);
    const decoyIdentity = identify(decoy.pid!)!;
    const stale: ProcessRecord[] = [
      // the pid, with the start time of the process that had it before
      { ...record, pid: decoy.pid!, pgid: decoy.pid! },
      // the decoy's very start time, but of an earlier boot
      { ...record, pid: decoy.pid!, pgid: decoy.pid!, startTime: decoyIdentity.startTime, bootId: 'an-earlier-boot' },
    ];
    for (const planted of stale) {
      fs.mkdirSync(path.dirname(processRecordPath(first.stateDir, start.taskId)), { recursive: true });
      fs.writeFileSync(processRecordPath(first.stateDir, start.taskId), JSON.stringify(planted));
      const second = hostAgent(first.stateDir, first.range);
      await second.host.restore();
      const fresh = await readyOn(second.host, start.taskId);
      expect(fresh.counts.pid).not.toBe(decoy.pid);
      expect(fresh.counts.adopted).toBeUndefined();
      expect(fresh.incarnation).not.toBe(record.incarnation);
      expect(second.events).toContainEqual({ event: 'task-left-process-gone', fields: expect.objectContaining({ taskId: start.taskId, pid: decoy.pid }) });
      expect(pidsRunning(decoyMarker)).toEqual([decoy.pid]); // untouched
      expect(decoy.exitCode).toBeNull();
      expect(decoy.signalCode).toBeNull();
      expect(pidsRunning(marker)).toEqual([fresh.counts.pid]);
      await second.host.close();
      expect(pidsRunning(marker)).toEqual([]);
    }
  });
});

// ---- (c) the heartbeat loop stops only what is revoked ------------------------------------------

describe('an agent whose output nobody reads any more', () => {
  test('runs on, serving, without spinning: its writes fail with EPIPE (the reader went away), and that is no loop', async () => {
    const credential = newCredential();
    const api = await fakeControlPlane((request) => {
      if (request.path === '/v1/runtimes') return { status: 201, body: { id: 'rt-mute', fence: 1, leaseTtlMs: 3000, heartbeatIntervalMs: 200, credential, resumed: false } };
      if (request.path === '/v1/runtimes/rt-mute/heartbeat') return { status: 503, body: { error: 'unavailable' } }; // logged at every beat
      return { status: 404, body: { error: 'not-found' } };
    });
    const port = await freePort();
    const agent = spawnService({
      name: 'agent:rt-mute', entry: 'agent/main.ts',
      args: ['--id', 'rt-mute', '--port', String(port), '--state-dir', newStateDir(), '--api', api.url, '--port-range', nextSlice().label],
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_AGENT_TOKEN: AGENT_TOKEN },
    });
    agents.push(agent);
    const health = async () => (await fetch(`http://127.0.0.1:${port}/v1/health`, { headers: { authorization: `Bearer ${credential}` } }).catch(() => null))?.status ?? 0;
    await waitFor('the agent answering', async () => (await health()) === 200, WAIT);
    // The reader goes away: every line the agent writes from now on meets a closed pipe.
    agent.child.stdout!.destroy();
    agent.child.stderr!.destroy();
    const cpuTicks = () => {
      const fields = fs.readFileSync(`/proc/${agent.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (100 per second)
    };
    await sleep(1_000); // a few heartbeats, each logged into the closed pipe
    const before = cpuTicks();
    await sleep(3_000);
    // A loop on EPIPE burns the whole 3 s (300 ticks); an agent that lets the lines go uses a few.
    expect(cpuTicks() - before).toBeLessThan(100);
    expect(agent.child.exitCode).toBeNull();
    expect(await health()).toBe(200);
  });
});

describe('the heartbeat loop stops nothing on its own', () => {
  test('retry delays grow from the base to the cap, never zero', () => {
    const half = () => 0.5; // no jitter
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, 100, 1000, half))).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(retryDelayMs(1, 100, 1000, () => 0)).toBe(80);
    expect(retryDelayMs(50, 100, 1000, () => 0.999)).toBeLessThanOrEqual(1200);
  });

  test('503s, dropped connections, 404 and 401 stop nothing; a 409 stale-fence stops exactly the task it revokes, and the agent registers again and carries on', async () => {
    const { stateDir, range, host, events: hostEvents } = hostAgent();
    const tasks = ['x', 'y', 'z'].map((id, index) => ({ start: serviceStart(`${id}-0-g1`, index, serviceSpec(newMarker())), id }));
    const markerOf = (start: TaskStart) => (start.spec as { command: string[] }).command[2]!;
    for (const { start } of tasks) await host.ensure(start);
    const before = new Map<string, { incarnation: string; pid: number }>();
    for (const { start } of tasks) {
      const status = await readyOn(host, start.taskId);
      before.set(start.taskId, { incarnation: status.incarnation, pid: status.counts.pid! });
    }
    const [x, y, z] = tasks.map((t) => t.start) as [TaskStart, TaskStart, TaskStart];

    // The control plane's script: what each heartbeat is answered, in order, then 200 for ever.
    const heartbeatScript: Answer[] = [
      { status: 503, body: { error: 'unavailable' } },
      { status: 503, body: { error: 'unavailable' } },
      { status: 503, body: { error: 'unavailable' } },
      'drop',
      'drop',
      // today's API lists every reported task on a 404: the agent must not act on it
      { status: 404, body: { error: 'not-found', revoked: [x.taskId, y.taskId, z.taskId] } },
      { status: 401, body: { error: 'invalid-credential' } },
      { status: 409, body: { error: 'stale-fence', currentFence: 2, revoked: [x.taskId] } },
    ];
    let fence = 1;
    let credential = newCredential();
    /** what a resume with the current credential is answered next (then 200 for ever) */
    const resumeScript: Answer[] = [
      { status: 200, body: { fence: 1, leaseTtlMs: 300, heartbeatIntervalMs: 100, resumed: true } }, // after the 404
      { status: 401, body: { error: 'invalid-credential' } }, // after the 401
      { status: 401, body: { error: 'credential-expired' } }, // after the 409: declared LOST
    ];
    let registrations = 0;
    const api = await fakeControlPlane((request) => {
      if (request.path === '/v1/runtimes') {
        if (request.bearer === AGENT_TOKEN) {
          registrations++;
          if (registrations > 1 && resumeScript.length === 0) fence = 2; // after the stale fence: a new one
          credential = newCredential();
          return { status: 201, body: { fence, leaseTtlMs: 300, heartbeatIntervalMs: 100, credential, resumed: false } };
        }
        if (request.bearer !== credential) return { status: 401, body: { error: 'invalid-credential' } };
        return resumeScript.shift() ?? { status: 200, body: { fence, leaseTtlMs: 300, heartbeatIntervalMs: 100, resumed: true } };
      }
      if (request.path === '/v1/runtimes/rt-c/heartbeat') {
        if (request.bearer !== credential) return { status: 401, body: { error: 'invalid-credential' } };
        return heartbeatScript.shift() ?? { status: 200, body: { fence, revoked: [] } };
      }
      return { status: 404, body: { error: 'not-found' } };
    });

    const logs: Array<{ event: string; fields?: Record<string, unknown> }> = [];
    const revocations: string[][] = [];
    const config = AgentConfigSchema.parse({
      id: 'rt-c', port: 9, labels: {}, stateDir, apiUrl: api.url, token: AGENT_TOKEN, portRangeStart: range.start, portRangeEnd: range.end,
    });
    const lease = new LeaseKeeper(config, 'http://127.0.0.1:9', {
      reports: () => host.list(),
      revoke: async (taskIds, reason) => {
        revocations.push(taskIds);
        await host.revoke(taskIds, reason);
      },
      log: (event, fields) => logs.push({ event, fields }),
    }, { retryBaseMs: 20, retryMaxMs: 100 });
    try {
      lease.start();
      // Through the whole script, and on until heartbeats on the new fence, with the new credential, are answered 200.
      await waitFor('heartbeats accepted on the new fence', () => {
        const beats = api.seen.filter((r) => r.path.endsWith('/heartbeat'));
        return heartbeatScript.length === 0 && beats.filter((r) => r.body.fence === 2 && r.bearer === credential).length >= 3;
      }, { ...WAIT, context: () => JSON.stringify(logs.slice(-10)) });
      await waitFor(`${x.taskId} stopped`, () => host.get(x.taskId) === null && pidsRunning(markerOf(x)).length === 0, WAIT);
    } finally {
      lease.stop();
    }

    // Exactly the revoked task stopped; the others never did: same incarnation, same process.
    expect(revocations).toEqual([[x.taskId]]);
    for (const kept of [y, z]) {
      const status = host.get(kept.taskId)!;
      expect({ state: status.state, incarnation: status.incarnation, pid: status.counts.pid }).toEqual({ state: 'ready', ...before.get(kept.taskId) });
      expect(pidsRunning(markerOf(kept))).toEqual([before.get(kept.taskId)!.pid]);
    }
    expect(hostEvents).toContainEqual({ event: 'task revoked', fields: expect.objectContaining({ taskId: x.taskId, incarnation: before.get(x.taskId)!.incarnation }) });
    expect(hostEvents.filter((entry) => entry.event === 'task revoked')).toHaveLength(1);
    // The agent registered again after the 401 and after the 409 (with the agent token, as its
    // credential was refused), and keeps the credential it was issued last.
    expect(registrations).toBe(3); // the first, after the 401, after the 409
    expect(lease.currentFence).toBe(2);
    expect(JSON.parse(fs.readFileSync(path.join(stateDir, CREDENTIAL_FILE), 'utf8')).credential).toBe(credential);
    // Each change of the link is logged once, not each attempt: 3 × 503 and 2 dropped connections
    // are two changes (and one recovery).
    const failing = logs.filter((entry) => entry.event.startsWith('control plane link failing'));
    expect(failing.map((entry) => entry.fields?.kind)).toEqual(['heartbeat 503 unavailable', 'unreachable']);
    expect(logs.filter((entry) => entry.event === 'control plane link restored')).toHaveLength(1);
    expect(logs.filter((entry) => entry.event.startsWith('fence refused'))).toHaveLength(1);
  });
});
