// A process task's lifecycle (DESIGN.md §5): the state machine every (state, event) pair is decided
// in, and one run of its process: spawned (and recorded) or adopted from an earlier agent, probed
// until ready, timed while ready, failed and stopped when it cannot work, its end noticed. What
// follows an end (a restart), status, drain and kill are the task's own (process-task.ts).
import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { assertNever } from '../../domain/assert';
import { freshSupervision, type SupervisionRecord } from '../../domain/supervision';
import { doublingDelays } from '../../lib/backoff';
import { messageOf } from '../../lib/errors';
import type { PortPair, ServiceSpec, TaskReport } from '../../protocol';
import { DriverError, type DriverContext, type TaskStart } from './driver';
import { ErrorCount } from './error-count';
import { isSameProcess, type ProcessIdentity } from './proc';
import { ADOPTED_POLL_MS, delay, killStragglers, signalGroup } from './process-group';
import { LATENCY_PROBE_MS, LatencyWindow, NO_PROBE_SETTLE_MS, probeHostOf, probeHttp, probeTcp, READINESS_POLL_MS, type ProbeOutcome } from './process-probes';
import { forgetSpawnMarker, identityOf, readSupervisionRecord, removeProcessRecord, writeProcessRecord, writeSpawnMarker, type ProcessRecord } from './process-records';
import { spawnTaskProcess } from './process-spawn';

export type TaskState = TaskReport['state'];

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

/** The exit of a run, as supervision records it. */
export type RunExit = { code: number | null; signal: string | null; at: string };

/**
 * One run of a task's process at a time, and the task's state across its runs. The task
 * (process-task.ts) decides what follows an exit nobody asked for (restartLater) and how a
 * process that would not stop is killed (kill).
 */
export abstract class ProcessLifecycle {
  readonly taskId: string;
  /** changes with every (re)start of its process */
  protected currentIncarnation: string;
  protected state: TaskState = 'starting';
  protected readonly errors: ErrorCount;
  protected detail: string | undefined = 'waiting for readiness';
  protected child: ChildProcess | undefined;
  /** a process left by an earlier agent and adopted: not our child, so its end is polled for */
  protected adopted: ProcessIdentity | undefined;
  private watchTimer: NodeJS.Timeout | undefined;
  /** settles when the current run's process has ended (a new promise per run) */
  protected exited: Promise<void>;
  protected markExited!: () => void;
  protected supervision: SupervisionRecord = freshSupervision();
  /** when the current run became ready */
  protected readyAtMs: number | undefined;
  protected alive = false;
  /** answers of the readiness path once ready: when, and how long each took */
  protected readonly latencies = new LatencyWindow();

  constructor(
    protected readonly ctx: DriverContext,
    protected readonly start: TaskStart,
    protected readonly spec: ServiceSpec,
    readonly ports: PortPair,
    incarnation: string = randomUUID(),
  ) {
    this.taskId = start.taskId;
    this.currentIncarnation = incarnation;
    this.errors = new ErrorCount(ctx.errorWindowMs);
    this.exited = new Promise((resolve) => (this.markExited = resolve));
  }

  /** After an exit nobody asked for (the task is `failed`): what the task does next. */
  protected abstract restartLater(exit: RunExit): void;

  /** SIGKILL the whole group and wait for the exit. */
  abstract kill(): Promise<void>;

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

  /** Spawns the command; resolves once the OS process exists, rejects (spawn-failed) if it could not be started. */
  async launch(): Promise<void> {
    const [command] = this.spec.command as [string, ...string[]];
    const cannotRun = (error: unknown): DriverError => {
      this.state = 'failed';
      this.detail = `cannot run ${JSON.stringify(command)}: ${messageOf(error)}`;
      this.errors.add();
      return new DriverError('spawn-failed', `task ${this.taskId}: ${this.detail}`);
    };
    // Refused by the state folder (503 state-unwritable): nothing was spawned.
    writeSpawnMarker(this.ctx.stateDir, this.taskId, this.incarnation);
    let child: ChildProcess;
    try {
      child = spawnTaskProcess(this.ctx, { taskId: this.taskId, incarnation: this.incarnation, spec: this.spec, ports: this.ports });
    } catch (error) {
      forgetSpawnMarker(this.ctx, this.taskId, this.incarnation);
      throw cannotRun(error);
    }
    this.child = child;

    await new Promise<void>((resolve, reject) => {
      child.once('spawn', () => {
        this.alive = true;
        try {
          if (child.pid !== undefined) {
            writeProcessRecord(this.ctx.stateDir, child.pid, {
              taskId: this.taskId, incarnation: this.incarnation, generation: this.start.generation, spec: this.spec, ports: this.ports, restarts: this.supervision.restarts,
            });
          }
          forgetSpawnMarker(this.ctx, this.taskId, this.incarnation);
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
          forgetSpawnMarker(this.ctx, this.taskId, this.incarnation);
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
    // The record names this incarnation's process, which is gone: forget it (a newer one's stays).
    removeProcessRecord(this.ctx, this.taskId, this.incarnation);
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
      this.latencies.add(Math.round((performance.now() - began) * 10) / 10);
    }
  }
}
