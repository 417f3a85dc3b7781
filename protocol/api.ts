// Bodies, params and queries of the HTTP API (DESIGN.md §6) that are not a workload definition or
// a runtime message. The routes validate with them, the CLI builds its requests from them.
import { z } from 'zod';
import { ScaleOperationStatusSchema } from './operation-status';
import { RuntimeSummarySchema, TaskReportSchema } from './runtime';
import { LEDGER_KIND, LEDGER_OUTCOMES, OPERATION_STATUSES, type LedgerKind } from './ledger';
import { AssignmentSchema, Replicas, RolloutPolicySchema, RuntimeId, UnplacedSchema, WORKLOAD_KINDS, WorkloadName, WorkloadSchema } from './workload';

export const WorkloadParamsSchema = z.object({ name: WorkloadName });
export const RuntimeParamsSchema = z.object({ id: RuntimeId });
export const PlanParamsSchema = z.object({ id: z.string().min(1).max(100).regex(/^[A-Za-z0-9._-]+$/, 'plan ids are [A-Za-z0-9._-]') });
export const OperationParamsSchema = z.object({
  workflowId: z.string().min(1).max(300).regex(/^[^\u0000-\u001f\u007f]+$/, 'workflow ids have no control characters'),
});

/** A Temporal run id (a UUID): names one run of an operation's workflow id. */
export const RunId = z.string().regex(/^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/, 'a run id is a UUID, e.g. the runId a start answered');

/** GET /v1/operations/:workflowId: without runId, the newest run of the id. */
export const OperationReadQuerySchema = z.object({
  /** read exactly this run (404 when it is not a run of the workflow id) */
  runId: RunId.optional(),
});

/** GET /v1/operations/:workflowId/report */
export const OperationReportQuerySchema = OperationReadQuerySchema.extend({
  /** the run an API start made (its memo `scalegateStartId`): the Web UI's link names its run so, as the run id does not exist before the start */
  start: z.uuid().optional(),
});

/** GET /v1/operations */
export const OperationListQuerySchema = z.object({
  /** operations on this workload: scale:<W>, replan:<W>, rescale:<W>, and any whose ScalegateWorkload is W */
  workload: WorkloadName.optional(),
  /** the workflow type, e.g. scaleOut, scaleIn, applyPlan, stopTheWorldReplan, rescaleOperator, recoverRuntime, retireWorkload */
  kind: z.string().regex(/^[A-Za-z]{1,63}$/, 'a kind is a workflow type, e.g. scaleOut').optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
export type OperationListQuery = z.infer<typeof OperationListQuerySchema>;

/** One run in GET /v1/operations. */
export const OperationSummarySchema = z
  .object({
    workflowId: z.string(),
    runId: z.string(),
    kind: z.string(),
    status: z.enum(OPERATION_STATUSES),
    /** the workload it is about (ScalegateWorkload, else the target of its workflow id), null for none */
    workload: z.string().nullable(),
    startedAt: z.string(),
    closedAt: z.string().nullable(),
    /** this run's evidence page (it carries the run id) */
    reportUrl: z.string(),
    /** this run in the Temporal Web UI */
    uiUrl: z.string(),
  })
  .meta({ title: 'OperationSummary' });

/** GET /v1/operations: past and running runs, newest first. */
export const OperationListSchema = z.object({ operations: z.array(OperationSummarySchema) }).meta({ title: 'OperationList' });

/** POST /v1/workloads/:name/plan */
export const PlanRequestSchema = z.strictObject({ replicas: Replicas });
export type PlanRequest = z.infer<typeof PlanRequestSchema>;

// POST /v1/workloads/:name/scale: ScaleRequestSchema, in ./scale-inputs.ts with the workflows' inputs it shares its fields with

/** GET /v1/ledger */
export const LedgerQuerySchema = z.object({
  workload: z.string().min(1).max(63).optional(),
  kind: z.string().min(1).max(63).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
export type LedgerQuery = z.infer<typeof LedgerQuerySchema>;

/** One ledger row as read back (GET /v1/ledger): every column, null when unset. */
export const LedgerEventSchema = z.object({
  id: z.int(),
  /** ISO-8601 instant */
  at: z.string(),
  kind: z.enum(Object.values(LEDGER_KIND) as [LedgerKind, ...LedgerKind[]]),
  workload: z.string().nullable(),
  tier: z.string().nullable(),
  fromReplicas: z.int().nullable(),
  toReplicas: z.int().nullable(),
  reason: z.string().nullable(),
  /** what the decision used: the request, gates, observations and targets, ... */
  inputs: z.record(z.string(), z.unknown()),
  planId: z.string().nullable(),
  workflowId: z.string().nullable(),
  runId: z.string().nullable(),
  outcome: z.enum(LEDGER_OUTCOMES).nullable(),
  /** baseline, after and comparison of a scale, the drain receipts of a scale-in, ... */
  evidence: z.unknown(),
});
export type LedgerEvent = z.infer<typeof LedgerEventSchema>;

/** GET /v1/ledger: newest first. */
export const LedgerPageSchema = z.object({ events: z.array(LedgerEventSchema) }).meta({ title: 'LedgerPage' });

/** The Idempotency-Key header a start route takes (DESIGN.md §4 "Unambiguous starts"): bounded before any work is done on it. */
export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,200}$/;

/** 202 answer of every route that starts an operation. */
export const StartedOperationSchema = z
  .object({
    /** the operation's target, e.g. scale:<workload>, rescale:<job>, recover:<runtime> */
    workflowId: z.string(),
    runId: z.string(),
    /** the workflow type: scaleOut, scaleIn, applyPlan, stopTheWorldReplan, rescaleOperator, recoverRuntime, retireWorkload */
    kind: z.string(),
    /** the operation in the Temporal Web UI */
    uiUrl: z.string(),
  })
  .meta({ title: 'StartedOperation' });
export type StartedOperation = z.infer<typeof StartedOperationSchema>;

/** A PUT that changed what a replica runs: the rollout it started (202), and the revisions. */
export const RolloutStartedSchema = StartedOperationSchema.extend({
  revision: z.object({ from: z.string(), to: z.string() }),
}).meta({ title: 'RolloutStarted' });

/** PUT /v1/workloads/:name: the workload as saved (201, 200), or the rollout its change of what a replica runs started (202). */
export const PutWorkloadAnswerSchema = z.union([WorkloadSchema, RolloutStartedSchema]);

/** POST /v1/workloads/:name/rollout: how a rollout is run (every field optional; the workload's `rollout` policy else). */
export const RolloutRequestSchema = RolloutPolicySchema.extend({
  reason: z.string().max(500).optional(),
});
export type RolloutRequest = z.infer<typeof RolloutRequestSchema>;

/** GET /healthz */
export const LivenessSchema = z.object({ status: z.literal('ok') }).meta({ title: 'Liveness' });

/** GET /readyz: 200 when both answer, 503 otherwise, with the same body. */
export const ReadinessSchema = z
  .object({ status: z.enum(['ready', 'not-ready']), postgres: z.boolean(), temporal: z.boolean() })
  .meta({ title: 'Readiness' });

const nullableInstant = z.string().nullable();

/** A placed task in GET /v1/state, as its runtime last reported it (null: not reported). */
const StateTaskSchema = z.object({
  taskId: z.string(),
  runtimeId: z.string(),
  index: z.int(),
  state: TaskReportSchema.shape.state.nullable(),
  /** how often its agent restarted it after an exit nobody asked for (DESIGN.md §3 "Supervision") */
  restarts: z.int().nullable(),
  /** restarted too often within its agent's window: not ready, and its workload's scale-out is refused */
  crashLooping: z.boolean(),
  /** how its last run ended, and (while `restarting`) when its agent starts it again */
  lastExit: TaskReportSchema.shape.lastExit.unwrap().nullable(),
  nextRestartAt: z.string().nullable(),
  /** the revision this replica runs (DESIGN.md §3 "Versions and rollouts"); null for a stream job's subtasks */
  revision: z.string().nullable(),
});

/** GET /v1/state (DESIGN.md §6 gives its least shape; more fields are welcome). */
/** The event a NotReady node of a cluster a Kubernetes workload names is recorded as (once per episode), listed in the state's runtimeEvents. */
export const NODE_NOT_READY_EVENT = 'kubernetes.node-not-ready';

export const StateSchema = z
  .object({
    runtimes: z.array(RuntimeSummarySchema),
    workloads: z.array(z.object({
      name: z.string(),
      kind: z.enum(WORKLOAD_KINDS),
      replicas: Replicas,
      /** what operations decided: reconcile and recovery restore it; for replicas `all`, the fresh READY runtimes its selector matches (domain/replicas.ts) */
      desired: z.int().min(0),
      /** the assignments its placement holds */
      placed: z.int(),
      /** the assigned tasks their runtimes report ready */
      ready: z.int(),
      selector: z.record(z.string(), z.string()),
      revision: z.int(),
      /** the revision its replicas are to run (its current spec's); a replica on another is mid-rollout (`tasks[].revision`) */
      runs: z.string().nullable(),
      status: z.enum(['retired', 'pending', 'degraded', 'placed']),
      placement: z.object({ fence: z.int(), generation: z.int(), assignments: z.array(AssignmentSchema) }).nullable(),
      /** each assignment's task as its runtime last reported it, in the placement's order */
      tasks: z.array(StateTaskSchema),
    })),
    unplaced: z.array(UnplacedSchema.extend({ detail: z.string().nullable(), at: z.string() })),
    /**
     * tasks their agents report crash-looping, with the decision of handleCrashLoops (DESIGN.md §3
     * "Supervision"): `move` (off its runtime, through recovery's path), `leave` (running with its
     * backoff, the reason says why), `none` (nothing to decide), null (not decided yet)
     */
    crashLooping: z.array(z.object({
      workload: z.string(),
      taskId: z.string(),
      runtimeId: z.string(),
      restarts: z.int(),
      lastExit: TaskReportSchema.shape.lastExit.unwrap().nullable(),
      nextRestartAt: z.string().nullable(),
      decision: z.enum(['move', 'leave', 'none']).nullable(),
      reason: z.string(),
    })),
    /** running operations, from Temporal's visibility */
    operations: z.array(z.object({
      workflowId: z.string(),
      runId: z.string(),
      kind: z.string(),
      target: z.string(),
      phase: z.string().nullable(),
      startedAt: z.string(),
    })),
    /** false when Temporal did not answer: `operations` is then empty for want of an answer, not because nothing runs */
    operationsAvailable: z.boolean(),
    /** the reconcile loop's last pass: `at` and `skipped` are null until its first pass (just after a start) */
    reconcile: z.object({ at: nullableInstant, skipped: z.boolean().nullable(), passes: z.int(), skips: z.int() }),
    /** when the API and the lease sweeper last showed they were alive, and came back from a gap */
    controlPlane: z.object({
      leaseTtlMs: z.int(),
      api: z.object({ at: z.string(), resumedAt: z.string() }).nullable(),
      leaseSweeper: z.object({ at: z.string(), resumedAt: z.string() }).nullable(),
    }),
    /** the newest runtime events: declared LOST (by whom), mass expiries, crash loops, a cluster's NotReady nodes (kubernetes.node-not-ready) */
    runtimeEvents: z.array(z.object({ id: z.int(), at: z.string(), type: z.string(), subject: z.string(), detail: z.record(z.string(), z.unknown()) })),
  })
  .meta({ title: 'State' });

/** POST /v1/workloads/:name/plan (201): a stored plan, applied with POST /v1/plans/:id/apply. */
export const PlanSchema = z
  .object({
    id: z.string(),
    createdAt: z.string(),
    /** the workflow that applied it, once applied */
    appliedWorkflow: z.string().nullable(),
    workload: z.string(),
    kind: z.enum(WORKLOAD_KINDS),
    fromReplicas: z.int(),
    replicas: Replicas,
    /** the assignments the plan leads to */
    target: z.array(AssignmentSchema),
    generation: z.int(),
    starts: z.array(AssignmentSchema),
    stops: z.array(AssignmentSchema),
    moves: z.array(z.object({ from: AssignmentSchema, to: AssignmentSchema })),
    warnings: z.array(z.string()),
    evidenceRequired: z.array(z.string()),
    unplaced: UnplacedSchema.nullable(),
    /** what it was computed on: applying it after either moved is refused (409 stale-plan) */
    basis: z.object({ registryRevision: z.int(), placementFence: z.int() }),
  })
  .meta({ title: 'Plan' });

/** GET /v1/operations/:workflowId. Scale operations spread their status out; every other kind's is `result`. */
export const OperationViewSchema = z
  .object({
    workflowId: z.string(),
    runId: z.string(),
    kind: z.string(),
    status: z.string().describe('running, completed, refused (gates failed, nothing changed), compensated (aborted and replanned), failed or cancelled'),
    /** this run's evidence page: it carries the run id, so it opens this run however many follow */
    reportUrl: z.string(),
    temporalStatus: z.string(),
    phase: z.unknown().describe('the phase it is in or ended in (null when it reports none)'),
    startedAt: z.string(),
    closedAt: nullableInstant,
    gates: z.unknown().optional(),
    evidenceGap: z.unknown().optional(),
    plan: z.unknown().optional(),
    evidence: z.object({ baseline: z.unknown(), after: z.unknown(), comparison: z.unknown() }).optional(),
    approval: z.unknown().optional(),
    scaleIn: z.unknown().optional(),
    compensation: z.unknown().optional(),
    tierRules: z.unknown().optional(),
    /** scaleOut: when its soak ends (ISO-8601; null outside the soak) */
    soakEndsAt: nullableInstant.optional(),
    /** a stepped scaleOut: each size, its evidence after, and its verdict (null: one step) */
    steps: z.unknown().optional(),
    /** a Kubernetes workload's scale: the object, victims, marks, acknowledgements, forced and deleted pods (null: an agent workload) */
    kubernetes: z.unknown().optional(),
    /** other kinds: the workflow's status (rescaleOperator, recoverRuntime: protocol/operation-status.ts, by kind) or its result */
    result: z.unknown().optional(),
    /** a failed operation: its innermost cause */
    failure: z.string().nullable(),
  })
  .meta({ title: 'Operation' });

/** POST /v1/operations/:workflowId/approve: the scale operation's status after the approval. */
export const ScaleStatusSchema = ScaleOperationStatusSchema.meta({ title: 'ScaleStatus' });

/** POST /v1/operations/:workflowId/abort (202): the abort signal was sent. */
export const AbortAnswerSchema = z.object({ workflowId: z.string(), aborting: z.literal(true) }).meta({ title: 'AbortAnswer' });

/** GET /openapi.json: an OpenAPI 3.1 document. */
export const OpenApiDocumentSchema = z
  .object({ openapi: z.string(), info: z.object({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) })
  .meta({ title: 'OpenApiDocument' });
