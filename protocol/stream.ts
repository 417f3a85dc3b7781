// Stream jobs across boundaries (DESIGN.md §5 "stream", §6): the counters a subtask reports, the
// checkpoint-clock command of the agent protocol, and the job view of GET /v1/jobs/:job.
import { z } from 'zod';
import { WorkloadName } from './names';

/**
 * The counters a stream subtask reports in its task report's `counts` (numbers only, so they
 * travel in heartbeats unchanged). The operator and operator index follow from the task's
 * assignment index and the job's spec (domain/stream.ts subtaskAt).
 */
export const STREAM_COUNTERS = {
  /** records this subtask took in (sources: records read in this incarnation, re-reads included) */
  recordsIn: 'recordsIn',
  /** records this subtask emitted downstream (sinks: rows pre-committed) */
  recordsOut: 'recordsOut',
  /** sources: every record read, including re-reads after a restore */
  recordsRead: 'recordsRead',
  /** the newest checkpoint id this subtask snapshotted and acknowledged */
  lastCheckpoint: 'lastCheckpoint',
  /** how many checkpoints this subtask acknowledged in this incarnation */
  checkpointsAcked: 'checkpointsAcked',
  /** the checkpoint this incarnation restored from (0 = none: it started empty) */
  restoredFrom: 'restoredFrom',
  /** the job's placement generation this subtask runs in */
  generation: 'generation',
  /** the event-time watermark this subtask has passed on, in epoch ms (0 = none yet) */
  watermark: 'watermark',
  /** sinks: checkpoints this subtask's job committed while it ran */
  commits: 'commits',
  /** sources: the records up to the offsets read so far (per partition, offset + 1) */
  readPosition: 'readPosition',
  /** hot rescales this subtask took part in, and how long it held the rescaled edge (upstream) */
  cutovers: 'cutovers',
  heldMs: 'heldMs',
  /** how long this incarnation waited for its restore point's state (sources: offsets; aggregates: counts of the keys they met, loaded as met) */
  restoreMs: 'restoreMs',
  /** how long the last checkpoint's snapshot held the barrier (sources and aggregates) */
  snapshotMs: 'snapshotMs',
  /** aggregates: the keys this subtask holds counts for (the keys it met in this incarnation) */
  stateKeys: 'stateKeys',
  /** aggregates: keys whose count this incarnation loaded from its restore point */
  keysLoaded: 'keysLoaded',
} as const;

/** POST /v1/tasks/:taskId/checkpoint-clock on the agent hosting a job's coordinator (its first sink subtask). */
export const CheckpointClockBodySchema = z.strictObject({
  state: z.enum(['paused', 'running']),
  /** trigger this checkpoint id now, while the clock stays paused (a hot rescale's cutover barrier C) */
  trigger: z.int().min(1).optional(),
});
export type CheckpointClockCommand = z.infer<typeof CheckpointClockBodySchema>;
export const CheckpointClockAnswerSchema = z.object({
  state: z.enum(['paused', 'running']),
  /** the newest checkpoint id the coordinator triggered (0 = none yet) */
  lastTriggered: z.number(),
  /** a triggered checkpoint not completed yet, if any */
  inFlight: z.number().nullable(),
});
export type CheckpointClockAnswer = z.infer<typeof CheckpointClockAnswerSchema>;

export const JobParamsSchema = z.object({ job: WorkloadName });

export const StreamSubtaskViewSchema = z.object({
  operator: z.string(),
  /** index within the operator */
  index: z.int(),
  /** job-global index */
  subtask: z.int(),
  runtimeId: z.string(),
  taskId: z.string(),
  incarnation: z.string().nullable(),
  state: z.string().nullable(),
  recordsIn: z.number().nullable(),
  recordsOut: z.number().nullable(),
  recordsRead: z.number().nullable(),
  lastCheckpoint: z.number().nullable(),
  backlog: z.number().nullable(),
  latencyMs: z.object({ p50: z.number(), p95: z.number() }).nullable(),
  /** when its runtime's agent last reported these counters (its last heartbeat; null: never) */
  reportedAt: z.string().nullable(),
});

export const CheckpointViewSchema = z.object({ id: z.number(), generation: z.int(), triggeredAt: z.string(), completedAt: z.string().nullable() });

/** GET /v1/jobs/:job */
export const StreamJobViewSchema = z.object({
  job: z.string(),
  generation: z.int().nullable(),
  operators: z.array(z.object({ id: z.string(), kind: z.string(), parallelism: z.int() })),
  subtasks: z.array(StreamSubtaskViewSchema),
  lastCompletedCheckpoint: CheckpointViewSchema.nullable(),
  checkpointInFlight: CheckpointViewSchema.nullable(),
  /** the running operation on the job (replan:<job>, rescale:<job>), if any */
  runningOperation: z.object({ workflowId: z.string(), kind: z.string(), phase: z.string().nullable() }).nullable(),
}).meta({ title: 'Job' });
export type StreamJobView = z.infer<typeof StreamJobViewSchema>;

/** GET /v1/jobs: every stream job that is not retired, by name, with its subtasks desired, placed and ready (GET /v1/jobs/:job has each). */
export const StreamJobListSchema = z.object({
  jobs: z.array(z.object({
    job: z.string(),
    generation: z.int().nullable(),
    operators: z.array(z.object({ id: z.string(), kind: z.string(), parallelism: z.int() })),
    desired: z.int(),
    placed: z.int(),
    ready: z.int(),
  })),
}).meta({ title: 'JobList' });

/**
 * POST /v1/tasks/:taskId/cutover: arms a subtask for a hot rescale at checkpoint C (the reference's
 * rules 2-4). `spec` is the job's layout after the rescale. What the subtask does follows from its
 * place: upstream of the rescaled operator it holds that edge after barrier C and moves to the new
 * peers; a subtask of the rescaled operator ends at C; downstream of it swaps its inputs at C.
 */
export const CutoverBodySchema = z.strictObject({
  checkpoint: z.int().min(1),
  operator: z.string().min(1).max(63),
  spec: z.unknown(),
});
export type CutoverCommand = z.infer<typeof CutoverBodySchema>;
export const CutoverAnswerSchema = z.object({
  role: z.enum(['upstream', 'retiring', 'downstream', 'unaffected']),
  checkpoint: z.number(),
});
export type CutoverAnswer = z.infer<typeof CutoverAnswerSchema>;

export const OperatorParamsSchema = z.object({ job: WorkloadName, op: z.string().min(1).max(63).regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'operator ids are DNS labels') });
/** POST /v1/jobs/:job/operators/:op/rescale */
export const RescaleRequestSchema = z.strictObject({
  parallelism: z.int().min(1).max(32768),
  reason: z.string().min(1).max(500).optional(),
});

/** Failed subtasks one runtime reported (its heartbeat → signal `subtasksFailed` of handleSubtaskFailures). */
export const FailedSubtasksSchema = z.strictObject({
  runtimeId: z.string().min(1).max(63),
  taskIds: z.array(z.string().min(1).max(200)).min(1).max(10_000),
});
export type FailedSubtasks = z.infer<typeof FailedSubtasksSchema>;
