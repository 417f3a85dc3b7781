// The one interface every task driver (process, consumer, stream) implements. The agent's task host
// only talks to drivers through it.
import type { PortPair, TaskReport, WorkloadKind } from '../../domain/schemas';

/** What the control plane sends in PUT /v1/tasks/:taskId. */
export interface TaskStart {
  taskId: string;
  workload: string;
  kind: WorkloadKind;
  /** replica / subtask index */
  index: number;
  /** placement generation; a stop-the-world replan starts a new one */
  generation: number;
  /** the placement fence this start was decided under; drivers fence ownership with it */
  placementFence: number;
  /** the workload's driver spec (validated by the driver against its zod schema) */
  spec: unknown;
  /** consumer: the partitions this replica owns */
  partitions?: number[];
}

export interface DrainReceipt {
  taskId: string;
  incarnation: string;
  /** work in flight when the drain finished: always 0 for a clean drain */
  inFlight: number;
  /** consumer: the last committed offset per partition it released */
  committedOffsets?: Record<string, number>;
  releasedPartitions?: number[];
  /** process: true when the grace period ran out and SIGKILL was sent */
  forced?: boolean;
  durationMs: number;
}

export interface TaskStatus extends TaskReport {
  ports?: PortPair;
  partitions?: number[];
  generation: number;
  detail?: string;
}

export interface TaskHandle {
  readonly taskId: string;
  readonly incarnation: string;
  status(): TaskStatus;
  /** Apply a changed start (e.g. new partition ownership) without a restart, when the driver can. */
  update?(start: TaskStart): Promise<void>;
  /** Stop taking work, finish in-flight, commit, release, stop. */
  drain(options: { graceMs?: number; deadlineMs?: number }): Promise<DrainReceipt>;
}

export interface ProbeResult {
  ok: boolean;
  detail: string;
}

export interface DriverContext {
  /** this agent's runtime id */
  runtimeId: string;
  /** this agent's state folder; drivers keep their records beneath it */
  stateDir: string;
  databaseUrl?: string;
  log(event: string, fields?: Record<string, unknown>): void;
}

export interface TaskDriver {
  readonly kind: WorkloadKind;
  start(task: TaskStart): Promise<TaskHandle>;
  /** Can this runtime reach the workload's source and destination? (scale-out connectivity gate) */
  probe?(spec: unknown): Promise<{ source: ProbeResult; destination: ProbeResult }>;
  /** Release everything the driver holds (agent shutdown). */
  close?(): Promise<void>;
}

/** A driver refused a start for a reason the control plane should see (e.g. placement-unavailable). */
export class DriverError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
