// Bodies, params and queries of the HTTP API (DESIGN.md §6) that are not a workload definition or
// a runtime message. The routes validate with them, the CLI builds its requests from them.
import { z } from 'zod';
import { LIMITS, Replicas, RuntimeId, WorkloadName } from './workload';

export const WorkloadParamsSchema = z.object({ name: WorkloadName });
export const RuntimeParamsSchema = z.object({ id: RuntimeId });
export const PlanParamsSchema = z.object({ id: z.string().min(1).max(100).regex(/^[A-Za-z0-9._-]+$/, 'plan ids are [A-Za-z0-9._-]') });
export const OperationParamsSchema = z.object({
  workflowId: z.string().min(1).max(300).regex(/^[^\u0000-\u001f\u007f]+$/, 'workflow ids have no control characters'),
});

/** POST /v1/workloads/:name/plan */
export const PlanRequestSchema = z.strictObject({ replicas: Replicas });
export type PlanRequest = z.infer<typeof PlanRequestSchema>;

/** POST /v1/workloads/:name/scale */
export const ScaleRequestSchema = z.strictObject({
  replicas: Replicas,
  approval: z.enum(['auto', 'manual']).default('auto'),
  reason: z.string().max(500).optional(),
  soakMs: z.int().min(0).max(3_600_000).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).optional(),
  /** scale-in: how long each removed replica may take to drain (a duration) */
  drainTimeoutMs: z.int().min(100).max(3_600_000).optional(),
  /** scale-in: most partitions one replica may own after consolidation */
  perInstanceLimit: z.int().min(1).max(LIMITS.partitions).optional(),
  /** scale-in: go past a tier's minReplicas or an open change window, saying why (the ledger records it) */
  override: z.strictObject({ reason: z.string().min(1).max(500) }).optional(),
});
export type ScaleRequest = z.input<typeof ScaleRequestSchema>;

/** GET /v1/ledger */
export const LedgerQuerySchema = z.object({
  workload: z.string().min(1).max(63).optional(),
  kind: z.string().min(1).max(63).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
export type LedgerQuery = z.infer<typeof LedgerQuerySchema>;

/** 202 answer of every route that starts an operation. */
export interface StartedOperation {
  workflowId: string;
  runId: string;
  kind: string;
  uiUrl: string;
}
