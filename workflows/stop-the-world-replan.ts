// stopTheWorldReplan (DESIGN.md §4.5): the one compensation. Every abort path ends here as a child.
import { executeChild, proxyActivities, workflowInfo, WorkflowIdReusePolicy } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import type { Plan } from '../domain/plan';
import { Replicas, WorkloadName } from '../protocol';
import { applyPlacement, DEFAULT_CONVERGE_TIMEOUT_MS, type PlacementOutcome } from './apply-placement';
import { failureMessage, parseInput, profiles, trackOperation } from './operation';

const store = proxyActivities<Activities>(profiles.storeWrite);
const long = proxyActivities<Activities>(profiles.longDrain);

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
  const before = await store.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
  try {
    op.enter('stopping-the-world');
    const stopped = await long.stopAllTasksOfWorkload.executeWithOptions({ summary: `stop the world: every task of ${input.workload}` }, [{ workload: input.workload }]);
    op.enter('planning');
    const plan = await store.preparePlan.executeWithOptions(
      { summary: `plan ${input.workload} → ${input.replicas} in a new generation` },
      [{ workload: input.workload, replicas: input.replicas, newGeneration: true }],
    );
    const outcome = await applyPlacement(plan, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p) });
    await store.appendLedger.executeWithOptions({ summary: `ledger: replan ${input.workload} ${plan.unplaced ? 'degraded' : 'completed'}` }, [{
      kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: plan.target.length,
      reason: input.reason, inputs: { cause: input.cause ?? null, stoppedTasks: stopped.length, generation: outcome.generation },
      planId: plan.id, workflowId, runId, outcome: plan.unplaced ? 'degraded' : 'completed',
    }]);
    op.enter('done');
    return { ...outcome, stopped: stopped.map((t) => t.taskId) };
  } catch (error) {
    await store.appendLedger.executeWithOptions({ summary: `ledger: replan ${input.workload} failed` }, [{
      kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: null,
      reason: input.reason, inputs: { cause: input.cause ?? null }, workflowId, runId, outcome: 'failed',
      evidence: { error: failureMessage(error) },
    }]);
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

