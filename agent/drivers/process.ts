// The process driver (DESIGN.md §5): one real OS process per service replica, with its port pair
// in PORT / INTERNAL_PORT, readiness by HTTP or TCP probe, and drain = SIGTERM, grace, SIGKILL.
// Each task runs in its own process group so signals reach every grandchild it spawned.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { assertNever } from '../../domain/assert';
import { describeIssues, ServiceSpecSchema, type PortPair, type ServiceSpec, type TaskReport, type DrainOptions, type ProbeAnswer } from '../../protocol';
import type { PortAllocator } from '../ports';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../state-files';
import {
  DriverError,
  type DrainReceipt,
  type DriverContext,
  type TaskDriver,
  type TaskHandle,
  type TaskStart,
  type TaskStatus,
} from './driver';

export type TaskState = TaskReport['state'];

export const READINESS_POLL_MS = 100;
/** Without a probe, a process that is still alive this long after spawning counts as ready. */
export const NO_PROBE_SETTLE_MS = 200;
const PROBE_TIMEOUT_MS = 1000;
/** After SIGKILL the exit should follow at once; this only bounds a wait that should never be long. */
const KILL_WAIT_MS = 5000;
const LOOPBACK = '127.0.0.1';

export type ProcessEvent = 'probe-passed' | 'drain-requested' | 'exited';

/** The task's lifecycle, as a pure function so every (state, event) pair is decided in one place. */
export function nextTaskState(state: TaskState, event: ProcessEvent): TaskState {
  switch (event) {
    case 'probe-passed':
      return state === 'starting' ? 'ready' : state;
    case 'drain-requested':
      return state === 'starting' || state === 'ready' ? 'draining' : state;
    case 'exited':
      // An exit nobody asked for is a failure; one during a drain is the drain finishing.
      if (state === 'draining') return 'stopped';
      return state === 'starting' || state === 'ready' ? 'failed' : state;
    default:
      return assertNever(event, 'process event');
  }
}

/** The per-task folder: working directory of the process and home of its log. */
export function taskFolder(stateDir: string, taskId: string): string {
  return path.join(stateDir, 'tasks', taskId);
}

export function taskLogPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), 'output.log');
}

/** The pair belongs to the replica on this node, not to one task id, so restarts keep it. */
export function portKeyFor(task: Pick<TaskStart, 'workload' | 'index'>): string {
  return `${task.workload}/${task.index}`;
}

/** Task ids become folder names; refuse anything that could escape the tasks folder. */
const SAFE_TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** What a task may see of the agent's environment (DESIGN.md §5): nothing else, no database URL, no token. */
export const BASE_ENVIRONMENT = ['PATH', 'HOME', 'LANG', 'TZ'] as const;

/**
 * A process task's whole environment: the minimal base taken from the agent's, then the spec's
 * `env`, then its port pair and its own identity (task id and incarnation, which only the driver
 * knows), which the spec cannot override.
 */
export function taskEnvironment(
  spec: Pick<ServiceSpec, 'env'>,
  ports: PortPair,
  identity: { taskId: string; incarnation: string },
  agentEnvironment: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const base: Record<string, string> = {};
  for (const name of BASE_ENVIRONMENT) {
    const value = agentEnvironment[name];
    if (value !== undefined) base[name] = value;
  }
  return {
    ...base,
    ...spec.env,
    PORT: String(ports.public),
    INTERNAL_PORT: String(ports.internal),
    SCALEGATE_TASK_ID: identity.taskId,
    SCALEGATE_INCARNATION: identity.incarnation,
  };
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Signals the whole process group the task leads (spawned detached). Never throws: called from
 * exit handlers and timers, where a throw would take the agent down. Returns why it failed, if it
 * did; a group already gone (ESRCH) is what we wanted and no failure.
 */
function signalGroup(pid: number, signal: NodeJS.Signals): string | undefined {
  try {
    process.kill(-pid, signal);
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    return `${signal} to process group ${pid} failed: ${messageOf(error)}`;
  }
}

interface ProbeOutcome {
  ready: boolean;
  /** why not, for status().detail while starting */
  detail: string;
  /** the probe itself cannot be made (e.g. a path http refuses): asking again will not help */
  broken?: boolean;
}

function probeHttp(port: number, pathname: string): Promise<ProbeOutcome> {
  const target = `GET http://${LOOPBACK}:${port}${pathname}`;
  return new Promise((resolve) => {
    let request: http.ClientRequest;
    try {
      // Throws at once for a path http will not send (e.g. one with a space): that is the task's
      // configuration, not a passing state, so the probe is broken rather than not-yet-ready.
      request = http.get({ host: LOOPBACK, port, path: pathname, agent: false, timeout: PROBE_TIMEOUT_MS }, (response) => {
        response.on('error', () => {}); // a reset mid-body changes nothing: the status is what counts
        response.resume();
        const status = response.statusCode ?? 0;
        resolve({ ready: status >= 200 && status < 300, detail: `readiness ${target} answered ${status}` });
      });
    } catch (error) {
      resolve({ ready: false, broken: true, detail: `readiness ${JSON.stringify(pathname)} cannot be probed: ${messageOf(error)}` });
      return;
    }
    request.on('timeout', () => request.destroy(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)));
    request.on('error', (error) => resolve({ ready: false, detail: `readiness ${target} failed: ${error.message}` }));
  });
}

function probeTcp(port: number): Promise<ProbeOutcome> {
  const target = `TCP ${LOOPBACK}:${port}`;
  return new Promise((resolve) => {
    let socket: net.Socket;
    try {
      socket = net.connect({ host: LOOPBACK, port, timeout: PROBE_TIMEOUT_MS });
    } catch (error) {
      resolve({ ready: false, broken: true, detail: `readiness ${target} cannot be probed: ${messageOf(error)}` });
      return;
    }
    socket.once('connect', () => {
      socket.destroy();
      resolve({ ready: true, detail: `readiness ${target} connected` });
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve({ ready: false, detail: `readiness ${target}: no connection within ${PROBE_TIMEOUT_MS} ms` });
    });
    socket.once('error', (error) => resolve({ ready: false, detail: `readiness ${target} failed: ${error.message}` }));
  });
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

class ProcessTask implements TaskHandle {
  readonly taskId: string;
  readonly incarnation = randomUUID();
  private state: TaskState = 'starting';
  private errors = 0;
  private detail: string | undefined = 'waiting for readiness';
  private child: ChildProcess | undefined;
  private readonly exited: Promise<void>;
  private markExited!: () => void;
  private alive = false;
  private draining: Promise<DrainReceipt> | undefined;

  constructor(
    private readonly ctx: DriverContext,
    private readonly allocator: PortAllocator,
    private readonly start: TaskStart,
    private readonly spec: ServiceSpec,
    readonly ports: PortPair,
  ) {
    this.taskId = start.taskId;
    this.exited = new Promise((resolve) => (this.markExited = resolve));
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get isAlive(): boolean {
    return this.alive;
  }

  /** Spawns the command; resolves once the OS process exists, rejects (spawn-failed) if it could not be started. */
  async launch(): Promise<void> {
    const [command, ...args] = this.spec.command as [string, ...string[]];
    const cannotRun = (error: unknown): DriverError => {
      this.state = 'failed';
      this.detail = `cannot run ${JSON.stringify(command)}: ${messageOf(error)}`;
      this.errors++;
      return new DriverError('spawn-failed', `task ${this.taskId}: ${this.detail}`);
    };
    let child: ChildProcess;
    try {
      const folder = taskFolder(this.ctx.stateDir, this.taskId);
      fs.mkdirSync(folder, { recursive: true, mode: PRIVATE_DIR_MODE });
      const logFd = fs.openSync(taskLogPath(this.ctx.stateDir, this.taskId), 'a', PRIVATE_FILE_MODE);
      try {
        fs.writeSync(logFd, `--- ${new Date().toISOString()} incarnation ${this.incarnation}: ${JSON.stringify(this.spec.command)}\n`);
        // spawn throws at once for arguments it refuses (e.g. a NUL byte); that is a failed start too.
        child = spawn(command, args, {
          cwd: folder,
          env: taskEnvironment(this.spec, this.ports, { taskId: this.taskId, incarnation: this.incarnation }),
          stdio: ['ignore', logFd, logFd],
          // Its own process group, so drain and close can signal every descendant at once.
          detached: true,
        });
      } finally {
        // The child holds its own copy of the descriptor.
        fs.closeSync(logFd);
      }
    } catch (error) {
      throw cannotRun(error);
    }
    this.child = child;

    await new Promise<void>((resolve, reject) => {
      child.once('spawn', () => {
        this.alive = true;
        // Listen only once spawned: a command that cannot start reports 'error', not an exit.
        child.on('exit', (code, signal) => this.guarded('exit handler', () => this.onExit(code, signal)));
        resolve();
      });
      child.on('error', (error) => {
        // Errors after spawn (e.g. a failed kill) are not start failures; they must not go unheard.
        if (this.alive) this.ctx.log('task-process-error', { taskId: this.taskId, incarnation: this.incarnation, error: error.message });
        else reject(cannotRun(error));
      });
    });
    this.ctx.log('task-started', { taskId: this.taskId, workload: this.start.workload, incarnation: this.incarnation, pid: child.pid, ports: this.ports });
    this.awaitReadiness().catch((error: unknown) => this.fail(`readiness check failed: ${messageOf(error)}`));
  }

  /** Runs an event handler's work so that nothing it throws can escape into the agent's event loop. */
  private guarded(what: string, work: () => void): void {
    try {
      work();
    } catch (error) {
      this.ctx.log('task-handler-failed', { taskId: this.taskId, incarnation: this.incarnation, handler: what, error: messageOf(error) });
      this.markExited();
    }
  }

  /**
   * The task cannot work as configured: it is failed with the reason and its processes are stopped
   * (SIGTERM, then SIGKILL after its grace period), so a failed task never keeps running unseen.
   */
  private fail(reason: string): void {
    if (this.state === 'failed' || this.state === 'stopped') return;
    this.state = 'failed';
    this.errors++;
    this.detail = reason;
    this.ctx.log('task-failed', { taskId: this.taskId, incarnation: this.incarnation, reason });
    this.stopFailed().catch((error: unknown) =>
      this.ctx.log('task-stop-failed', { taskId: this.taskId, incarnation: this.incarnation, error: messageOf(error) }),
    );
  }

  private async stopFailed(): Promise<void> {
    if (!this.alive || this.pid === undefined) return;
    const refused = signalGroup(this.pid, 'SIGTERM');
    if (refused) this.ctx.log('task-signal-failed', { taskId: this.taskId, incarnation: this.incarnation, error: refused });
    const exitedInTime = await Promise.race([this.exited.then(() => true), delay(this.spec.graceMs).then(() => false)]);
    if (!exitedInTime) await this.kill();
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.alive = false;
    const how = code !== null ? `exited with code ${code}` : `killed by signal ${signal}`;
    const before = this.state;
    this.state = nextTaskState(before, 'exited');
    if (before === 'failed') {
      // Already failed (and stopped for it): keep the reason, say how it ended.
      this.detail = `${this.detail ?? 'failed'}; process ${how}`;
    } else if (this.state === 'failed') {
      this.errors++;
      this.detail = `process ${how} while ${before}`;
    } else {
      this.detail = `process ${how}`;
    }
    // Anything the task left behind in its group goes with it.
    const refused = this.child?.pid !== undefined ? signalGroup(this.child.pid, 'SIGKILL') : undefined;
    this.ctx.log('task-exited', { taskId: this.taskId, incarnation: this.incarnation, code, signal, state: this.state, ...(refused ? { error: refused } : {}) });
    this.markExited();
  }

  private async awaitReadiness(): Promise<void> {
    const spawnedAt = Date.now();
    const readiness = this.spec.readiness;
    while (this.state === 'starting') {
      let outcome: ProbeOutcome;
      if (readiness === undefined) {
        const ready = Date.now() - spawnedAt >= NO_PROBE_SETTLE_MS;
        outcome = { ready, detail: `no readiness probe: ready once alive for ${NO_PROBE_SETTLE_MS} ms` };
      } else if ('http' in readiness) outcome = await probeHttp(this.ports.public, readiness.http);
      else outcome = await probeTcp(this.ports.public);
      // Re-check: the process may have exited or a drain begun while the probe was in flight.
      if (this.state !== 'starting' || !this.alive) return;
      if (outcome.broken) {
        this.fail(outcome.detail);
        return;
      }
      if (outcome.ready) {
        this.state = nextTaskState(this.state, 'probe-passed');
        this.detail = undefined;
        this.ctx.log('task-ready', { taskId: this.taskId, incarnation: this.incarnation });
        return;
      }
      this.detail = outcome.detail;
      await delay(READINESS_POLL_MS);
    }
  }

  status(): TaskStatus {
    const counts: Record<string, number> = { restarts: 0 };
    if (this.pid !== undefined) counts.pid = this.pid;
    return {
      taskId: this.taskId,
      workload: this.start.workload,
      incarnation: this.incarnation,
      state: this.state,
      counts,
      errors: this.errors,
      ports: this.ports,
      generation: this.start.generation,
      ...(this.detail !== undefined ? { detail: this.detail } : {}),
    };
  }

  drain(options: DrainOptions): Promise<DrainReceipt> {
    // A repeated drain joins the first rather than signalling again.
    this.draining ??= this.runDrain(options);
    return this.draining;
  }

  private async runDrain(options: DrainOptions): Promise<DrainReceipt> {
    const startedAt = Date.now();
    const graceMs = Math.min(options.graceMs ?? this.spec.graceMs, options.drainTimeoutMs ?? Number.POSITIVE_INFINITY);
    let forced = false;
    this.state = nextTaskState(this.state, 'drain-requested');
    if (this.alive && this.pid !== undefined) {
      if (this.state === 'draining') this.detail = 'draining: SIGTERM sent';
      const refused = signalGroup(this.pid, 'SIGTERM');
      if (refused) this.ctx.log('task-signal-failed', { taskId: this.taskId, incarnation: this.incarnation, error: refused });
      const exitedInTime = await Promise.race([this.exited.then(() => true), delay(graceMs).then(() => false)]);
      if (!exitedInTime) {
        forced = true;
        this.ctx.log('task-drain-forced', { taskId: this.taskId, incarnation: this.incarnation, graceMs });
        await this.kill();
      }
    }
    // The replica is gone from this node: its pair goes to quarantine, not straight to another task.
    // Only if the record is still ours: a newer task of the same replica may have moved to a new pair.
    // The process is gone either way: a record that cannot be written is logged, not a failed drain.
    await this.allocator.release(portKeyFor(this.start), this.ports).catch((error: unknown) =>
      this.ctx.log('port-release-failed', { taskId: this.taskId, ports: this.ports, error: messageOf(error) }),
    );
    const receipt: DrainReceipt = { taskId: this.taskId, incarnation: this.incarnation, inFlight: 0, forced, durationMs: Date.now() - startedAt };
    this.ctx.log('task-drained', { ...receipt });
    return receipt;
  }

  /** SIGKILL the whole group and wait for the exit (agent shutdown, or a drain out of grace). */
  async kill(): Promise<void> {
    if (!this.alive || this.pid === undefined) return;
    this.state = nextTaskState(this.state, 'drain-requested');
    const refused = signalGroup(this.pid, 'SIGKILL');
    if (refused) this.ctx.log('task-signal-failed', { taskId: this.taskId, incarnation: this.incarnation, error: refused });
    const exited = await Promise.race([this.exited.then(() => true), delay(KILL_WAIT_MS).then(() => false)]);
    if (!exited) this.ctx.log('task-kill-unconfirmed', { taskId: this.taskId, pid: this.pid });
  }
}

export function createProcessDriver(ctx: DriverContext, ports: PortAllocator): TaskDriver {
  const tasks = new Map<string, ProcessTask>();

  const start = async (task: TaskStart): Promise<TaskHandle> => {
    if (task.kind !== 'service') throw new DriverError('invalid-spec', `the process driver runs service tasks, not ${task.kind}`);
    if (!SAFE_TASK_ID.test(task.taskId)) throw new DriverError('invalid-spec', `task id ${JSON.stringify(task.taskId)} is not a safe folder name`);
    const parsed = ServiceSpecSchema.safeParse(task.spec);
    if (!parsed.success) throw new DriverError('invalid-spec', `service spec for ${task.workload}: ${describeIssues(parsed.error)}`);

    const running = tasks.get(task.taskId);
    if (running?.isAlive) return running; // the same start retried: it is already running

    const key = portKeyFor(task);
    const acquisition = await ports.acquire(key).catch((error: unknown) => {
      if (error instanceof DriverError) throw error;
      // e.g. port records edited by hand: the control plane should see why, not a bare 500.
      throw new DriverError('placement-unavailable', `no port pair for ${key}: ${messageOf(error)}`);
    });
    if (acquisition.moved) {
      ctx.log('port-pair-moved', { workload: task.workload, index: task.index, taskId: task.taskId, from: acquisition.moved.from, to: acquisition.moved.to });
    }
    const handle = new ProcessTask(ctx, ports, task, parsed.data, acquisition.ports);
    // If the command cannot be run the pair stays recorded: the replica still belongs here.
    await handle.launch();
    tasks.set(task.taskId, handle);
    return handle;
  };

  const serviceHasNoEndpoints = (): ProbeAnswer => ({
    source: { ok: true, detail: 'a service declares no source to reach' },
    destination: { ok: true, detail: 'a service declares no destination to reach' },
  });

  return {
    kind: 'service',
    start,
    probe: async () => serviceHasNoEndpoints(),
    // Kill what still runs but keep the port records, so a restarted agent gives each replica its pair back.
    close: async () => {
      await Promise.all([...tasks.values()].map((task) => task.kill()));
      tasks.clear();
    },
  };
}
