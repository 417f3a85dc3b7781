// A process task (DESIGN.md §3 "Supervision", §5): the task across the runs of its process
// (process-lifecycle.ts). A process that ends without being asked to is started again on the same
// task id and port pair after a backoff; a drain, a stop or the agent's shutdown cancels a pending
// restart. Here too: the task's status, its drain (SIGTERM, grace, SIGKILL) and its kill.
import { randomUUID } from 'node:crypto';
import { DEFAULT_RESTART_POLICY, describeExit, isCrashLooping, scheduleRestart, type RestartPolicy, type SupervisionRecord } from '../../domain/supervision';
import { messageOf } from '../../lib/errors';
import type { DrainOptions, PortPair, ServiceSpec } from '../../protocol';
import { portKeyFor, type PortAllocator } from '../ports';
import type { DrainReceipt, DriverContext, TaskHandle, TaskStart, TaskStatus } from './driver';
import { CpuSampler, residentBytes } from './proc';
import { delay, KILL_WAIT_MS, signalGroup } from './process-group';
import { nextTaskState, ProcessLifecycle, type RunExit } from './process-lifecycle';
import { removeSupervisionRecord, writeSupervisionRecord } from './process-records';

export class ProcessTask extends ProcessLifecycle implements TaskHandle {
  private readonly policy: RestartPolicy;
  private restartTimer: NodeJS.Timeout | undefined;
  private nextRestartAtMs: number | undefined;
  /** a restart under way (spawning): a drain waits for it, then stops what it started */
  private relaunching: Promise<void> | undefined;
  /** a drain, stop or shutdown was asked for: no restart is scheduled any more */
  private stopRequested = false;
  private draining: Promise<DrainReceipt> | undefined;
  private readonly cpu = new CpuSampler();

  constructor(
    ctx: DriverContext,
    private readonly allocator: PortAllocator,
    start: TaskStart,
    spec: ServiceSpec,
    ports: PortPair,
    incarnation?: string,
  ) {
    super(ctx, start, spec, ports, incarnation);
    this.policy = ctx.restartPolicy ?? DEFAULT_RESTART_POLICY;
  }

  /** An earlier agent's record of this task's restarts (it waited for a restart when that agent ended). */
  resumeSupervision(record: SupervisionRecord | null): void {
    if (record) this.supervision = record;
  }

  /** Its process runs, or a restart of it is pending or under way: a start retried joins it. */
  get isSupervised(): boolean {
    return this.alive || this.restartTimer !== undefined || this.relaunching !== undefined;
  }

  /**
   * After an exit nobody asked for (the task is `failed`): the task becomes `restarting` and its
   * process is started again after the backoff, unless a stop was asked for meanwhile.
   */
  protected override restartLater(exit: RunExit): void {
    if (this.stopRequested) return;
    const nowMs = Date.now();
    const readyForMs = this.readyAtMs === undefined ? null : nowMs - this.readyAtMs;
    const next = scheduleRestart(this.supervision, this.policy, exit, readyForMs, nowMs);
    this.supervision = next.record;
    writeSupervisionRecord(this.ctx, this.taskId, this.supervision);
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
    this.latencies.clear();
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

  status(): TaskStatus {
    const latencyMs = this.latencies.percentiles();
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
      ...(latencyMs ? { latencyMs, latencySamples: this.latencies.samples() } : {}),
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
    removeSupervisionRecord(this.ctx, this.taskId);
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
  override async kill(): Promise<void> {
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
