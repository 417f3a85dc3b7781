// The agent's task host: which tasks run here, through which driver. Starts and stops are
// idempotent so the control plane can retry them freely, and fenced (DESIGN.md §3 "Credentials"):
// a start or stop decided under a placement fence older than the newest this agent has seen for
// the workload is refused with stale-fence, also after a restart, since the newest fence per
// workload is kept in the state folder. What the host reads back from that folder (recorded starts,
// fences, receipts: state-files.ts reads and writes them) never takes the agent down: a record that
// cannot be used is logged, and a recorded task that cannot be started again is hosted as failed,
// with the reason, for the control plane to see.
//
// Static stability (DESIGN.md §3): the host stops a task only when told to: a drain (remove), a
// start of a newer generation (ensure), a revocation from a heartbeat answer (revoke), or the
// agent's own shutdown (close). Nothing here watches the lease. A start is recorded before the
// driver starts it, so an agent killed in between still knows the task when it restarts; restore()
// then lets the driver find what the previous agent left (a process driver adopts its process).
import { randomUUID } from 'node:crypto';
import type { CheckpointClockAnswer, CheckpointClockCommand, CutoverAnswer, CutoverCommand, DrainOptions, ProbeAnswer, Requirement, WorkloadKind } from '../protocol';
import { DrainReceipt, DriverError, TaskDriver, TaskHandle, TaskStart, TaskStatus } from './drivers/driver';
import { HostRecords, RECEIPTS_KEPT } from './state-files';
import { probeRequirements } from './requirements';
import { messageOf } from '../lib/errors';

export type HostLog = (event: string, fields?: Record<string, unknown>) => void;

export interface TaskHostOptions {
  /** the agent's state folder; without one nothing is kept across restarts */
  stateDir?: string;
  log?: HostLog;
  /** this runtime's id: it names the prober to the endpoints a workload requires */
  runtimeId?: string;
}

interface Hosted {
  start: TaskStart;
  handle: TaskHandle;
}

export type StartOutcome = { created: boolean; status: TaskStatus };

/**
 * Stands in for a recorded task its driver could not start again (e.g. a spec an older agent
 * accepted and this one refuses): it reports failed with the reason, and drains at once.
 */
class FailedTask implements TaskHandle {
  readonly incarnation = randomUUID();

  constructor(
    private readonly start: TaskStart,
    private readonly reason: string,
  ) {}

  get taskId(): string {
    return this.start.taskId;
  }

  status(): TaskStatus {
    return {
      taskId: this.start.taskId,
      workload: this.start.workload,
      incarnation: this.incarnation,
      state: 'failed',
      counts: {},
      errors: 1,
      generation: this.start.generation,
      detail: this.reason,
    };
  }

  async drain(): Promise<DrainReceipt> {
    return { taskId: this.start.taskId, incarnation: this.incarnation, inFlight: 0, durationMs: 0 };
  }
}

export class TaskHost {
  // Maps, not plain objects: a task id or workload name such as "__proto__" must be just a key.
  private readonly tasks = new Map<string, Hosted>();
  /** Starts and drains in progress, so a retried call joins the first instead of racing it. */
  private readonly pending = new Map<string, Promise<unknown>>();
  /** The newest placement fence seen per workload. */
  private readonly fences = new Map<string, number>();
  /** Receipts of drained tasks by task id, oldest first (a Map keeps insertion order). */
  private readonly receipts = new Map<string, DrainReceipt>();
  /** the starts, fences and receipts in the state folder */
  private readonly records: HostRecords;
  private readonly log: HostLog;
  private readonly runtimeId: string | undefined;
  /** The starts read from the state folder, until restore() starts them. */
  private recorded: TaskStart[] = [];
  /** Starts handed to a driver and not answered yet: recorded already, so a crash cannot lose them. */
  private readonly starting = new Map<string, TaskStart>();

  constructor(
    private readonly drivers: Partial<Record<WorkloadKind, TaskDriver>>,
    options: TaskHostOptions = {},
  ) {
    this.log = options.log ?? (() => {});
    this.runtimeId = options.runtimeId;
    this.records = new HostRecords(options.stateDir, this.log);
    for (const [workload, fence] of this.records.readFences()) this.fences.set(workload, fence);
    for (const receipt of this.records.readReceipts()) this.receipts.set(receipt.taskId, receipt);
    this.recorded = this.records.readStarts();
    // A recorded start was accepted under its fence: the newest fence is at least that.
    for (const start of this.recorded) {
      if (start.placementFence > (this.fences.get(start.workload) ?? -1)) this.fences.set(start.workload, start.placementFence);
    }
  }

  /** The newest placement fence this agent has seen for the workload, if any. */
  newestFence(workload: string): number | undefined {
    return this.fences.get(workload);
  }

  /** Keeps a drain's receipt (on disk too): the control plane may ask again after a lost reply. */
  private rememberReceipt(receipt: DrainReceipt): void {
    this.receipts.delete(receipt.taskId);
    this.receipts.set(receipt.taskId, receipt);
    while (this.receipts.size > RECEIPTS_KEPT) this.receipts.delete(this.receipts.keys().next().value as string);
    this.records.writeReceipts(this.receipts.values());
  }

  /** Records the starts of the tasks hosted here, and of those being started. */
  private persist(): void {
    const starts = [...this.tasks.values()].map((t) => t.start);
    for (const [taskId, start] of this.starting) if (!this.tasks.has(taskId)) starts.push(start);
    this.records.writeStarts(starts);
  }

  /**
   * Starts a task through its driver with the start recorded first (and forgotten again if the
   * driver refuses it): an agent killed while the driver starts it restores it, and its driver then
   * finds the process it had begun rather than starting a second one.
   */
  private async startRecorded(start: TaskStart): Promise<TaskHandle> {
    const driver = this.driverFor(start.kind);
    this.starting.set(start.taskId, start);
    let handle: TaskHandle;
    try {
      this.persist();
      handle = await driver.start(start);
    } catch (error) {
      this.starting.delete(start.taskId);
      this.persistQuietly();
      throw error;
    }
    this.starting.delete(start.taskId);
    this.tasks.set(start.taskId, { start, handle });
    this.persist();
    return handle;
  }

  /**
   * A new task starts only where every endpoint its workload requires is reachable (DESIGN.md §5
   * "Connectivity"), whichever operation starts it: a scale-out's gate probed them before, but a
   * replan, a recovery or the reconcile loop may pick this runtime later. Refused, naming this
   * runtime and each endpoint, with nothing started. A task already running, or adopted after an
   * agent restart, is never stopped for it: only a start is refused.
   */
  private async requireReachable(start: TaskStart): Promise<void> {
    if (!start.requires?.length) return;
    const unreachable = (await probeRequirements(start.requires, { runtimeId: this.runtimeId })).filter((result) => !result.ok);
    if (unreachable.length === 0) return;
    throw new DriverError(
      'requirement-unreachable',
      `runtime ${this.runtimeId ?? '(unnamed)'} cannot reach ${unreachable.map((r) => `${r.endpoint} (${r.detail})`).join(', ')}, which workload ${start.workload} requires: task ${start.taskId} was not started`,
    );
  }

  /** persist() where a failure must not hide the error being reported. */
  private persistQuietly(): void {
    try {
      this.persist();
    } catch (error) {
      this.log('task-records-unwritable', { file: this.records.taskFile, error: messageOf(error) });
    }
  }

  /**
   * Refuses a start or stop decided under an older fence than the newest seen for the workload;
   * otherwise remembers the fence (on disk first, so a restarted agent refuses the same).
   */
  private admitFence(workload: string, fence: number | undefined, what: string): void {
    if (fence === undefined) return;
    const newest = this.fences.get(workload);
    if (newest !== undefined && fence < newest) {
      throw new DriverError('stale-fence', `${what} was decided under placement fence ${fence} of ${workload}; this agent has seen fence ${newest}`);
    }
    if (newest === fence) return;
    const next = new Map(this.fences).set(workload, fence);
    this.records.writeFences(next);
    this.fences.set(workload, fence);
  }

  /**
   * Starts the tasks recorded by an earlier incarnation of this agent. Never throws: a recorded
   * task that cannot be started again is hosted as failed, with the reason, so heartbeats report it.
   */
  async restore(): Promise<void> {
    const recorded = this.recorded;
    this.recorded = [];
    for (const start of recorded) {
      try {
        await this.serialise(start.taskId, async () => {
          // The control plane started it again already (the server answers before restore runs).
          if (this.tasks.has(start.taskId)) return;
          try {
            const handle = await this.driverFor(start.kind).start(start);
            this.tasks.set(start.taskId, { start, handle });
            const status = handle.status();
            // adopted: the process the previous agent left runs on, in its incarnation
            this.log('task restored', { taskId: start.taskId, incarnation: handle.incarnation, adopted: status.counts.adopted === 1 });
          } catch (error) {
            const reason = `could not restart the recorded task: ${messageOf(error)}`;
            this.tasks.set(start.taskId, { start, handle: new FailedTask(start, reason) });
            this.log('task restore failed', { taskId: start.taskId, workload: start.workload, error: messageOf(error) });
          }
          this.persist();
        });
      } catch (error) {
        this.log('task restore failed', { taskId: start.taskId, error: messageOf(error) });
      }
    }
    // What the drivers left that no task names now (a start in flight counts as hosted).
    const isHosted = (taskId: string) => this.tasks.has(taskId) || this.pending.has(taskId);
    for (const driver of new Set(Object.values(this.drivers))) {
      if (!driver?.sweep) continue;
      await driver.sweep(isHosted).then(
        (removed) => removed.length > 0 && this.log('strays removed', { kind: driver.kind, tasks: removed }),
        (error: unknown) => this.log('stray sweep failed', { kind: driver.kind, error: messageOf(error) }),
      );
    }
  }

  private driverFor(kind: WorkloadKind): TaskDriver {
    const driver = this.drivers[kind];
    if (!driver) throw new DriverError('unsupported-kind', `this agent has no ${kind} driver`);
    return driver;
  }

  private serialise<T>(taskId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.pending.get(taskId) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(work);
    this.pending.set(taskId, next);
    return next.finally(() => {
      if (this.pending.get(taskId) === next) this.pending.delete(taskId);
    });
  }

  /** PUT semantics: absent → start; same generation → update in place (or nothing); newer → restart. */
  ensure(start: TaskStart): Promise<StartOutcome> {
    return this.serialise(start.taskId, async () => {
      this.admitFence(start.workload, start.placementFence, `the start of ${start.taskId}`);
      const existing = this.tasks.get(start.taskId);
      if (existing) {
        if (start.generation < existing.start.generation) {
          throw new DriverError('stale-generation', `task ${start.taskId} runs generation ${existing.start.generation}; refusing ${start.generation}`);
        }
        const terminal = ['stopped', 'failed'].includes(existing.handle.status().state);
        if (start.generation === existing.start.generation && !terminal) {
          if (existing.handle.update && JSON.stringify(existing.start.partitions) !== JSON.stringify(start.partitions)) {
            await existing.handle.update(start);
          }
          existing.start = start;
          this.persist();
          return { created: false, status: existing.handle.status() };
        }
        await existing.handle.drain({}).catch(() => {});
        this.tasks.delete(start.taskId);
      }
      await this.requireReachable(start);
      const handle = await this.startRecorded(start);
      return { created: true, status: handle.status() };
    });
  }

  /**
   * DELETE semantics: drain and forget. A task drained earlier answers its remembered receipt (the
   * retry of a stop whose reply was lost must not lose it); one never hosted answers null.
   */
  drainTask(taskId: string, options: DrainOptions = {}): Promise<DrainReceipt | null> {
    const { placementFence, ...drain } = options;
    return this.serialise(taskId, async () => {
      const hosted = this.tasks.get(taskId);
      if (!hosted) return this.receipts.get(taskId) ?? null;
      this.admitFence(hosted.start.workload, placementFence, `the stop of ${taskId}`);
      const receipt = await hosted.handle.drain(drain);
      this.rememberReceipt(receipt);
      this.tasks.delete(taskId);
      this.persist();
      return receipt;
    });
  }

  get(taskId: string): TaskStatus | null {
    return this.tasks.get(taskId)?.handle.status() ?? null;
  }

  list(): TaskStatus[] {
    return [...this.tasks.values()].map((t) => t.handle.status());
  }

  /** Pauses or resumes a stream job's checkpoint clock on the task that runs it (its coordinator). */
  async checkpointClock(taskId: string, command: CheckpointClockCommand): Promise<CheckpointClockAnswer | null> {
    const hosted = this.tasks.get(taskId);
    if (!hosted) return null;
    if (!hosted.handle.checkpointClock) throw new DriverError('conflict', `task ${taskId} is a ${hosted.start.kind} task: it has no checkpoint clock`);
    return hosted.handle.checkpointClock(command).catch((error: unknown) => {
      throw new DriverError('conflict', messageOf(error));
    });
  }

  /** Arms a stream subtask for a hot rescale's cutover at a checkpoint barrier. */
  armCutover(taskId: string, command: CutoverCommand): CutoverAnswer | null {
    const hosted = this.tasks.get(taskId);
    if (!hosted) return null;
    if (!hosted.handle.armCutover) throw new DriverError('conflict', `task ${taskId} is a ${hosted.start.kind} task: it takes no cutover`);
    try {
      return hosted.handle.armCutover(command);
    } catch (error) {
      throw new DriverError('conflict', messageOf(error));
    }
  }

  /**
   * Connectivity probe for the scale-out gate: the driver's source and destination (a driver
   * without a probe has none to reach), and every endpoint the workload requires, side by side.
   */
  async probe(kind: WorkloadKind, spec: unknown, requires: Requirement[] = []): Promise<ProbeAnswer> {
    const driver = this.driverFor(kind);
    const none = { ok: true, detail: `${kind} driver declares no source or destination` };
    const [answer, requirements] = await Promise.all([
      driver.probe ? driver.probe(spec) : { source: none, destination: none },
      probeRequirements(requires, { runtimeId: this.runtimeId }),
    ]);
    return requires.length ? { ...answer, requirements } : answer;
  }

  /**
   * Stops exactly the tasks a heartbeat answer revoked (their work was moved elsewhere), draining
   * each like a stop; every other task runs on. Each outcome is logged.
   */
  async revoke(taskIds: string[], reason = 'revoked by the control plane'): Promise<void> {
    await Promise.all(
      taskIds.map(async (taskId) => {
        const hosted = this.tasks.get(taskId);
        try {
          const receipt = await this.drainTask(taskId);
          if (hosted) this.log('task revoked', { taskId, workload: hosted.start.workload, incarnation: hosted.handle.incarnation, reason, forced: receipt?.forced ?? false });
        } catch (error) {
          this.log('task revoke failed', { taskId, reason, error: messageOf(error) });
        }
      }),
    );
  }

  /** The agent's own shutdown (SIGTERM/SIGINT): every driver stops what it runs. */
  async close(): Promise<void> {
    await Promise.all(Object.values(this.drivers).map((d) => d?.close?.()));
  }
}
