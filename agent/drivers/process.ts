// The process driver (DESIGN.md §5): one real OS process per service replica, with its port pair
// in PORT / INTERNAL_PORT, readiness by HTTP or TCP probe, and drain = SIGTERM, grace, SIGKILL.
// Each task runs in its own process group so signals reach every grandchild it spawned.
//
// Its processes outlive the agent (DESIGN.md §3 "Static stability"): an agent that is SIGKILLed
// leaves them running, so the moment a process exists the driver records who it is in the task's
// folder (`tasks/<taskId>/process.json`: pid = process group id, its start time and the boot id,
// incarnation, ports, generation, a fingerprint of the spec). A restarted agent starting the same
// task finds that record and, if that very process still runs (identity checked in /proc, so a
// recycled pid is never taken for it), ADOPTS it: same incarnation, same ports, readiness probed
// again, its end noticed by polling since it is no longer the agent's child. When it cannot be
// adopted (another generation or spec, its port pair no longer the replica's) its whole process
// group is stopped (SIGTERM, grace, SIGKILL) before a fresh one starts. One process per task, never two.
//
// Supervision (DESIGN.md §3): a process that exits or dies without being asked to (not drained,
// stopped or failed by the driver itself) is started again on the same task id and port pair, as a
// new incarnation, after a backoff (domain/supervision.ts: 1 s doubling to 5 min, reset by a healthy
// run; the agent's SCALEGATE_RESTART_* settings). Meanwhile the task is `restarting`; its status
// counts `restarts` and says how it last ended, when it starts again and whether it crash-loops.
// A drain, a stop or the agent's shutdown cancels a pending restart: nothing stopped is restarted.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { assertNever } from '../../domain/assert';
import { AgentServiceSpecSchema, describeIssues, LATENCY_SAMPLES_REPORTED, TaskReportSchema, type PortPair, type ServiceSpec, type TaskReport, type DrainOptions } from '../../protocol';
import type { PortAllocator } from '../ports';
import { urlHost } from '../config';
import { PRIVATE_FILE_MODE, writePrivateFileSync } from '../state-files';
import { doublingDelays } from '../../lib/backoff';
import { DEFAULT_RESTART_POLICY, describeExit, freshSupervision, isCrashLooping, scheduleRestart, type RestartPolicy, type SupervisionRecord } from '../../domain/supervision';
import { ErrorCount } from './error-count';
import { connectTcp } from './tcp-connect';
import { canIdentifyProcesses, CpuSampler, residentBytes, environmentVariable, groupMembers, identify, isSameProcess, processesWithEnvironment, type ProcessIdentity } from './proc';
import { z } from 'zod';
import {
  DriverError,
  serviceHasNoEndpoints,
  type DrainReceipt,
  type DriverContext,
  type TaskDriver,
  type TaskHandle,
  type TaskStart,
  type TaskStatus,
} from './driver';
import { messageOf } from '../../lib/errors';
import { setTimeout as sleep } from 'node:timers/promises';

export type TaskState = TaskReport['state'];

/** Readiness probes start 10 ms after spawn and back off to one per 100 ms: most tasks are ready within a few. */
export const READINESS_POLL_MS = { first: 10, max: 100 } as const;
/** Without a probe, a process that is still alive this long after spawning counts as ready. */
export const NO_PROBE_SETTLE_MS = 200;
const PROBE_TIMEOUT_MS = 1000;
/**
 * A ready service with an HTTP readiness path is probed on, for its latency (what the scale-out
 * compares before and after): every LATENCY_PROBE_MS, the answers of the last LATENCY_WINDOW_MS.
 */
export const LATENCY_PROBE_MS = 1_000;
export const LATENCY_WINDOW_MS = 10_000;
/** After SIGKILL the exit should follow at once; this only bounds a wait that should never be long. */
const KILL_WAIT_MS = 5000;
const LOOPBACK = '127.0.0.1';

/** Where the agent probes its own tasks: the node's bind address (loopback for a wildcard or none). */
export function probeHostOf(ctx: Pick<DriverContext, 'taskBindHost'>): string {
  const host = ctx.taskBindHost;
  if (!host || host === '0.0.0.0') return LOOPBACK;
  return host === '::' ? '::1' : host;
}
/** How often the end of an adopted process (not this agent's child: no exit event) is looked for. */
export const ADOPTED_POLL_MS = 100;
/** The task's process record, in its folder. */
export const PROCESS_RECORD_FILE = 'process.json';

export type ProcessEvent = 'probe-passed' | 'drain-requested' | 'exited' | 'restart-scheduled' | 'relaunched';

/** The task's lifecycle, as a pure function so every (state, event) pair is decided in one place. */
export function nextTaskState(state: TaskState, event: ProcessEvent): TaskState {
  switch (event) {
    case 'probe-passed':
      return state === 'starting' ? 'ready' : state;
    case 'drain-requested':
      // A task waiting for its restart has no process to drain: it is stopped at once.
      if (state === 'restarting') return 'stopped';
      return state === 'starting' || state === 'ready' ? 'draining' : state;
    case 'exited':
      // An exit nobody asked for is a failure; one during a drain is the drain finishing.
      if (state === 'draining') return 'stopped';
      return state === 'starting' || state === 'ready' ? 'failed' : state;
    case 'restart-scheduled':
      // Only a failure is restarted: never a task drained or stopped.
      return state === 'failed' ? 'restarting' : state;
    case 'relaunched':
      return state === 'restarting' ? 'starting' : state;
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

export function processRecordPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), PROCESS_RECORD_FILE);
}

/**
 * Written before a task's process is spawned, removed once its process record is: an agent killed
 * between the two (chaos seed 70) leaves a process no record identifies, and this names the
 * incarnation its environment carries, so the restarted agent finds it and stops it.
 */
export function spawnMarkerPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), 'spawning.json');
}

function readSpawnMarker(stateDir: string, taskId: string): { incarnation: string } | null {
  try {
    const parsed = z.object({ incarnation: z.string().min(1) }).safeParse(JSON.parse(fs.readFileSync(spawnMarkerPath(stateDir, taskId), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * The task's restarts (domain/supervision.ts's record), written at each restart it schedules, so
 * that an agent restarted while the task waits for its restart counts on, and backs off on, from
 * there (no process record is left then: the process ended). Removed when the task is drained.
 */
export const SUPERVISION_RECORD_FILE = 'supervision.json';

const SupervisionRecordSchema = z.object({
  restarts: z.int().min(0),
  consecutive: z.int().min(0),
  recentRestartsAtMs: z.array(z.number()).max(10_000),
  lastExit: TaskReportSchema.shape.lastExit.unwrap().nullable(),
});

export function readSupervisionRecord(stateDir: string, taskId: string): SupervisionRecord | null {
  try {
    const parsed = SupervisionRecordSchema.safeParse(JSON.parse(fs.readFileSync(path.join(taskFolder(stateDir, taskId), SUPERVISION_RECORD_FILE), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Who a task's process is, written the moment it exists, so a restarted agent can find it again. */
export const ProcessRecordSchema = z.object({
  version: z.literal(1),
  taskId: z.string(),
  incarnation: z.string(),
  generation: z.int(),
  /** sha256 of the spec it was started with: a process of another spec is not adopted */
  specHash: z.string(),
  /** the process's pid, which is also its process group id (spawned detached) */
  pid: z.int().min(1),
  pgid: z.int().min(1),
  startTime: z.string(),
  bootId: z.string().nullable(),
  ports: z.object({ public: z.int(), internal: z.int() }),
  spawnedAt: z.string(),
  /** the task's restarts so far, so an agent that adopts the process keeps counting from there */
  restarts: z.int().min(0).optional(),
});
export type ProcessRecord = z.infer<typeof ProcessRecordSchema>;

export function specFingerprint(spec: ServiceSpec): string {
  return createHash('sha256').update(JSON.stringify(spec)).digest('hex');
}

/** The task's process record, if there is a usable one. */
export function readProcessRecord(stateDir: string, taskId: string): ProcessRecord | null {
  let text: string;
  try {
    text = fs.readFileSync(processRecordPath(stateDir, taskId), 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = ProcessRecordSchema.safeParse(JSON.parse(text));
    return parsed.success && parsed.data.taskId === taskId ? parsed.data : null;
  } catch {
    return null;
  }
}

const identityOf = (record: ProcessRecord): ProcessIdentity => ({ pid: record.pid, startTime: record.startTime, bootId: record.bootId });

/** The pair belongs to the replica on this node, not to one task id, so restarts keep it. */
export function portKeyFor(task: Pick<TaskStart, 'workload' | 'index'>): string {
  return `${task.workload}/${task.index}`;
}

/** Task ids become folder names; refuse anything that could escape the tasks folder. */
const SAFE_TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** What a task may see of the agent's environment (DESIGN.md §5): nothing else, no database URL, no token. */
export const BASE_ENVIRONMENT = ['PATH', 'HOME', 'LANG', 'TZ'] as const;

/**
 * A process task's whole environment: the minimal base taken from the agent's; for a service in its
 * own Kafka consumer group, the agent's brokers (the spec's env may name others), its topic and
 * group; then the spec's `env`; then its port pair and its own identity (task id and incarnation,
 * which only the driver knows), which the spec cannot override.
 */
export function taskEnvironment(
  spec: Pick<ServiceSpec, 'env' | 'kafka'>,
  ports: PortPair,
  identity: { taskId: string; incarnation: string },
  options: { agentEnvironment?: NodeJS.ProcessEnv; kafkaBrokers?: string; bindHost?: string } = {},
): Record<string, string> {
  const agentEnvironment = options.agentEnvironment ?? process.env;
  const base: Record<string, string> = {};
  for (const name of BASE_ENVIRONMENT) {
    const value = agentEnvironment[name];
    if (value !== undefined) base[name] = value;
  }
  const kafka: Record<string, string> = spec.kafka
    ? { ...(options.kafkaBrokers ? { SCALEGATE_KAFKA_BROKERS: options.kafkaBrokers } : {}), SCALEGATE_KAFKA_TOPIC: spec.kafka.topic, SCALEGATE_KAFKA_GROUP: spec.kafka.group }
    : {};
  return {
    ...base,
    ...kafka,
    ...spec.env,
    PORT: String(ports.public),
    INTERNAL_PORT: String(ports.internal),
    // the node's address (DESIGN.md §7): a task listens there, not on loopback, to be reached from other hosts
    ...(options.bindHost ? { BIND_HOST: options.bindHost } : {}),
    SCALEGATE_TASK_ID: identity.taskId,
    SCALEGATE_INCARNATION: identity.incarnation,
  };
}

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

export interface ProbeOutcome {
  ready: boolean;
  /** why not, for status().detail while starting */
  detail: string;
  /** the probe itself cannot be made (e.g. a path http refuses): asking again will not help */
  broken?: boolean;
}

export function probeHttp(port: number, pathname: string, host = LOOPBACK): Promise<ProbeOutcome> {
  const target = `GET http://${urlHost(host)}:${port}${pathname}`;
  return new Promise((resolve) => {
    let request: http.ClientRequest;
    try {
      // Throws at once for a path http will not send (e.g. one with a space): that is the task's
      // configuration, not a passing state, so the probe is broken rather than not-yet-ready.
      request = http.get({ host, port, path: pathname, agent: false, timeout: PROBE_TIMEOUT_MS }, (response) => {
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

export async function probeTcp(port: number, host = LOOPBACK): Promise<ProbeOutcome> {
  const target = `TCP ${urlHost(host)}:${port}`;
  const attempt = await connectTcp(host, port, PROBE_TIMEOUT_MS);
  if (attempt.ok) return { ready: true, detail: `readiness ${target} connected` };
  if (attempt.kind === 'invalid') return { ready: false, broken: true, detail: `readiness ${target} cannot be probed: ${attempt.message}` };
  if (attempt.kind === 'timeout') return { ready: false, detail: `readiness ${target}: no connection within ${PROBE_TIMEOUT_MS} ms` };
  return { ready: false, detail: `readiness ${target} failed: ${attempt.message}` };
}

/** a pause that does not keep the process alive */
const delay = (ms: number) => sleep(ms, undefined, { ref: false });

/**
 * Kills, one by one, what is left in the process group of a task process that has ended: only
 * members that started no earlier than it and carry its incarnation in their environment, so that
 * a group id the kernel has handed on never gets another process killed. Returns how many.
 */
function killStragglers(leader: ProcessIdentity, incarnation: string): number {
  let killed = 0;
  for (const member of groupMembers(leader.pid)) {
    if (Number(member.startTime) < Number(leader.startTime)) continue;
    if (environmentVariable(member.pid, 'SCALEGATE_INCARNATION') !== incarnation) continue;
    try {
      process.kill(member.pid, 'SIGKILL');
      killed++;
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

/** Polls until the identified process is gone; false if it still runs after `ms`. */
async function waitGone(identity: ProcessIdentity, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isSameProcess(identity)) {
    if (Date.now() >= deadline) return false;
    await delay(ADOPTED_POLL_MS);
  }
  return true;
}

/**
 * Stops a process an earlier agent left for a task that cannot adopt it: SIGTERM to its group,
 * its grace period, then SIGKILL; and whatever of its group is left. True once it is gone.
 */
async function stopLeftProcess(record: ProcessRecord, graceMs: number): Promise<boolean> {
  const identity = identityOf(record);
  if (isSameProcess(identity)) {
    signalGroup(record.pgid, 'SIGTERM');
    if (!(await waitGone(identity, graceMs)) && isSameProcess(identity)) signalGroup(record.pgid, 'SIGKILL');
  }
  const gone = await waitGone(identity, KILL_WAIT_MS);
  killStragglers(identity, record.incarnation);
  return gone;
}

class ProcessTask implements TaskHandle {
  readonly taskId: string;
  /** changes with every (re)start of its process */
  private currentIncarnation: string;
  private state: TaskState = 'starting';
  private readonly errors: ErrorCount;
  private detail: string | undefined = 'waiting for readiness';
  private child: ChildProcess | undefined;
  /** a process left by an earlier agent and adopted: not our child, so its end is polled for */
  private adopted: ProcessIdentity | undefined;
  private watchTimer: NodeJS.Timeout | undefined;
  /** settles when the current run's process has ended (a new promise per run) */
  private exited: Promise<void>;
  private markExited!: () => void;
  private readonly policy: RestartPolicy;
  private supervision: SupervisionRecord = freshSupervision();
  /** when the current run became ready */
  private readyAtMs: number | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private nextRestartAtMs: number | undefined;
  /** a restart under way (spawning): a drain waits for it, then stops what it started */
  private relaunching: Promise<void> | undefined;
  /** a drain, stop or shutdown was asked for: no restart is scheduled any more */
  private stopRequested = false;
  private alive = false;
  private draining: Promise<DrainReceipt> | undefined;
  /** answers of the readiness path once ready: when, and how long each took */
  private readonly latencies: { at: number; ms: number }[] = [];
  private readonly cpu = new CpuSampler();

  constructor(
    private readonly ctx: DriverContext,
    private readonly allocator: PortAllocator,
    private readonly start: TaskStart,
    private readonly spec: ServiceSpec,
    readonly ports: PortPair,
    incarnation: string = randomUUID(),
  ) {
    this.taskId = start.taskId;
    this.currentIncarnation = incarnation;
    this.errors = new ErrorCount(ctx.errorWindowMs);
    this.policy = ctx.restartPolicy ?? DEFAULT_RESTART_POLICY;
    this.exited = new Promise((resolve) => (this.markExited = resolve));
  }

  get incarnation(): string {
    return this.currentIncarnation;
  }

  get pid(): number | undefined {
    return this.child?.pid ?? this.adopted?.pid;
  }

  get wasAdopted(): boolean {
    return this.adopted !== undefined;
  }

  /**
   * Writes who the process is into the task's folder, so that an agent restarted after a crash
   * finds it instead of starting a second one. A record that cannot be written is logged: the task
   * runs on, but a restarted agent could not adopt it.
   */
  private recordProcess(pid: number): void {
    const identity = identify(pid);
    if (!identity) return; // already gone: nothing to find again
    const record: ProcessRecord = {
      version: 1,
      taskId: this.taskId,
      incarnation: this.incarnation,
      generation: this.start.generation,
      specHash: specFingerprint(this.spec),
      pid,
      pgid: pid,
      startTime: identity.startTime,
      bootId: identity.bootId,
      ports: this.ports,
      spawnedAt: new Date().toISOString(),
      restarts: this.supervision.restarts,
    };
    writePrivateFileSync(processRecordPath(this.ctx.stateDir, this.taskId), JSON.stringify(record));
  }

  /** The record names this incarnation's process, which is gone: forget it (a newer one's stays). */
  /** The process is recorded (or never ran): a marker left behind is only noise, so a failure is logged. */
  private forgetSpawnMarker(): void {
    try {
      fs.rmSync(spawnMarkerPath(this.ctx.stateDir, this.taskId), { force: true });
    } catch (error) {
      this.ctx.log('task-spawn-marker-left', { taskId: this.taskId, incarnation: this.incarnation, error: messageOf(error) });
    }
  }

  private forgetProcessRecord(): void {
    const file = processRecordPath(this.ctx.stateDir, this.taskId);
    if (readProcessRecord(this.ctx.stateDir, this.taskId)?.incarnation !== this.incarnation) return;
    try {
      fs.rmSync(file, { force: true });
    } catch (error) {
      this.ctx.log('task-process-record-failed', { taskId: this.taskId, incarnation: this.incarnation, error: messageOf(error) });
    }
  }

  /**
   * Takes over the process an earlier agent left running for this task (checked by the caller to be
   * that very process): same incarnation and ports; readiness is probed again, and its end is
   * polled for, since it is not this agent's child and no exit event will come.
   */
  adopt(record: ProcessRecord): void {
    this.adopted = identityOf(record);
    this.supervision = readSupervisionRecord(this.ctx.stateDir, this.taskId) ?? freshSupervision(record.restarts ?? 0);
    this.alive = true;
    this.detail = 'adopted after an agent restart; waiting for readiness';
    this.ctx.log('task-adopted', { taskId: this.taskId, workload: this.start.workload, incarnation: this.incarnation, pid: record.pid, ports: this.ports });
    this.watchAdopted();
    this.awaitReadiness().catch((error: unknown) => this.fail(`readiness check failed: ${messageOf(error)}`));
  }

  private watchAdopted(): void {
    const identity = this.adopted;
    if (!identity || !this.alive) return;
    if (isSameProcess(identity)) {
      this.watchTimer = setTimeout(() => this.watchAdopted(), ADOPTED_POLL_MS);
      this.watchTimer.unref();
      return;
    }
    this.watchTimer = undefined;
    this.guarded('adopted exit watcher', () => this.onExit(null, null));
  }

  /** An earlier agent's record of this task's restarts (it waited for a restart when that agent ended). */
  resumeSupervision(record: SupervisionRecord | null): void {
    if (record) this.supervision = record;
  }

  /** Keeps the restarts on disk; a failure is logged (an agent restart would then count from 0). */
  private recordSupervision(): void {
    try {
      writePrivateFileSync(path.join(taskFolder(this.ctx.stateDir, this.taskId), SUPERVISION_RECORD_FILE), JSON.stringify(this.supervision));
    } catch (error) {
      this.ctx.log('task-supervision-record-failed', { taskId: this.taskId, error: messageOf(error) });
    }
  }

  /** Its process runs, or a restart of it is pending or under way: a start retried joins it. */
  get isSupervised(): boolean {
    return this.alive || this.restartTimer !== undefined || this.relaunching !== undefined;
  }

  /** Spawns the command; resolves once the OS process exists, rejects (spawn-failed) if it could not be started. */
  async launch(): Promise<void> {
    const [command, ...args] = this.spec.command as [string, ...string[]];
    const cannotRun = (error: unknown): DriverError => {
      this.state = 'failed';
      this.detail = `cannot run ${JSON.stringify(command)}: ${messageOf(error)}`;
      this.errors.add();
      return new DriverError('spawn-failed', `task ${this.taskId}: ${this.detail}`);
    };
    const folder = taskFolder(this.ctx.stateDir, this.taskId);
    // Refused by the state folder (503 state-unwritable): nothing was spawned.
    writePrivateFileSync(spawnMarkerPath(this.ctx.stateDir, this.taskId), JSON.stringify({ incarnation: this.incarnation }));
    let child: ChildProcess;
    try {
      const logFd = fs.openSync(taskLogPath(this.ctx.stateDir, this.taskId), 'a', PRIVATE_FILE_MODE);
      try {
        fs.writeSync(logFd, `--- ${new Date().toISOString()} incarnation ${this.incarnation}: ${JSON.stringify(this.spec.command)}\n`);
        // spawn throws at once for arguments it refuses (e.g. a NUL byte); that is a failed start too.
        child = spawn(command, args, {
          cwd: folder,
          env: taskEnvironment(this.spec, this.ports, { taskId: this.taskId, incarnation: this.incarnation }, { kafkaBrokers: this.ctx.kafkaBrokers, bindHost: this.ctx.taskBindHost }),
          stdio: ['ignore', logFd, logFd],
          // Its own process group, so drain and close can signal every descendant at once.
          detached: true,
        });
      } finally {
        // The child holds its own copy of the descriptor.
        fs.closeSync(logFd);
      }
    } catch (error) {
      this.forgetSpawnMarker();
      throw cannotRun(error);
    }
    this.child = child;

    await new Promise<void>((resolve, reject) => {
      child.once('spawn', () => {
        this.alive = true;
        try {
          if (child.pid !== undefined) this.recordProcess(child.pid);
          this.forgetSpawnMarker();
        } catch (error) {
          // Unrecorded, a process would outlive an agent restart unseen (neither adopted nor
          // stopped: chaos seed 80, a state folder made immutable), so it does not run at all.
          this.ctx.log('task-process-record-failed', { taskId: this.taskId, incarnation: this.incarnation, error: messageOf(error) });
          signalGroup(child.pid!, 'SIGKILL');
          reject(error);
          return;
        }
        // Listen only once spawned: a command that cannot start reports 'error', not an exit.
        child.on('exit', (code, signal) => this.guarded('exit handler', () => this.onExit(code, signal)));
        resolve();
      });
      child.on('error', (error) => {
        // Errors after spawn (e.g. a failed kill) are not start failures; they must not go unheard.
        if (this.alive) this.ctx.log('task-process-error', { taskId: this.taskId, incarnation: this.incarnation, error: error.message });
        else {
          this.forgetSpawnMarker();
          reject(cannotRun(error));
        }
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
   * After an exit nobody asked for (the task is `failed`): the task becomes `restarting` and its
   * process is started again after the backoff, unless a stop was asked for meanwhile.
   */
  private restartLater(exit: { code: number | null; signal: string | null; at: string }): void {
    if (this.stopRequested) return;
    const nowMs = Date.now();
    const readyForMs = this.readyAtMs === undefined ? null : nowMs - this.readyAtMs;
    const next = scheduleRestart(this.supervision, this.policy, exit, readyForMs, nowMs);
    this.supervision = next.record;
    this.recordSupervision();
    this.state = nextTaskState(this.state, 'restart-scheduled');
    this.nextRestartAtMs = next.restartAtMs;
    this.detail = `${this.detail ?? `exited with ${describeExit(exit)}`}; restart ${next.record.restarts} in ${next.delayMs} ms`;
    this.ctx.log('task-restart-scheduled', {
      taskId: this.taskId, workload: this.start.workload, incarnation: this.incarnation, exit: describeExit(exit),
      restarts: next.record.restarts, delayMs: next.delayMs,
    });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      const relaunch = this.relaunch().finally(() => {
        if (this.relaunching === relaunch) this.relaunching = undefined;
      });
      this.relaunching = relaunch;
    }, next.delayMs);
    // A pending restart keeps no process alive: the agent's server does.
    this.restartTimer.unref();
  }

  /** The restart itself: a new incarnation of the task on the same task id and port pair. */
  private async relaunch(): Promise<void> {
    if (this.state !== 'restarting' || this.stopRequested) return;
    this.state = nextTaskState(this.state, 'relaunched');
    this.currentIncarnation = randomUUID();
    this.child = undefined;
    this.adopted = undefined;
    this.readyAtMs = undefined;
    this.nextRestartAtMs = undefined;
    this.latencies.length = 0;
    this.exited = new Promise((resolve) => (this.markExited = resolve));
    this.detail = `restart ${this.supervision.restarts}: waiting for readiness`;
    try {
      await this.launch();
    } catch (error) {
      // Could not even be spawned this time (or not recorded, and so killed): counted like an exit.
      this.alive = false;
      this.markExited();
      this.state = 'failed';
      this.detail = `restart ${this.supervision.restarts} failed: ${messageOf(error)}`;
      this.restartLater({ code: null, signal: null, at: new Date().toISOString() });
    }
  }

  /**
   * A drain, stop or shutdown: no restart from now on, at once. Answers the restart under way, if
   * any, for the caller to wait for (and then stop what it started).
   */
  private stopSupervising(): Promise<void> | undefined {
    this.stopRequested = true;
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
      this.restartTimer = undefined;
    }
    this.nextRestartAtMs = undefined;
    return this.relaunching;
  }

  /**
   * The task cannot work as configured: it is failed with the reason and its processes are stopped
   * (SIGTERM, then SIGKILL after its grace period), so a failed task never keeps running unseen.
   */
  private fail(reason: string): void {
    if (this.state === 'failed' || this.state === 'stopped') return;
    this.state = 'failed';
    this.errors.add();
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
    if (!this.alive) return;
    this.alive = false;
    if (this.watchTimer) clearTimeout(this.watchTimer);
    const how =
      code !== null ? `exited with code ${code}`
        : signal !== null ? `killed by signal ${signal}`
          : 'ended (adopted after an agent restart, so its exit status is not known)';
    const before = this.state;
    this.state = nextTaskState(before, 'exited');
    if (before === 'failed') {
      // Already failed (and stopped for it): keep the reason, say how it ended.
      this.detail = `${this.detail ?? 'failed'}; process ${how}`;
    } else if (this.state === 'failed') {
      this.errors.add();
      this.detail = `process ${how} while ${before}`;
      this.restartLater({ code, signal, at: new Date().toISOString() });
    } else {
      this.detail = `process ${how}`;
    }
    // Anything the task left behind in its group goes with it. Our own child was reaped just now,
    // so its group id is still ours; an adopted leader ended unseen, so only members that prove to
    // be this incarnation's (its environment says so) are killed, one by one.
    let refused: string | undefined;
    if (this.child?.pid !== undefined) refused = signalGroup(this.child.pid, 'SIGKILL');
    else if (this.adopted) killStragglers(this.adopted, this.incarnation);
    this.ctx.log('task-exited', { taskId: this.taskId, incarnation: this.incarnation, code, signal, state: this.state, ...(refused ? { error: refused } : {}) });
    this.forgetProcessRecord();
    this.markExited();
  }

  private async awaitReadiness(): Promise<void> {
    const spawnedAt = Date.now();
    const readiness = this.spec.readiness;
    const nextDelay = doublingDelays(READINESS_POLL_MS.first, READINESS_POLL_MS.max);
    while (this.state === 'starting') {
      let outcome: ProbeOutcome;
      if (readiness === undefined) {
        const ready = Date.now() - spawnedAt >= NO_PROBE_SETTLE_MS;
        outcome = { ready, detail: `no readiness probe: ready once alive for ${NO_PROBE_SETTLE_MS} ms` };
      } else if ('http' in readiness) outcome = await probeHttp(this.ports.public, readiness.http, probeHostOf(this.ctx));
      else outcome = await probeTcp(this.ports.public, probeHostOf(this.ctx));
      // Re-check: the process may have exited or a drain begun while the probe was in flight.
      if (this.state !== 'starting' || !this.alive) return;
      if (outcome.broken) {
        this.fail(outcome.detail);
        return;
      }
      if (outcome.ready) {
        this.state = nextTaskState(this.state, 'probe-passed');
        this.readyAtMs = Date.now();
        this.detail = undefined;
        this.ctx.log('task-ready', { taskId: this.taskId, incarnation: this.incarnation });
        if (readiness !== undefined && 'http' in readiness) void this.watchLatency(readiness.http);
        return;
      }
      this.detail = outcome.detail;
      await delay(nextDelay());
    }
  }

  /** While ready, times the readiness path's answers; a failed or non-2xx answer is no sample. */
  private async watchLatency(pathname: string): Promise<void> {
    while (this.state === 'ready' && this.alive) {
      await delay(LATENCY_PROBE_MS);
      if (this.state !== 'ready' || !this.alive) return;
      const began = performance.now();
      const outcome = await probeHttp(this.ports.public, pathname, probeHostOf(this.ctx));
      if (!outcome.ready) continue;
      const now = Date.now();
      this.latencies.push({ at: now, ms: Math.round((performance.now() - began) * 10) / 10 });
      while (this.latencies.length && (this.latencies[0].at < now - LATENCY_WINDOW_MS || this.latencies.length > 200)) this.latencies.shift();
    }
  }

  /** p50 and p95 of the readiness path's answers within the window (none: not measured). */
  private latency(): { p50: number; p95: number } | undefined {
    const since = Date.now() - LATENCY_WINDOW_MS;
    const sorted = this.latencies.filter((sample) => sample.at >= since).map((sample) => sample.ms).sort((a, b) => a - b);
    if (sorted.length === 0) return undefined;
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    return { p50: at(0.5), p95: at(0.95) };
  }

  /** The readiness path's answers within the window, newest last, each [age in ms, latency in ms]: the samples p50 and p95 are taken from. */
  private latencySamples(): [number, number][] {
    const now = Date.now();
    return this.latencies.filter((sample) => sample.at >= now - LATENCY_WINDOW_MS).slice(-LATENCY_SAMPLES_REPORTED).map((sample) => [now - sample.at, sample.ms]);
  }

  status(): TaskStatus {
    const latencyMs = this.latency();
    const counts: Record<string, number> = { restarts: this.supervision.restarts };
    if (this.pid !== undefined) {
      counts.pid = this.pid;
      // The task's resources as its process uses them (the evidence before and after a change).
      const cpuPercent = this.cpu.sample(this.pid);
      const rssBytes = residentBytes(this.pid);
      if (cpuPercent !== null) counts.cpuPercent = cpuPercent;
      if (rssBytes !== null) counts.rssBytes = rssBytes;
    }
    if (this.adopted) counts.adopted = 1;
    const nowMs = Date.now();
    const readyForMs = this.state === 'ready' && this.readyAtMs !== undefined ? nowMs - this.readyAtMs : null;
    const supervision = {
      ...(isCrashLooping(this.supervision, this.policy, nowMs, readyForMs) ? { crashLooping: true } : {}),
      ...(this.supervision.lastExit ? { lastExit: this.supervision.lastExit } : {}),
      ...(this.nextRestartAtMs !== undefined ? { nextRestartAt: new Date(this.nextRestartAtMs).toISOString() } : {}),
    };
    return {
      taskId: this.taskId,
      workload: this.start.workload,
      incarnation: this.incarnation,
      state: this.state,
      counts,
      errors: this.errors.total,
      recentErrors: this.errors.recent(),
      ports: this.ports,
      generation: this.start.generation,
      ...(latencyMs ? { latencyMs, latencySamples: this.latencySamples() } : {}),
      ...(this.detail !== undefined ? { detail: this.detail } : {}),
      ...supervision,
    };
  }

  drain(options: DrainOptions): Promise<DrainReceipt> {
    // A repeated drain joins the first rather than signalling again.
    this.draining ??= this.runDrain(options);
    return this.draining;
  }

  private async runDrain(options: DrainOptions): Promise<DrainReceipt> {
    const startedAt = Date.now();
    // The task's own grace period is honoured: a drain deadline bounds how long the control plane
    // waits, never how soon a process that asked for more time is killed (a kill is `forced`).
    const graceMs = options.graceMs ?? this.spec.graceMs;
    let forced = false;
    const relaunching = this.stopSupervising();
    if (relaunching) await relaunching;
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
    // Drained, the task is over: its restarts are not carried to anything later.
    try {
      fs.rmSync(path.join(taskFolder(this.ctx.stateDir, this.taskId), SUPERVISION_RECORD_FILE), { force: true });
    } catch (error) {
      this.ctx.log('task-supervision-record-failed', { taskId: this.taskId, error: messageOf(error) });
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
    const relaunching = this.stopSupervising();
    if (relaunching) await relaunching;
    this.state = nextTaskState(this.state, 'drain-requested');
    if (!this.alive || this.pid === undefined) return;
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
    const parsed = AgentServiceSpecSchema.safeParse(task.spec);
    if (!parsed.success) throw new DriverError('invalid-spec', `service spec for ${task.workload}: ${describeIssues(parsed.error)}`);

    const running = tasks.get(task.taskId);
    if (running?.isSupervised) return running; // the same start retried: it is already running (or restarting)

    const adopted = await takeOverLeftProcess(task, parsed.data);
    if (adopted) {
      tasks.set(task.taskId, adopted);
      return adopted;
    }

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
    handle.resumeSupervision(readSupervisionRecord(ctx.stateDir, task.taskId));
    // If the command cannot be run the pair stays recorded: the replica still belongs here.
    await handle.launch();
    tasks.set(task.taskId, handle);
    return handle;
  };

  /**
   * An earlier agent killed after spawning a process for this task but before recording it: no
   * record can identify that process for adoption, so every process carrying its incarnation is
   * killed (it never reported ready) and the start that follows is the only one.
   */
  function stopUnrecordedSpawn(taskId: string): void {
    const marker = readSpawnMarker(ctx.stateDir, taskId);
    if (!marker) return;
    if (readProcessRecord(ctx.stateDir, taskId)?.incarnation !== marker.incarnation) {
      const left = processesWithEnvironment('SCALEGATE_INCARNATION', marker.incarnation);
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      ctx.log('task-left-process-unrecorded', { taskId, incarnation: marker.incarnation, killed: left });
    }
    try {
      fs.rmSync(spawnMarkerPath(ctx.stateDir, taskId), { force: true });
    } catch (error) {
      // left, it finds nothing of that incarnation next time
      ctx.log('task-spawn-marker-left', { taskId, incarnation: marker.incarnation, error: messageOf(error) });
    }
  }

  /**
   * The process an earlier agent left running for this task, if any: adopted when it is that very
   * process, of this generation and spec, on the replica's recorded pair; otherwise stopped (its
   * whole group) so that the fresh start that follows is the only one. Never touches a process the
   * record does not identify (a recycled pid is somebody else's).
   */
  async function takeOverLeftProcess(task: TaskStart, spec: ServiceSpec): Promise<ProcessTask | null> {
    stopUnrecordedSpawn(task.taskId);
    const record = readProcessRecord(ctx.stateDir, task.taskId);
    if (!record) return null;
    const forget = () => {
      try {
        fs.rmSync(processRecordPath(ctx.stateDir, task.taskId), { force: true });
      } catch (error) {
        ctx.log('task-process-record-failed', { taskId: task.taskId, error: messageOf(error) });
      }
    };
    if (!canIdentifyProcesses()) {
      ctx.log('task-left-process-unverifiable', { taskId: task.taskId, pid: record.pid, reason: 'no /proc to tell that process from another with its pid' });
      return null;
    }
    const identity = identityOf(record);
    if (!isSameProcess(identity)) {
      // Gone, or its pid now belongs to another process: that one is left alone.
      const stragglers = killStragglers(identity, record.incarnation);
      ctx.log('task-left-process-gone', { taskId: task.taskId, pid: record.pid, incarnation: record.incarnation, ...(stragglers ? { stragglersKilled: stragglers } : {}) });
      forget();
      return null;
    }
    let refusal: string | undefined;
    if (record.generation !== task.generation) refusal = `it runs generation ${record.generation}, the start is ${task.generation}`;
    else if (record.specHash !== specFingerprint(spec)) refusal = 'it runs another spec';
    else {
      const claimed = await ports.claim(portKeyFor(task), record.ports).catch(async (error: unknown) => {
        // Neither adopted nor stopped, the left process would run on unseen: it is stopped.
        await stopLeftProcess(record, spec.graceMs);
        throw error;
      });
      if (!claimed) refusal = `its ports ${record.ports.public}/${record.ports.internal} are no longer this replica's pair`;
    }
    if (refusal === undefined) {
      const handle = new ProcessTask(ctx, ports, task, spec, record.ports, record.incarnation);
      handle.adopt(record);
      return handle;
    }
    ctx.log('task-left-process-replaced', { taskId: task.taskId, pid: record.pid, incarnation: record.incarnation, reason: refusal });
    if (!(await stopLeftProcess(record, spec.graceMs))) {
      throw new DriverError('task-draining', `task ${task.taskId}: the process ${record.pid} an earlier agent left could not be stopped yet; retry`);
    }
    forget();
    return null;
  }

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
