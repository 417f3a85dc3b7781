// The agent's task host and process driver under bad input and restarts (issue 9, DESIGN.md §3
// "Static stability", "Credentials", §5): a task that cannot work is failed or refused with the
// reason and never takes the agent down, a restarted host survives whatever its state folder
// holds, a task sees only its own environment, starts and stops under an older placement fence
// are refused (also after a restart), and the state folder is private.
//
// Real TaskHosts over real process drivers, real child processes, real loopback ports from a
// block this file reserves (harness/ports.ts). Waits are bounded polls on conditions.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { TaskStart } from '../../agent/drivers/driver';
import { createProcessDriver } from '../../agent/drivers/process';
import { processRecordPath, spawnMarkerPath, taskFolder, taskLogPath } from '../../agent/drivers/process-records';
import { BASE_ENVIRONMENT } from '../../agent/drivers/process-spawn';
import { processesWithEnvironment } from '../../agent/drivers/proc';
import { TaskHost } from '../../agent/host';
import { PORT_RECORDS_FILE, PortAllocator } from '../../agent/ports';
import { buildAgentServer } from '../../agent/server';
import { freePort } from '../../embedded/processes';
import { FENCE_RECORDS_FILE, TASK_RECORDS_FILE, tightenStateDir, untilStateDirWritable, writePrivateFileSync } from '../../agent/state-files';
import { statusOf } from '../../protocol';
import { taskProcesses } from '../../harness/chaos/checker';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor } from '../../harness/wait-for';

const HTTP_SERVER = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const PRINT_ENV = path.resolve(__dirname, '../fixtures/print-env.js');
const AGENT_TOKEN = 'hardening-agent-token-0123456789abcdef';
const SLICE_SIZE = 16;

let block: PortRange;
let slicesTaken = 0;
const roots: string[] = [];
const hosts: TaskHost[] = [];

beforeAll(async () => {
  block = await reservePortRange();
});
afterAll(async () => {
  // Whatever a failed test left running goes; then the folders and the port block.
  await Promise.all(hosts.map((host) => host.close()));
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  block?.release();
});

interface Agent {
  stateDir: string;
  range: PortRange;
  host: TaskHost;
  events: Array<{ event: string; fields?: Record<string, unknown> }>;
}

/** A state folder path that does not exist yet: the agent creates it. */
function newStateDir(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-hardening-'));
  roots.push(root);
  return path.join(root, 'agent');
}

/** A task host as agent/main.ts builds it; a restart passes the folder and range of the first. */
function agent(stateDir = newStateDir(), range: PortRange = block.slice(SLICE_SIZE * slicesTaken++, SLICE_SIZE)): Agent {
  const events: Agent['events'] = [];
  const log = (event: string, fields?: Record<string, unknown>) => events.push({ event, fields });
  const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 30_000 });
  const host = new TaskHost({ service: createProcessDriver({ runtimeId: 'rt-hardening', stateDir, log }, ports) }, { stateDir, log });
  hosts.push(host);
  return { stateDir, range, host, events };
}

/**
 * This file's workload name, unique to the run: its tests find a task's processes among every
 * process of the machine (SCALEGATE_TASK_ID), and the files running beside it start tasks of
 * workloads named web too (a clean-clone run saw their web-1-g1 here).
 */
const WORKLOAD = `hardening-${randomUUID().slice(0, 8)}`;
let taskCounter = 0;
function serviceStart(spec: unknown, overrides: Partial<TaskStart> = {}): TaskStart {
  taskCounter++;
  return { taskId: `${WORKLOAD}-${taskCounter}-g1`, workload: WORKLOAD, kind: 'service', index: taskCounter, generation: 1, placementFence: 1, spec, ...overrides };
}

const httpServerSpec = (extra: Record<string, unknown> = {}) => ({ command: [process.execPath, HTTP_SERVER], readiness: { http: '/healthz' }, ...extra });

const waitForState = (host: TaskHost, taskId: string, state: string) =>
  waitFor(`task ${taskId} to be ${state}`, () => host.get(taskId)?.state === state && host.get(taskId));

const modeOf = (file: string) => fs.statSync(file).mode & 0o777;

function httpStatus(port: number, pathname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: pathname, agent: false }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

/** Sets environment variables of this (the agent's) process for the duration of `work`. */
async function withAgentEnvironment<T>(planted: Record<string, string>, work: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
  Object.assign(process.env, planted);
  try {
    return await work();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

describe('a task that cannot work never takes the agent down', () => {
  test('chaos seed 80: a task process whose record cannot be written does not run (no process an agent restart could not find)', async () => {
    const { host, stateDir } = agent();
    const start = serviceStart(httpServerSpec());
    // The process record's place is taken by a folder: the write after the spawn fails (for root too).
    fs.mkdirSync(path.join(processRecordPath(stateDir, start.taskId), 'blocked'), { recursive: true });
    const error = await host.ensure(start).then(() => null, (e: unknown) => e as { code?: string });
    expect(error).toMatchObject({ code: 'state-unwritable' });
    expect(host.get(start.taskId)).toBeNull();
    await waitFor('no process of the task left', () => !taskProcesses().some((p) => p.taskId === start.taskId));
  });

  test('chaos seed 70: a process its agent was killed before recording is stopped by the next agent, which runs the one process of the task', async () => {
    const { host, stateDir } = agent();
    const start = serviceStart(httpServerSpec());
    // What an agent SIGKILLed between the spawn and the process record leaves: the marker naming
    // the incarnation, and a process of the task no record identifies.
    const incarnation = randomUUID();
    writePrivateFileSync(spawnMarkerPath(stateDir, start.taskId), JSON.stringify({ incarnation }));
    const [port, internalPort] = await Promise.all([freePort(), freePort()]);
    const orphan = spawn(process.execPath, [HTTP_SERVER], {
      env: { PATH: process.env.PATH, PORT: String(port), INTERNAL_PORT: String(internalPort), SCALEGATE_TASK_ID: start.taskId, SCALEGATE_INCARNATION: incarnation },
      detached: true, stdio: 'ignore',
    });
    await waitFor('the unrecorded process answering', () => httpStatus(port, '/healthz').then((status) => status === 200, () => false));
    const ofTask = () => processesWithEnvironment('SCALEGATE_TASK_ID', start.taskId);
    expect(ofTask()).toEqual([orphan.pid]);

    const started = await host.ensure(start);
    expect(started.created).toBe(true);
    await waitFor('one process of the task', () => ofTask().length === 1);
    expect(ofTask()).not.toContain(orphan.pid);
    expect(processesWithEnvironment('SCALEGATE_INCARNATION', started.status.incarnation)).toEqual(ofTask());
    expect(fs.existsSync(spawnMarkerPath(stateDir, start.taskId))).toBe(false);
  });

  test('chaos seeds 12 and 73: an agent whose state folder refuses it at start waits for the folder instead of exiting', async () => {
    const refusals = [Object.assign(new Error('EPERM: operation not permitted, chmod'), { code: 'EPERM' }), Object.assign(new Error('EROFS: read-only'), { code: 'EROFS' })];
    const waits: number[] = [];
    const logged: string[] = [];
    const attempts = await untilStateDirWritable(() => {
      const refusal = refusals.shift();
      if (refusal) throw refusal;
    }, (event) => logged.push(event), async (ms) => { waits.push(ms); });
    expect(attempts).toBe(2);
    expect(waits).toEqual([250, 500]);
    expect(logged).toEqual(['state-folder-unwritable']);
    // A fault that is not the folder refusing is a bug: thrown at once, not retried forever.
    await expect(untilStateDirWritable(() => { throw new TypeError('bug'); }, () => {}, async () => {})).rejects.toThrow('bug');
  });

  test('a state folder that refuses records (chaos: made immutable) refuses the start with 503 state-unwritable, starting nothing', async () => {
    const { host, stateDir } = agent();
    const first = serviceStart(httpServerSpec());
    await host.ensure(first);
    // The task records become unwritable: a folder where the records file is (a rename onto it fails, for root too).
    fs.rmSync(path.join(stateDir, TASK_RECORDS_FILE));
    fs.mkdirSync(path.join(stateDir, TASK_RECORDS_FILE, 'blocked'), { recursive: true });
    const refused = serviceStart(httpServerSpec());
    const error = await host.ensure(refused).then(() => null, (e: unknown) => e as { code?: string; message?: string });
    expect(error).toMatchObject({ code: 'state-unwritable', message: expect.stringContaining(`cannot write ${TASK_RECORDS_FILE}`) });
    expect(statusOf('state-unwritable')).toBe(503);
    expect(host.get(refused.taskId)).toBeNull();
    expect(host.get(first.taskId)).not.toBeNull();
  });

  test('a start whose readiness path has a space is refused with the reason; the host keeps serving its other tasks', async () => {
    const { host } = agent();
    const healthy = serviceStart(httpServerSpec());
    await host.ensure(healthy);
    await waitForState(host, healthy.taskId, 'ready');

    const broken = serviceStart(httpServerSpec({ readiness: { http: '/health z' } }));
    await expect(host.ensure(broken)).rejects.toMatchObject({ code: 'invalid-spec', message: expect.stringContaining('readiness') });

    expect(host.get(healthy.taskId)?.state).toBe('ready');
    expect(await httpStatus(host.get(healthy.taskId)!.ports!.public, '/healthz')).toBe(200);
    const another = serviceStart(httpServerSpec());
    expect(await host.ensure(another)).toMatchObject({ created: true });
    await waitForState(host, another.taskId, 'ready');
  });

  test('a restarted host whose records hold tasks it cannot start does not throw: those are failed with the reason, the others run', async () => {
    const first = agent();
    const good = serviceStart(httpServerSpec());
    await first.host.ensure(good);
    await waitForState(first.host, good.taskId, 'ready');
    await first.host.close(); // the agent stops; its processes go, its records stay

    // What an older agent (one that took any readiness path) recorded, and entries that are not starts at all.
    const recordFile = path.join(first.stateDir, TASK_RECORDS_FILE);
    const recorded = JSON.parse(fs.readFileSync(recordFile, 'utf8')) as unknown[];
    const badProbe = serviceStart(httpServerSpec({ readiness: { http: '/health z' } }));
    const badCommand = serviceStart({ command: ['/nonexistent/scalegate-no-such-binary'] });
    fs.writeFileSync(recordFile, JSON.stringify([...recorded, badProbe, badCommand, null, { taskId: 'half-a-start' }]));

    const second = agent(first.stateDir, first.range);
    await expect(second.host.restore()).resolves.toBeUndefined();
    await waitForState(second.host, good.taskId, 'ready');
    expect(second.host.get(badProbe.taskId)).toMatchObject({ state: 'failed', detail: expect.stringContaining('readiness') });
    expect(second.host.get(badCommand.taskId)).toMatchObject({ state: 'failed', detail: expect.stringContaining('cannot run') });
    expect(second.host.list()).toHaveLength(3);
    expect(second.events.filter((entry) => entry.event === 'task-record-invalid')).toHaveLength(2);

    // The control plane sees the failure and starts the task again with a spec that works.
    expect(await second.host.ensure({ ...badProbe, spec: httpServerSpec() })).toMatchObject({ created: true });
    await waitForState(second.host, badProbe.taskId, 'ready');
  });

  test('state records that are not JSON are set aside and logged; the host starts empty and serves', async () => {
    const stateDir = newStateDir();
    fs.mkdirSync(stateDir, { recursive: true });
    fs.writeFileSync(path.join(stateDir, TASK_RECORDS_FILE), '[{"taskId": "web-0-g1", "work');
    fs.writeFileSync(path.join(stateDir, FENCE_RECORDS_FILE), 'not json');

    const { host, events } = agent(stateDir);
    await expect(host.restore()).resolves.toBeUndefined();
    expect(host.list()).toEqual([]);
    expect(events.filter((entry) => entry.event === 'state-record-unusable')).toHaveLength(2);
    expect(fs.readdirSync(stateDir).filter((name) => name.includes('.unusable-'))).toHaveLength(2);

    const task = serviceStart(httpServerSpec());
    await host.ensure(task);
    await waitForState(host, task.taskId, 'ready');
  });
});

describe('task environment', () => {
  test('a task sees its spec env, its ports, its identity and PATH/HOME/LANG/TZ: nothing else of the agent environment', async () => {
    const planted: Record<string, string> = {
      DATABASE_URL: 'postgres://scalegate:secret@127.0.0.1:5432/scalegate',
      SCALEGATE_AGENT_TOKEN: 'agent-token-that-no-task-may-see',
      SCALEGATE_API_URL: 'http://127.0.0.1:8080',
      SCALEGATE_OPERATOR_TOKEN: 'operator-token-that-no-task-may-see',
      AGENT_ONLY_SETTING: 'agent-only',
    };
    // Every base variable present, so each is shown to pass through.
    if (process.env.LANG === undefined) planted.LANG = 'C.UTF-8';
    if (process.env.TZ === undefined) planted.TZ = 'UTC';

    await withAgentEnvironment(planted, async () => {
      const { host, stateDir } = agent();
      const task = serviceStart({ command: [process.execPath, PRINT_ENV], env: { GREETING: 'hello', FEATURE_FLAG: 'on' } });
      await host.ensure(task);
      const env = await waitFor('the task to print its environment', () => {
        const logFile = taskLogPath(stateDir, task.taskId);
        const line = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').find((l) => l.startsWith('print-env: ')) : undefined;
        return line ? (JSON.parse(line.slice('print-env: '.length)) as Record<string, string>) : undefined;
      });
      const status = host.get(task.taskId)!;

      const base = Object.fromEntries(BASE_ENVIRONMENT.map((name) => [name, process.env[name]!]));
      expect(env).toEqual({
        ...base,
        GREETING: 'hello',
        FEATURE_FLAG: 'on',
        PORT: String(status.ports!.public),
        INTERNAL_PORT: String(status.ports!.internal),
        SCALEGATE_TASK_ID: task.taskId,
        SCALEGATE_INCARNATION: status.incarnation,
      });
      // Said once more in the words of DESIGN.md §5: no database URL, no agent setting, no token.
      const leaked = Object.keys(env).filter((name) => name === 'DATABASE_URL' || name === 'AGENT_ONLY_SETTING' || /^SCALEGATE_(?!TASK_ID$|INCARNATION$)/.test(name));
      expect(leaked).toEqual([]);
      await host.drainTask(task.taskId);
    });
  });
});

describe('fenced starts and stops', () => {
  test('a start or stop under an older placement fence is refused with stale-fence, also by a host recreated from the state folder', async () => {
    const first = agent();
    const current = serviceStart(httpServerSpec(), { workload: 'api', index: 0, taskId: 'api-0-g1', placementFence: 5 });
    await first.host.ensure(current);
    await waitForState(first.host, current.taskId, 'ready');

    // Another replica of the workload, decided under an older placement: refused, nothing started.
    const older = serviceStart(httpServerSpec(), { workload: 'api', index: 1, taskId: 'api-1-g1', placementFence: 4 });
    await expect(first.host.ensure(older)).rejects.toMatchObject({ code: 'stale-fence', status: 409 });
    expect(first.host.get(older.taskId)).toBeNull();
    // Fences are per workload: another workload's lower fence is its own business.
    const otherWorkload = serviceStart(httpServerSpec(), { workload: 'other', index: 0, taskId: 'other-0-g1', placementFence: 1 });
    expect(await first.host.ensure(otherWorkload)).toMatchObject({ created: true });
    // An older stop is refused and the task keeps running; the same start retried is fine.
    await expect(first.host.drainTask(current.taskId, { placementFence: 4 })).rejects.toMatchObject({ code: 'stale-fence' });
    expect(first.host.get(current.taskId)?.state).toBe('ready');
    expect(await first.host.ensure(current)).toMatchObject({ created: false });
    // A stop under a newer fence raises the newest fence; the workload has no task left here.
    expect(await first.host.drainTask(current.taskId, { placementFence: 7 })).toMatchObject({ taskId: current.taskId });
    await first.host.close();

    // The restarted agent knows fence 7 from its state folder alone (no api task is recorded).
    const second = agent(first.stateDir, first.range);
    await second.host.restore();
    const restart = { ...current, taskId: 'api-0-g2', generation: 2, placementFence: 6 };
    await expect(second.host.ensure(restart)).rejects.toMatchObject({ code: 'stale-fence' });
    expect(await second.host.ensure({ ...restart, placementFence: 7 })).toMatchObject({ created: true });
    await expect(second.host.drainTask(restart.taskId, { placementFence: 6 })).rejects.toMatchObject({ code: 'stale-fence' });
    // A stop without a fence (a caller from before fencing) still works.
    expect(await second.host.drainTask(restart.taskId)).toMatchObject({ taskId: restart.taskId });
  });

  test('the agent answers a stale start or stop 409 stale-fence over HTTP', async () => {
    const { host } = agent();
    const app = buildAgentServer({ id: 'rt-hardening', credential: () => AGENT_TOKEN, host, fence: () => 1, labels: {} });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const call = async (method: string, pathname: string, body?: unknown) => {
      const response = await fetch(`${base}${pathname}`, {
        method,
        headers: { authorization: `Bearer ${AGENT_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    };
    const start = (index: number, placementFence: number) => ({ workload: 'edge', kind: 'service', index, generation: 1, placementFence, spec: httpServerSpec() });
    try {
      expect(await call('PUT', '/v1/tasks/edge-0-g1', start(0, 3))).toMatchObject({ status: 201 });
      expect(await call('PUT', '/v1/tasks/edge-1-g1', start(1, 2))).toMatchObject({ status: 409, json: { error: 'stale-fence' } });
      expect(await call('DELETE', '/v1/tasks/edge-0-g1?placementFence=2')).toMatchObject({ status: 409, json: { error: 'stale-fence' } });
      expect(await call('DELETE', '/v1/tasks/edge-0-g1?placementFence=3')).toMatchObject({ status: 200, json: { state: 'stopped' } });
    } finally {
      await app.close();
    }
  });
});

describe('a private state folder', () => {
  test('the state folder is 700 and every record the agent writes in it 600', async () => {
    const { host, stateDir } = agent();
    const task = serviceStart(httpServerSpec(), { placementFence: 2 });
    await host.ensure(task);
    await waitForState(host, task.taskId, 'ready');

    expect(modeOf(stateDir)).toBe(0o700);
    for (const name of [TASK_RECORDS_FILE, PORT_RECORDS_FILE, FENCE_RECORDS_FILE]) {
      expect([name, modeOf(path.join(stateDir, name))]).toEqual([name, 0o600]);
    }
    expect(modeOf(taskFolder(stateDir, task.taskId))).toBe(0o700);
    expect(modeOf(taskLogPath(stateDir, task.taskId))).toBe(0o600);
    // No staging file is left behind by the atomic writes.
    expect(fs.readdirSync(stateDir).filter((name) => name.endsWith('.tmp'))).toEqual([]);

    // What an older agent left readable by others is tightened when the agent starts.
    fs.chmodSync(stateDir, 0o755);
    fs.chmodSync(path.join(stateDir, TASK_RECORDS_FILE), 0o644);
    fs.chmodSync(path.join(stateDir, PORT_RECORDS_FILE), 0o644);
    tightenStateDir(stateDir, [TASK_RECORDS_FILE, PORT_RECORDS_FILE, FENCE_RECORDS_FILE]);
    expect(modeOf(stateDir)).toBe(0o700);
    expect(modeOf(path.join(stateDir, TASK_RECORDS_FILE))).toBe(0o600);
    expect(modeOf(path.join(stateDir, PORT_RECORDS_FILE))).toBe(0o600);
  });
});
