// The one interface every task driver (process, consumer, stream) implements. The agent's task host
// only talks to drivers through it.
import type { RestartPolicy } from '../../domain/supervision';
import { CodedError, type CheckpointClockAnswer, type CheckpointClockCommand, type CutoverAnswer, type CutoverCommand, type DrainOptions, type DrainReceipt, type ErrorCode, type ProbeAnswer, type TaskStart, type TaskStatus, type WorkloadKind } from '../../protocol';

export type { DrainReceipt, TaskStart, TaskStatus } from '../../protocol';

export interface TaskHandle {
  readonly taskId: string;
  readonly incarnation: string;
  status(): TaskStatus;
  /** Apply a changed start (e.g. new partition ownership) without a restart, when the driver can. */
  update?(start: TaskStart): Promise<void>;
  /** Stop taking work, finish in-flight, commit, release, stop. */
  drain(options: DrainOptions): Promise<DrainReceipt>;
  /** Stream coordinators: pause or resume the job's checkpoint clock, or trigger one checkpoint. */
  checkpointClock?(command: CheckpointClockCommand): Promise<CheckpointClockAnswer>;
  /** Stream subtasks: arm for a hot rescale's cutover at a checkpoint barrier. */
  armCutover?(command: CutoverCommand): CutoverAnswer;
}

export interface DriverContext {
  /** this agent's runtime id */
  runtimeId: string;
  /** this agent's state folder; drivers keep their records beneath it */
  stateDir: string;
  databaseUrl?: string;
  /** the Kafka brokers (SCALEGATE_KAFKA_BROKERS) Kafka sources are read from */
  kafkaBrokers?: string;
  /** the node's bind address (DESIGN.md §7): process tasks get it as BIND_HOST, their ports are drawn and probed there (default 127.0.0.1) */
  taskBindHost?: string;
  /** stream: the address data listeners bind to, and the host peers reach them at (default 127.0.0.1) */
  dataBindHost?: string;
  dataHost?: string;
  /** how far back a task's errors count as recent (agent/drivers/error-count.ts) */
  errorWindowMs?: number;
  /** when a process task that exited on its own is started again, and what is a crash loop (default DEFAULT_RESTART_POLICY) */
  restartPolicy?: RestartPolicy;
  log(event: string, fields?: Record<string, unknown>): void;
}

export interface TaskDriver {
  readonly kind: WorkloadKind;
  start(task: TaskStart): Promise<TaskHandle>;
  /** Can this runtime reach the workload's source and destination? (scale-out connectivity gate) */
  probe?(spec: unknown): Promise<ProbeAnswer>;
  /**
   * After a restart's restore: remove what this driver left running that no hosted task names (a
   * container of a task the control plane stopped while the agent was down). Answers their task ids.
   */
  sweep?(isHosted: (taskId: string) => boolean): Promise<string[]>;
  /** Release everything the driver holds (agent shutdown). */
  close?(): Promise<void>;
}

/** A service's probe answer: it declares no source or destination for the connectivity gate to reach. */
export const serviceHasNoEndpoints = (): ProbeAnswer => ({
  source: { ok: true, detail: 'a service declares no source to reach' },
  destination: { ok: true, detail: 'a service declares no destination to reach' },
});

/** A driver refused a start for a reason the control plane should see (e.g. placement-unavailable). */
export class DriverError extends CodedError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
    this.name = 'DriverError';
  }
}
