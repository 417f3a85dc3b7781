// Placement changes: apply a plan, the stop-the-world replan (the one compensation), retire, and
// the reconcile loop. Deterministic: only @temporalio/workflow, zod and domain/.
import {
  ApplicationFailure,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  ParentClosePolicy,
  proxyActivities,
  sleep,
  startChild,
  workflowInfo,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { createActivities } from '../activities';
import type { Plan } from '../domain/plan';
import { Replicas, WorkloadName } from '../domain/schemas';
import { failureMessage, parseInput, profiles, trackOperation } from './operation';

type Activities = ReturnType<typeof createActivities>;
const store = proxyActivities<Activities>(profiles.storeWrite);
const long = proxyActivities<Activities>(profiles.longDrain);

export const DEFAULT_CONVERGE_TIMEOUT_MS = 60_000;

export interface PlacementOutcome {
  workload: string;
  fence: number;
  generation: number;
  started: string[];
  stopped: string[];
}

const refs = (assignments: Plan['target']) => assignments.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId }));

/**
 * Fenced write, then make-before-break: every target task is PUT (new ones start, survivors take
 * their new partitions in place), the new ones must become ready, then the removed ones drain.
 * `onCommitted` runs right after the write, so callers know from when a failure needs compensation.
 */
export async function applyPlacement(
  plan: Plan,
  options: { convergeTimeoutMs: number; onPhase: (phase: string) => void; onCommitted?: () => void },
): Promise<PlacementOutcome> {
  const { workflowId } = workflowInfo();
  options.onPhase('writing-placement');
  const placement = await store.commitPlacement({
    workload: plan.workload, basis: plan.basis, assignments: plan.target, generation: plan.generation,
    unplaced: plan.unplaced, writer: workflowId,
  });
  options.onCommitted?.();
  const workload = await store.loadWorkload(plan.workload);
  if (!workload) throw ApplicationFailure.create({ type: 'not-found', message: `workload ${plan.workload} vanished`, nonRetryable: true });

  options.onPhase('starting-tasks');
  await long.startTasks({
    workload: plan.workload, kind: workload.kind, spec: workload.spec, placementFence: placement.fence,
    generation: placement.generation, assignments: placement.assignments,
  });
  const fresh = [...plan.starts, ...plan.moves.map((m) => m.to)];
  options.onPhase('converging');
  await long.awaitTasksReady({ tasks: refs(fresh), timeoutMs: options.convergeTimeoutMs });
  const removed = [...plan.stops, ...plan.moves.map((m) => m.from)];
  if (removed.length) {
    options.onPhase('stopping-removed');
    await long.stopTasks({ tasks: refs(removed) });
  }
  return {
    workload: plan.workload, fence: placement.fence, generation: placement.generation,
    started: fresh.map((a) => a.taskId), stopped: removed.map((a) => a.taskId),
  };
}

export const ReplanInputSchema = z.object({
  workload: WorkloadName,
  replicas: Replicas,
  reason: z.string().min(1).max(500),
  /** the workflow whose abort led here */
  cause: z.string().max(300).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});
export type ReplanInput = z.input<typeof ReplanInputSchema>;

/**
 * The one compensation: stop every task of the workload, recompute placement at the requested
 * size in a new generation, redeploy, converge, ledger. Hot when possible, correct always.
 */
export async function stopTheWorldReplan(rawInput: unknown): Promise<PlacementOutcome> {
  const input = parseInput(ReplanInputSchema, rawInput, 'stopTheWorldReplan');
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('replan', input.workload, `replan ${input.workload} → ${input.replicas}`);
  const before = await store.loadPlacement(input.workload);
  try {
    op.enter('stopping-the-world');
    const stopped = await long.stopAllTasksOfWorkload({ workload: input.workload });
    op.enter('planning');
    const plan = await store.preparePlan({ workload: input.workload, replicas: input.replicas, newGeneration: true });
    const outcome = await applyPlacement(plan, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p) });
    await store.appendLedger({
      kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: plan.target.length,
      reason: input.reason, inputs: { cause: input.cause ?? null, stoppedTasks: stopped.length, generation: outcome.generation },
      planId: plan.id, workflowId, runId, outcome: plan.unplaced ? 'degraded' : 'completed',
    });
    op.enter('done');
    return { ...outcome, stopped: stopped.map((t) => t.taskId) };
  } catch (error) {
    await store.appendLedger({
      kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: null,
      reason: input.reason, inputs: { cause: input.cause ?? null }, workflowId, runId, outcome: 'failed',
      evidence: { error: failureMessage(error) },
    });
    throw error;
  }
}

/** Runs the replan as a child (id replan:<workload>) and waits for it. */
export function compensate(workload: string, replicas: Plan['replicas'], reason: string, convergeTimeoutMs?: number) {
  return executeChild(stopTheWorldReplan, {
    workflowId: `replan:${workload}`,
    args: [{ workload, replicas, reason, cause: workflowInfo().workflowId, convergeTimeoutMs }],
    staticSummary: `replan ${workload} → ${replicas} (${reason.slice(0, 80)})`,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
  });
}

export const ApplyPlanInputSchema = z.object({
  planId: z.string().min(1),
  reason: z.string().max(500).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});

/** Applies a stored plan (POST /v1/plans/:id/apply, and the reconcile loop). */
export async function applyPlan(rawInput: unknown): Promise<PlacementOutcome & { compensated: boolean }> {
  const input = parseInput(ApplyPlanInputSchema, rawInput, 'applyPlan');
  const { workflowId, runId } = workflowInfo();
  const plan = await store.loadPlan(input.planId);
  const op = trackOperation('apply', plan.workload, `apply plan ${plan.workload} ${plan.fromReplicas} → ${plan.target.length}`);
  let committed = false;
  try {
    const outcome = await applyPlacement(plan, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p), onCommitted: () => { committed = true; } });
    await store.appendLedger({
      kind: 'apply', workload: plan.workload, fromReplicas: plan.fromReplicas, toReplicas: plan.target.length,
      reason: input.reason ?? 'plan applied', inputs: { warnings: plan.warnings, basis: plan.basis },
      planId: plan.id, workflowId, runId, outcome: plan.unplaced ? 'degraded' : 'completed',
    });
    op.enter('done');
    return { ...outcome, compensated: false };
  } catch (error) {
    if (!committed || isCancellation(error)) throw error;
    const reason = `apply failed after the placement write: ${failureMessage(error)}`;
    await store.appendLedger({
      kind: 'apply', workload: plan.workload, fromReplicas: plan.fromReplicas, toReplicas: plan.target.length, reason,
      planId: plan.id, workflowId, runId, outcome: 'compensated',
    });
    op.enter('compensating');
    const outcome = await compensate(plan.workload, plan.replicas, reason, input.convergeTimeoutMs);
    op.enter('compensated');
    return { ...outcome, compensated: true };
  }
}

export const RetireInputSchema = z.object({ workload: WorkloadName, reason: z.string().max(500).optional() });

/** DELETE /v1/workloads/:name: stop every task, empty the placement, ledger. */
export async function retireWorkload(rawInput: unknown): Promise<{ stopped: string[] }> {
  const input = parseInput(RetireInputSchema, rawInput, 'retireWorkload');
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('retire', input.workload, `retire ${input.workload}`);
  const before = await store.loadPlacement(input.workload);
  op.enter('stopping-tasks');
  const stopped = await long.stopAllTasksOfWorkload({ workload: input.workload });
  op.enter('clearing-placement');
  await store.clearPlacement({ workload: input.workload, writer: workflowId });
  await store.appendLedger({
    kind: 'retire', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: 0,
    reason: input.reason ?? 'retired', workflowId, runId, outcome: 'completed',
  });
  op.enter('done');
  return { stopped: stopped.map((t) => t.taskId) };
}

export const ReconcileInputSchema = z.object({
  intervalMs: z.int().min(100).max(3_600_000).default(15_000),
  /** passes before continue-as-new keeps the history small */
  passesPerRun: z.int().min(1).max(10_000).default(200),
});

/**
 * The reconcile loop: a durable timer workflow (id `reconcile`). Each pass places pending
 * workloads, grows `all` workloads onto new matching runtimes and retries unplaced shortfalls,
 * each through applyPlan under the workload's `scale:<name>` id (a busy workload waits a pass).
 */
export async function reconcile(rawInput: unknown = {}): Promise<never> {
  const input = parseInput(ReconcileInputSchema, rawInput ?? {}, 'reconcile');
  const op = trackOperation('reconcile', null, 'reconcile loop');
  for (let pass = 0; pass < input.passesPerRun; pass++) {
    op.enter('reconciling');
    let result: Awaited<ReturnType<Activities['reconcilePass']>>;
    try {
      result = await store.reconcilePass();
    } catch (error) {
      // A loop that must run forever outlives a failed pass: note it and try again next interval.
      log.warn('reconcile pass failed', { error: failureMessage(error) });
      op.enter('idle (last pass failed)');
      await sleep(input.intervalMs);
      continue;
    }
    for (const { workload, planId } of result.planIds) {
      try {
        await startChild(applyPlan, {
          workflowId: `scale:${workload}`,
          args: [{ planId, reason: 'reconcile' }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          staticSummary: `reconcile ${workload}`,
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
      }
    }
    op.enter(result.skipped ? 'idle (skipped)' : 'idle');
    await sleep(input.intervalMs);
  }
  return continueAsNew<typeof reconcile>(input);
}
