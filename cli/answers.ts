// What the CLI reads of the API's answers. Every answer is parsed with the schema its route declares
// (protocol/; GET /openapi.json is built from the same declarations), so the renderers are typed
// and an answer of another shape is said, never printed half. An operation's view leaves open
// (`unknown`) what the domain computes inside it: gates, plan, evidence, the scale-in's victims,
// the Kubernetes handshake, each kind's result. The few fields of them the CLI shows are declared
// here, from the workflows' status types (workflows/scale-operation.ts, workflows/kubernetes-runtime.ts,
// domain/gates.ts, domain/evidence.ts) and protocol/operation-status.ts.
import { z } from 'zod';
import {
  AssignmentSchema, describeIssues, OperationViewSchema, PlanSchema, RecoveryStatusSchema, RescaleStatusSchema, RolloutStatusSchema, ScaleOperationStatusSchema,
} from '../protocol';
import { TierViewSchema } from '../protocol/tiers';

/**
 * An answer its route's schema does not allow (the API is likely another version than this CLI):
 * said, exit 1, never rendered, and never waited out as a passing hiccup (--wait stops on it).
 */
export class UnreadableAnswer extends Error {
  constructor(call: string, api: string, error: z.ZodError) {
    const issues = describeIssues(error);
    super(`the scalegate API at ${api} answered ${call} with what this CLI cannot read (${issues.length > 500 ? `${issues.slice(0, 499)}…` : issues}): is it another version of scalegate?`);
    this.name = 'UnreadableAnswer';
  }
}

/** An evidence comparison as the CLI shows it (domain/evidence.ts `EvidenceComparison`). */
const ComparisonSchema = z.object({ verdict: z.string(), reasons: z.array(z.string()) });

/** The `result` of the kinds whose status protocol/operation-status.ts declares. */
const STATUS_OF_KIND = {
  rescaleOperator: RescaleStatusSchema.extend({
    // workflows/rescale-operator.ts `RescaleStatus`: the replan that compensated, as far as it got
    compensation: RescaleStatusSchema.shape.compensation.unwrap().extend({
      outcome: z.object({
        restoredFrom: z.number().nullable(),
        parallelism: z.object({ from: z.record(z.string(), z.number()), to: z.record(z.string(), z.number()) }).nullable(),
        generation: z.number().nullable(),
      }).nullable(),
    }).nullable(),
  }),
  recoverRuntime: RecoveryStatusSchema,
  rollout: RolloutStatusSchema.extend({ comparison: ComparisonSchema.nullable() }),
};
type KindWithStatus = keyof typeof STATUS_OF_KIND;
export type StatusOfKind<K extends KindWithStatus> = z.output<(typeof STATUS_OF_KIND)[K]>;

/** A Kubernetes workload's scale (workflows/kubernetes-runtime.ts `KubernetesStatus`). */
const KubernetesStatusSchema = z.object({
  object: z.string(),
  resourceVersion: z.string(),
  conflicts: z.number(),
  victims: z.array(z.string()),
  reasons: z.record(z.string(), z.string()),
  marked: z.array(z.string()),
  acknowledged: z.array(z.string()),
  missing: z.array(z.string()),
  forced: z.array(z.string()),
  unmarked: z.array(z.string()),
  deleted: z.array(z.string()),
});

/**
 * GET /v1/operations/:workflowId as the CLI reads it: the protocol's view, with the open parts it
 * shows typed; a `result` of a kind with a status schema is checked against it (statusOf reads it).
 */
export const OperationAnswerSchema = OperationViewSchema.extend({
  phase: z.string().nullable(),
  gates: z.object({ passed: z.boolean(), rows: z.array(z.object({ gate: z.string(), passed: z.boolean(), detail: z.string() })) }).nullable().optional(),
  evidenceGap: z.string().nullable().optional(),
  plan: PlanSchema.pick({ id: true, starts: true, stops: true, moves: true, target: true, warnings: true }).nullable().optional(),
  evidence: z.object({ baseline: z.unknown(), after: z.unknown(), comparison: ComparisonSchema.nullable() }).optional(),
  approval: ScaleOperationStatusSchema.shape.approval.nullable().optional(),
  scaleIn: z.object({ victims: z.array(AssignmentSchema), reasons: z.record(z.string(), z.string()) }).nullable().optional(),
  compensation: z.object({ reason: z.string(), replicas: z.number(), outcome: z.object({ fence: z.number(), generation: z.number() }).nullable() }).nullable().optional(),
  kubernetes: KubernetesStatusSchema.nullable().optional(),
}).superRefine((view, ctx) => {
  if (!Object.hasOwn(STATUS_OF_KIND, view.kind) || view.result === null || view.result === undefined) return;
  const checked = STATUS_OF_KIND[view.kind as KindWithStatus].safeParse(view.result);
  for (const issue of checked.error?.issues ?? []) ctx.addIssue({ code: 'custom', path: ['result', ...issue.path], message: issue.message });
});
export type OperationAnswer = z.output<typeof OperationAnswerSchema>;

/** The status an operation of `kind` carries as its `result` (OperationAnswerSchema checked it), else null. */
export function statusOf<K extends KindWithStatus>(o: Pick<OperationAnswer, 'kind' | 'result'>, kind: K): StatusOfKind<K> | null {
  return o.kind === kind && o.result !== null && o.result !== undefined ? (o.result as StatusOfKind<K>) : null;
}

/** A load observation an autoscaler keeps (workflows/autoscaler.ts `Observation`). */
const ObservationSchema = z.object({
  seq: z.number(),
  atMs: z.number(),
  qps: z.number().optional(),
  activeUsers: z.number().optional(),
  cpuUtilization: z.number().optional(),
  queueDepth: z.number().optional(),
  pulled: z.string().optional(),
});
export type Observation = z.output<typeof ObservationSchema>;

/** GET /v1/tiers/:tier as the CLI reads it: the protocol's view, with the observations and the last decision it shows typed. */
export const TierAnswerSchema = TierViewSchema.extend({
  observations: z.array(ObservationSchema),
  lastDecision: TierViewSchema.shape.lastDecision.unwrap().extend({
    decision: z.string().nullable(),
    desiredPerSignal: z.array(z.object({ signal: z.string(), observed: z.number(), desired: z.number() })),
  }).nullable(),
});
export type TierAnswer = z.output<typeof TierAnswerSchema>;
