// The inputs of the operations a scale runs through (scaleOut, scaleIn, applyPlan, the replan that
// compensates them, recoverRuntime), checked by the worker rather than inside the workflow: a
// workflow run evaluates every module it imports again (the SDK's per-run module isolation), and
// building zod and these schemas was a fifth of a scale-out's workflow-thread CPU (bench/fleet's
// profile, docs/workflows.md "Input"). The workflow asks the `checkWorkflowInput` local activity
// (activities/workflow-input.ts), which runs this module once per worker process; runs recorded
// before patch input-checked-by-worker check it inline, requiring this module lazily.
// The workflows import only this module's types (test/unit/workflow-imports.test.ts).
import { z } from 'zod';
import { DEFAULT_CONVERGE_TIMEOUT_MS, REPLAN_REASON_MAX } from './bounds';
import { checkInputWith, type InputCheck as CheckOf } from './issues';
import { Replicas, RuntimeId, WorkloadName } from './names';
import { ScaleInInputSchema, ScaleOutInputSchema } from './scale-inputs';

/** stopTheWorldReplan's input: the one compensation, and POST /v1/workloads/:name/replan. */
export const ReplanInputSchema = z.object({
  workload: WorkloadName,
  /** the size to replan at; a stream job's operators scale proportionally to it (default: as defined) */
  replicas: Replicas.optional(),
  /** stream jobs: the parallelism of some operators, by operator id (the others keep theirs) */
  parallelism: z.record(z.string().max(63), z.int().min(1).max(32768)).optional(),
  reason: z.string().min(1).max(REPLAN_REASON_MAX),
  /** the workflow whose abort led here */
  cause: z.string().max(300).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});
export type ReplanInput = z.input<typeof ReplanInputSchema>;

/** recoverRuntime's input. */
export const RecoverRuntimeInputSchema = z.strictObject({
  runtime: RuntimeId,
  reason: z.string().min(1).max(500).default('requested'),
  /** who asked: the lease sweeper (a lease ran out) or an operator */
  by: z.enum(['operator', 'lease-sweeper']).default('operator'),
  /**
   * The fence the lease sweeper declared the runtime LOST under. A runtime that is not LOST any more
   * registered again since: it came back, and there is nothing to recover.
   */
  expectedFence: z.int().min(1).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});
export type RecoverRuntimeInput = z.input<typeof RecoverRuntimeInputSchema>;

/** applyPlan's input. */
export const ApplyPlanInputSchema = z.object({
  planId: z.string().min(1),
  reason: z.string().max(500).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});

/** The workflows whose input the worker checks, each with its schema. */
export const CHECKED_INPUT_SCHEMAS = {
  scaleOut: ScaleOutInputSchema,
  scaleIn: ScaleInInputSchema,
  applyPlan: ApplyPlanInputSchema,
  stopTheWorldReplan: ReplanInputSchema,
  recoverRuntime: RecoverRuntimeInputSchema,
} as const;
export type CheckedWorkflow = keyof typeof CHECKED_INPUT_SCHEMAS;
/** A checked workflow's input as its run uses it: defaults filled in. */
export type CheckedInput<W extends CheckedWorkflow> = z.output<(typeof CHECKED_INPUT_SCHEMAS)[W]>;

/** The check's answer: plain JSON, as a local activity's result is recorded. */
export type InputCheck<W extends CheckedWorkflow> = CheckOf<CheckedInput<W>>;

/** Checks `input` against `workflowType`'s schema; a refusal's message names each bad field. */
export function checkWorkflowInput<W extends CheckedWorkflow>(workflowType: W, input: unknown): InputCheck<W> {
  const schema: z.ZodType | undefined = Object.hasOwn(CHECKED_INPUT_SCHEMAS, workflowType) ? CHECKED_INPUT_SCHEMAS[workflowType] : undefined;
  if (!schema) return { ok: false, message: `${String(workflowType)}: no input schema: the worker checks only ${Object.keys(CHECKED_INPUT_SCHEMAS).join(', ')}` };
  return checkInputWith(schema, input, workflowType) as InputCheck<W>;
}
