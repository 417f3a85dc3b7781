// applyPlan: applies a stored plan that keeps the replica count (moves, a recompute) and the reconcile
// loop's plans. An abort or a Temporal cancellation before the placement write ends it `cancelled`
// with nothing changed; a failure or an abort after it is compensated by the stop-the-world replan.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { LedgerOutcome } from '../protocol';
import type { Activities } from '../activities';
import { applyPlacement, type PlacementOutcome } from './apply-placement';
import { checkInput, failureMessage, handleAborts, isStalePlan, profiles, reportingOutcome, trackOperation } from './operation';
import { compensate } from './stop-the-world-replan';
import { APPLY_PLAN_STALE_REFUSED, LEDGER_AFTER_COMPENSATION, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);

export type ApplyPlanResult = PlacementOutcome & {
  compensated: boolean;
  outcome: 'completed' | 'degraded' | 'compensated' | 'cancelled' | 'stale-plan';
  reason?: string;
};

/** Applies a stored plan (POST /v1/plans/:id/apply for a plan that keeps the size, and the reconcile loop). */
export async function applyPlan(rawInput: unknown): Promise<ApplyPlanResult> {
  return reportingOutcome(() => runApplyPlan(rawInput));
}

async function runApplyPlan(rawInput: unknown): Promise<ApplyPlanResult> {
  const input = await checkInput('applyPlan', rawInput);
  const { workflowId, runId } = workflowInfo();
  const aborts = handleAborts();
  const plan = await store.loadPlan.executeWithOptions({ summary: `load plan ${input.planId}` }, [input.planId]);
  const op = trackOperation('apply', plan.workload, `apply plan ${plan.workload} ${plan.fromReplicas} → ${plan.target.length}`);
  const ledger = (outcome: LedgerOutcome, reason: string, extra: Record<string, unknown> = {}) => aborts.exit(() =>
    store.appendLedger.executeWithOptions({ summary: `ledger: apply ${plan.workload} ${outcome}` }, [{
      kind: 'apply', workload: plan.workload, fromReplicas: plan.fromReplicas, toReplicas: plan.target.length,
      reason, planId: plan.id, workflowId, runId, outcome, ...extra,
    }]));
  let committed = false;
  try {
    const outcome = await aborts.guard(() => applyPlacement(plan, {
      convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p), onCommitted: () => { committed = true; }, desired: plan.replicas,
    }));
    const result = plan.unplaced ? 'degraded' : 'completed';
    await ledger(result, input.reason ?? 'plan applied', { inputs: { warnings: plan.warnings, basis: plan.basis } });
    op.enter('done');
    return { ...outcome, compensated: false, outcome: result };
  } catch (error) {
    const abort = aborts.isAbort(error);
    if (!committed) {
      const unchanged = (outcome: 'cancelled' | 'stale-plan', reason: string): ApplyPlanResult => ({
        workload: plan.workload, fence: plan.basis.placementFence, generation: plan.generation, started: [], stopped: [],
        compensated: false, outcome, reason,
      });
      // Another change wrote the placement first (chaos seed 15): nothing was written, so the plan
      // is refused as stale, as a scale's is; runs before this patch failed here.
      if (!abort && isStalePlan(error) && askPatch(APPLY_PLAN_STALE_REFUSED)) {
        const reason = `stale plan: ${failureMessage(error)}; plan again`;
        await ledger('stale-plan', reason);
        op.enter('stale-plan');
        return unchanged('stale-plan', reason);
      }
      if (!abort) throw error;
      await ledger('cancelled', aborts.reason!);
      op.enter('cancelled');
      return unchanged('cancelled', aborts.reason!);
    }
    const reason = abort ? aborts.reason! : `apply failed after the placement write: ${failureMessage(error)}`;
    return aborts.exit(async () => {
      const ledgerAfter = askPatch(LEDGER_AFTER_COMPENSATION);
      if (!ledgerAfter) await ledger('compensated', reason);
      op.enter('compensating');
      let outcome: PlacementOutcome;
      try {
        outcome = await compensate(plan.workload, plan.replicas, reason, input.convergeTimeoutMs);
      } catch (replanError) {
        if (ledgerAfter) await ledger('failed', `${reason}; compensation failed: ${failureMessage(replanError)}`);
        op.enter('failed');
        throw replanError;
      }
      op.enter('compensated');
      if (ledgerAfter) await ledger('compensated', reason, { inputs: { generation: outcome.generation } });
      return { ...outcome, compensated: true, outcome: 'compensated' as const, reason };
    });
  }
}
