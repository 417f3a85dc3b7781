// The agent protocol (docs/agent-protocol.md), both directions: what the control plane sends an
// agent (task starts, drains, probes) and what the agent answers (task status, drain receipts).
// The agent's server validates with these schemas; activities/agent-client.ts sends and reads them.
import { z } from 'zod';
import { TaskReportSchema } from './runtime';
import { PortPairSchema, RequiresSchema, WORKLOAD_KINDS } from './workload';

export const TaskIdSchema = z.string().min(1).max(200).regex(/^[A-Za-z0-9._-]+$/, 'task ids are [A-Za-z0-9._-]');
export const TaskParamsSchema = z.object({ taskId: TaskIdSchema });

/** PUT /v1/tasks/:taskId: start a task, or apply a changed start in place (same generation). */
export const TaskStartBodySchema = z.object({
  workload: z.string().min(1).max(63),
  kind: z.enum(WORKLOAD_KINDS),
  /** replica / subtask index */
  index: z.int().min(0),
  /** placement generation; a stop-the-world replan starts a new one */
  generation: z.int().min(1),
  /** the placement fence this start was decided under; drivers fence ownership with it */
  placementFence: z.int().min(0),
  /** the workload's driver spec (validated by the driver against its own schema) */
  spec: z.unknown(),
  /** consumer: the partitions this replica owns */
  partitions: z.array(z.int().min(0)).optional(),
  /** stream: a subtask a hot rescale adds joins after this checkpoint, restoring its state from it */
  joinAt: z.int().min(1).optional(),
  /** the workload's `requires`: a new task starts only once this runtime reached every endpoint */
  requires: RequiresSchema.optional(),
});
export type TaskStartBody = z.infer<typeof TaskStartBodySchema>;
/** What a driver is handed: the body plus the task id from the path. */
export type TaskStart = TaskStartBody & { taskId: string };

/** DELETE /v1/tasks/:taskId query: drain then stop. */
export const DrainQuerySchema = z.object({
  /** process tasks: how long SIGTERM may take before SIGKILL */
  graceMs: z.coerce.number().int().min(0).max(3_600_000).optional(),
  /** how long the whole drain may take (a duration, not an instant) */
  drainTimeoutMs: z.coerce.number().int().min(0).max(3_600_000).optional(),
  /** the placement fence the stop was decided under; an agent refuses one older than it has seen (stale-fence) */
  placementFence: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});
export type DrainOptions = z.infer<typeof DrainQuerySchema>;

export const DrainReceiptSchema = z.object({
  taskId: z.string(),
  incarnation: z.string(),
  /** work in flight when the drain finished: always 0 for a clean drain */
  inFlight: z.number(),
  /** consumer: the last committed offset per partition it released */
  committedOffsets: z.record(z.string(), z.number()).optional(),
  releasedPartitions: z.array(z.int()).optional(),
  /** process: true when the grace period ran out and SIGKILL was sent */
  forced: z.boolean().optional(),
  /** the task's counters at its end (stream subtasks: what a retired subtask took in, and after its cutover barrier) */
  counts: z.record(z.string(), z.number()).optional(),
  durationMs: z.number(),
});
export type DrainReceipt = z.infer<typeof DrainReceiptSchema>;

/** The answer to DELETE /v1/tasks/:taskId. */
export const StopAnswerSchema = z.object({
  state: z.enum(['stopped', 'absent']),
  receipt: DrainReceiptSchema.optional(),
});
export type StopAnswer = z.infer<typeof StopAnswerSchema>;

/** GET /v1/tasks/:taskId: a task report plus what only the hosting agent knows. */
/** The most latency samples a task's status carries. */
export const LATENCY_SAMPLES_REPORTED = 200;
/** A throughput sample's interval: half a second, so a 5 s soak holds enough of them to test. */
export const THROUGHPUT_INTERVAL_MS = 500;
/** Two minutes of throughput samples. */
export const THROUGHPUT_SAMPLES_REPORTED = 240;

export const TaskStatusSchema = TaskReportSchema.extend({
  ports: PortPairSchema.optional(),
  partitions: z.array(z.int()).optional(),
  generation: z.int(),
  detail: z.string().optional(),
  /**
   * the latency samples its p50 and p95 were taken from (the newest), each [age in ms by the agent's
   * clock, latency in ms]: what evidence tests statistically (ages, not times: no agent clock is
   * trusted); not sent in heartbeats
   */
  latencySamples: z.array(z.tuple([z.number(), z.number()])).max(LATENCY_SAMPLES_REPORTED).optional(),
  /**
   * the records it processed in each whole THROUGHPUT_INTERVAL_MS since it started (the newest),
   * each [age in ms of the interval's end by the agent's clock, records]: the throughput samples
   * evidence tests; not sent in heartbeats
   */
  throughputSamples: z.array(z.tuple([z.number(), z.number()])).max(THROUGHPUT_SAMPLES_REPORTED).optional(),
});
export type TaskStatus = z.infer<typeof TaskStatusSchema>;
export type TaskState = TaskStatus['state'];

export const TaskListSchema = z.object({ tasks: z.array(TaskStatusSchema) });

/** POST /v1/probe: can this runtime reach the workload's source and destination? */
export const ProbeBodySchema = z.object({ kind: z.enum(WORKLOAD_KINDS), spec: z.unknown(), requires: RequiresSchema.optional() });
export const ProbeResultSchema = z.object({ ok: z.boolean(), detail: z.string() });
export type ProbeResult = z.infer<typeof ProbeResultSchema>;
export const ProbeAnswerSchema = z.object({
  source: ProbeResultSchema,
  destination: ProbeResultSchema,
  /** one result per endpoint of the workload's `requires`, in its order (absent: none asked) */
  requirements: z.array(ProbeResultSchema.extend({ endpoint: z.string() })).optional(),
});
export type ProbeAnswer = z.infer<typeof ProbeAnswerSchema>;
