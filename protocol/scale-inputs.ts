// One schema per scale request (issue 36 item 3): each field of a scale, with its bounds, is
// declared once here, and three schemas are built from that one table: the body of
// POST /v1/workloads/:name/scale (every option optional, so a field the chosen operation does not
// take can be named in its 422: domain/scale-choice.ts), and the inputs of the scaleOut and scaleIn
// workflows (their defaults). The workflows import only its types: the worker checks their input
// (protocol/workflow-inputs.ts).
import { z } from 'zod';
import { DEFAULT_CONVERGE_TIMEOUT_MS } from './bounds';
import { ACCEPTABLE_UNKNOWNS, LIMITS, ScaleReplicas, StepsSchema, WorkloadName } from './names';

const HOUR_MS = 3_600_000;

export { DEFAULT_CONVERGE_TIMEOUT_MS } from './bounds';

/** Each option of a scale, once: its type and bounds (the request makes it optional, a workflow gives its default). */
export const SCALE_FIELDS = {
  approval: z.enum(['auto', 'manual']),
  reason: z.string().max(500),
  /** how long to watch the new size before comparing with the baseline */
  soakMs: z.int().min(0).max(HOUR_MS),
  /** how long the new tasks may take to be ready */
  convergeTimeoutMs: z.int().min(1000).max(HOUR_MS),
  /** scale-in: how long each removed replica may take to drain (a duration) */
  drainTimeoutMs: z.int().min(100).max(HOUR_MS),
  /** scale-in: most partitions one replica may own after consolidation */
  perInstanceLimit: z.int().min(1).max(LIMITS.partitions),
  /** scale-in: go past a tier's minReplicas or an open change window, saying why (the ledger records it) */
  override: z.strictObject({ reason: z.string().min(1).max(500) }),
  /** scale-in of a Kubernetes workload: lower the replicas even if a victim did not acknowledge its drain by the deadline (the ledger records it) */
  force: z.boolean(),
  /** scale-out: the sizes to grow through, smallest first (domain/steps.ts), each compared before the next */
  steps: StepsSchema,
  /** scale-out: gate rows whose unknowns this request accepts (the gate row and the ledger say so) */
  accept: z.array(z.enum(ACCEPTABLE_UNKNOWNS)).max(ACCEPTABLE_UNKNOWNS.length),
  /** a stored plan to apply (POST /v1/plans/:id/apply): the same gates and comparison; a moved basis refuses it as stale */
  planId: z.string().min(1).max(200),
} as const;
const f = SCALE_FIELDS;

/** POST /v1/workloads/:name/scale */
export const ScaleRequestSchema = z.strictObject({
  replicas: ScaleReplicas,
  approval: f.approval.default('auto'),
  reason: f.reason.optional(),
  soakMs: f.soakMs.optional(),
  convergeTimeoutMs: f.convergeTimeoutMs.optional(),
  drainTimeoutMs: f.drainTimeoutMs.optional(),
  perInstanceLimit: f.perInstanceLimit.optional(),
  override: f.override.optional(),
  force: f.force.optional(),
  steps: f.steps.optional(),
  accept: f.accept.optional(),
});
export type ScaleRequest = z.input<typeof ScaleRequestSchema>;

/** The scaleOut workflow's input. */
export const ScaleOutInputSchema = z.object({
  workload: WorkloadName,
  replicas: z.int().min(1, { message: 'replicas must be an integer ≥ 1' }).max(LIMITS.replicas),
  approval: f.approval.default('auto'),
  reason: f.reason.default('requested'),
  soakMs: f.soakMs.default(5_000),
  convergeTimeoutMs: f.convergeTimeoutMs.default(DEFAULT_CONVERGE_TIMEOUT_MS),
  /** a manual approval not given in time rejects the change */
  approvalTimeoutMs: z.int().min(1000).max(7 * 24 * HOUR_MS).default(24 * HOUR_MS),
  planId: f.planId.optional(),
  steps: f.steps.optional(),
  accept: f.accept.optional(),
}).refine((input) => input.planId === undefined || input.steps === undefined, {
  message: 'steps plan each size afresh: they do not apply a reviewed plan (planId); give one or the other', path: ['steps'],
});
export type ScaleOutInput = z.input<typeof ScaleOutInputSchema>;

/** The scaleIn workflow's input. */
export const ScaleInInputSchema = z.object({
  workload: WorkloadName,
  replicas: z.int().min(1, { message: 'replicas must be an integer ≥ 1 (0 is a retire: DELETE the workload)' }).max(LIMITS.replicas),
  reason: f.reason.default('requested'),
  drainTimeoutMs: f.drainTimeoutMs.default(60_000),
  /** how long the reduced placement runs before the after evidence is taken (0: at once); throughput and latency are tested over it */
  soakMs: f.soakMs.default(0),
  /** default ceil(partitions / replicas) */
  perInstanceLimit: f.perInstanceLimit.optional(),
  minReplicas: z.int().min(1).max(LIMITS.replicas).default(1),
  convergeTimeoutMs: f.convergeTimeoutMs.default(DEFAULT_CONVERGE_TIMEOUT_MS),
  /** its stops are the victims, drained like any scale-in */
  planId: f.planId.optional(),
  force: f.force.default(false),
  override: f.override.optional(),
});
export type ScaleInInput = z.input<typeof ScaleInInputSchema>;

/** The request's options each operation takes (the others are refused, named: domain/scale-choice.ts optionsNotTaken). */
export const SCALE_OPTIONS_TAKEN = {
  scaleOut: ['soakMs', 'convergeTimeoutMs', 'steps', 'accept'],
  scaleIn: ['soakMs', 'convergeTimeoutMs', 'drainTimeoutMs', 'perInstanceLimit', 'override', 'force'],
  stopTheWorldReplan: ['convergeTimeoutMs'],
} as const;
