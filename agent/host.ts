// The agent's task host: which tasks run here, through which driver. Starts and stops are
// idempotent so the control plane can retry them freely.
import fs from 'node:fs';
import path from 'node:path';
import type { DrainOptions, WorkloadKind } from '../protocol';
import { DrainReceipt, DriverError, TaskDriver, TaskHandle, TaskStart, TaskStatus } from './drivers/driver';

interface Hosted {
  start: TaskStart;
  handle: TaskHandle;
}

export type StartOutcome = { created: boolean; status: TaskStatus };

export class TaskHost {
  private readonly tasks: Record<string, Hosted> = {};
  /** Starts and drains in progress, so a retried call joins the first instead of racing it. */
  private readonly pending: Record<string, Promise<unknown>> = {};

  /**
   * @param recordFile where the starts of running tasks are kept, so a restarted agent restarts
   *   them (its first heartbeat then revokes any that are no longer placed here)
   */
  constructor(
    private readonly drivers: Partial<Record<WorkloadKind, TaskDriver>>,
    private readonly recordFile?: string,
  ) {}

  private persist(): void {
    if (!this.recordFile) return;
    const starts = Object.values(this.tasks).map((t) => t.start);
    fs.mkdirSync(path.dirname(this.recordFile), { recursive: true });
    const staging = `${this.recordFile}.tmp`;
    fs.writeFileSync(staging, JSON.stringify(starts));
    fs.renameSync(staging, this.recordFile);
  }

  /** Restarts the tasks recorded by an earlier incarnation of this agent. */
  async restore(log: (event: string, fields?: Record<string, unknown>) => void): Promise<void> {
    if (!this.recordFile || !fs.existsSync(this.recordFile)) return;
    const starts = JSON.parse(fs.readFileSync(this.recordFile, 'utf8')) as TaskStart[];
    for (const start of starts) {
      await this.ensure(start).then(
        () => log('task restored', { taskId: start.taskId }),
        (error: Error) => log('task restore failed', { taskId: start.taskId, error: error.message }),
      );
    }
  }

  private driverFor(kind: WorkloadKind): TaskDriver {
    const driver = this.drivers[kind];
    if (!driver) throw new DriverError('unsupported-kind', `this agent has no ${kind} driver`);
    return driver;
  }

  private serialise<T>(taskId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.pending[taskId] ?? Promise.resolve();
    const next = previous.catch(() => {}).then(work);
    this.pending[taskId] = next;
    return next.finally(() => {
      if (this.pending[taskId] === next) delete this.pending[taskId];
    });
  }

  /** PUT semantics: absent → start; same generation → update in place (or nothing); newer → restart. */
  ensure(start: TaskStart): Promise<StartOutcome> {
    return this.serialise(start.taskId, async () => {
      const existing = this.tasks[start.taskId];
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
        delete this.tasks[start.taskId];
      }
      const handle = await this.driverFor(start.kind).start(start);
      this.tasks[start.taskId] = { start, handle };
      this.persist();
      return { created: true, status: handle.status() };
    });
  }

  /** DELETE semantics: drain and forget; an absent task is already stopped. */
  remove(taskId: string, options: DrainOptions = {}): Promise<DrainReceipt | null> {
    return this.serialise(taskId, async () => {
      const hosted = this.tasks[taskId];
      if (!hosted) return null;
      const receipt = await hosted.handle.drain(options);
      delete this.tasks[taskId];
      this.persist();
      return receipt;
    });
  }

  get(taskId: string): TaskStatus | null {
    return this.tasks[taskId]?.handle.status() ?? null;
  }

  list(): TaskStatus[] {
    return Object.values(this.tasks).map((t) => t.handle.status());
  }

  /** Connectivity probe for the scale-out gate; a driver without a probe has nothing to reach. */
  async probe(kind: WorkloadKind, spec: unknown) {
    const driver = this.driverFor(kind);
    if (!driver.probe) {
      const none = { ok: true, detail: `${kind} driver declares no source or destination` };
      return { source: none, destination: none };
    }
    return driver.probe(spec);
  }

  async revoke(taskIds: string[]): Promise<void> {
    await Promise.all(taskIds.map((id) => this.remove(id).catch(() => null)));
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.drivers).map((d) => d?.close?.()));
  }
}
