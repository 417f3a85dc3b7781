// applyPlan: applies a stored plan (POST /v1/plans/:id/apply, and the reconcile loop); a failure
// after the placement write is compensated by the stop-the-world replan.
import { isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { applyPlacement, DEFAULT_CONVERGE_TIMEOUT_MS, type PlacementOutcome } from './apply-placement';
import { failureMessage, parseInput, profiles, trackOperation } from './operation';
import { compensate } from './stop-the-world-replan';

const store = proxyActivities<Activities>(profiles.storeWrite);

export const ApplyPlanInputSchema = z.object({
  planId: z.string().min(1),
  reason: z.string().max(500).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});

/** Applies a stored plan (POST /v1/plans/:id/apply, and the reconcile loop). */
export async function applyPlan(rawInput: unknown): Promise<PlacementOutcome & { compensated: boolean }> {
  const input = parseInput(ApplyPlanInputSchema, rawInput, 'applyPlan');
  const { workflowId, runId } = workflowInfo();
  const plan = await store.loadPlan.executeWithOptions({ summary: `load plan ${input.planId}` }, [input.planId]);
  const op = trackOperation('apply', plan.workload, `apply plan ${plan.workload} ${plan.fromReplicas} → ${plan.target.length}`);
  let committed = false;
  try {
    const outcome = await applyPlacement(plan, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p), onCommitted: () => { committed = true; } });
    await store.appendLedger.executeWithOptions({ summary: `ledger: apply ${plan.workload} ${plan.unplaced ? 'degraded' : 'completed'}` }, [{
      kind: 'apply', workload: plan.workload, fromReplicas: plan.fromReplicas, toReplicas: plan.target.length,
      reason: input.reason ?? 'plan applied', inputs: { warnings: plan.warnings, basis: plan.basis },
      planId: plan.id, workflowId, runId, outcome: plan.unplaced ? 'degraded' : 'completed',
    }]);
    op.enter('done');
    return { ...outcome, compensated: false };
  } catch (error) {
    if (!committed || isCancellation(error)) throw error;
    const reason = `apply failed after the placement write: ${failureMessage(error)}`;
    await store.appendLedger.executeWithOptions({ summary: `ledger: apply ${plan.workload} compensated` }, [{
      kind: 'apply', workload: plan.workload, fromReplicas: plan.fromReplicas, toReplicas: plan.target.length, reason,
      planId: plan.id, workflowId, runId, outcome: 'compensated',
    }]);
    op.enter('compensating');
    const outcome = await compensate(plan.workload, plan.replicas, reason, input.convergeTimeoutMs);
    op.enter('compensated');
    return { ...outcome, compensated: true };
  }
}

