// The status of each operation kind that has one (its workflow's `status` query, and its result
// once it ended), discriminated by `kind`, the workflow type: what GET /v1/operations/:id, the CLI
// and the tests read, without sniffing shapes. The workflows' own types (workflows/status.ts) are
// checked against these at compile time; what the domain computes inside (gates, plans, evidence,
// decisions' details) stays open here (unknown), its top level is typed.
import { z } from 'zod';
import { WORKLOAD_KINDS } from './workload';

const instant = z.string();

export const ScaleOperationStatusSchema = z.object({
  kind: z.enum(['scaleOut', 'scaleIn']),
  workload: z.string(),
  phase: z.string(),
  outcome: z.enum(['running', 'completed', 'refused', 'compensated', 'rejected', 'cancelled', 'failed']),
  fromReplicas: z.int().nullable(),
  toReplicas: z.int(),
  gates: z.unknown(),
  evidenceGap: z.string().nullable(),
  plan: z.unknown(),
  baseline: z.unknown(),
  after: z.unknown(),
  comparison: z.unknown(),
  approval: z.object({ mode: z.enum(['auto', 'manual']), decision: z.enum(['approved', 'rejected']).nullable(), by: z.string().nullable() }),
  scaleIn: z.unknown(),
  compensation: z.unknown(),
  soakEndsAt: instant.nullable().optional(),
  steps: z.array(z.object({ size: z.int(), outcome: z.enum(['pending', 'good', 'regression']), after: z.unknown(), reasons: z.array(z.string()) })).nullable().optional(),
  tierRules: z.unknown().optional(),
  kubernetes: z.unknown().optional(),
  error: z.string().nullable(),
});

export const RescaleStatusSchema = z.object({
  kind: z.literal('rescaleOperator'),
  job: z.string(),
  operator: z.string(),
  from: z.int().nullable(),
  to: z.int(),
  phase: z.string(),
  outcome: z.enum(['running', 'completed', 'replanned', 'compensated', 'cancelled', 'refused', 'failed']),
  hot: z.boolean().nullable(),
  reason: z.string().nullable(),
  checkpoint: z.number().nullable(),
  added: z.array(z.string()),
  retired: z.array(z.string()),
  retiredCounts: z.record(z.string(), z.record(z.string(), z.number())),
  compensation: z.object({
    reason: z.string(), outcome: z.unknown(), joined: z.string().nullable(),
    /** the operator's parallelism a joined replan applied, where it is not the requested one (the rescale is then failed or compensated) */
    applied: z.int().nullable().optional(),
  }).nullable(),
  error: z.string().nullable(),
});

export const RecoveryStatusSchema = z.object({
  kind: z.literal('recoverRuntime'),
  runtime: z.string(),
  by: z.enum(['operator', 'lease-sweeper']),
  reason: z.string(),
  phase: z.string(),
  outcome: z.enum(['running', 'completed', 'degraded', 'not-needed', 'compensated', 'rejected', 'cancelled', 'failed']),
  lost: z.object({ outcome: z.enum(['declared', 'already-lost', 'came-back']), fence: z.int(), lostAt: instant.nullable() }).nullable(),
  decisions: z.array(z.object({
    /** the workload's kind, and its assignments before and after the recovery */
    workload: z.string(), kind: z.enum(WORKLOAD_KINDS), fromReplicas: z.int(), toReplicas: z.int(), phase: z.string(), planId: z.string().nullable(), committed: z.boolean(), attempts: z.int(), error: z.string().nullable(),
    applied: z.enum(['pending', 'converged', 'skipped', 'failed', 'cancelled', 'compensated', 'replanned']),
  })),
  compensation: z.object({ reason: z.string(), workloads: z.array(z.object({ workload: z.string(), replicas: z.unknown(), outcome: z.unknown() })) }).nullable(),
  error: z.string().nullable(),
  timings: z.object({ startedAt: instant, lostAt: instant.nullable(), decidedAt: instant.nullable(), convergedAt: instant.nullable(), endedAt: instant.nullable() }),
});

/** A rollout's step: the replicas it replaced (old task → new task), and how it was judged. */
export const RolloutStepSchema = z.object({
  /** 'canary' for the first step, else 'batch' */
  role: z.enum(['canary', 'batch']),
  replaced: z.array(z.object({ index: z.int(), runtimeId: z.string(), from: z.string(), to: z.string().nullable(), fromRevision: z.string() })),
  outcome: z.enum(['pending', 'good', 'regression', 'failed', 'rolled-back']),
  reasons: z.array(z.string()),
});

export const RolloutStatusSchema = z.object({
  kind: z.literal('rollout'),
  workload: z.string(),
  phase: z.string(),
  outcome: z.enum(['running', 'completed', 'refused', 'compensated', 'cancelled', 'failed']),
  /** the revision the replicas ran (the baseline's), and the one rolled out */
  fromRevision: z.string().nullable(),
  toRevision: z.string(),
  replicas: z.int(),
  gates: z.unknown(),
  evidenceGap: z.string().nullable(),
  baseline: z.unknown(),
  after: z.unknown(),
  comparison: z.unknown(),
  steps: z.array(RolloutStepSchema),
  soakEndsAt: instant.nullable(),
  compensation: z.object({ reason: z.string(), restored: z.string().nullable(), rolledBack: z.array(z.string()), replanned: z.boolean() }).nullable(),
  error: z.string().nullable(),
});

/** One status per operation kind that has one, told apart by `kind`. */
export const OperationStatusSchema = z.discriminatedUnion('kind', [ScaleOperationStatusSchema, RescaleStatusSchema, RecoveryStatusSchema, RolloutStatusSchema]);
export type OperationStatusView = z.infer<typeof OperationStatusSchema>;
