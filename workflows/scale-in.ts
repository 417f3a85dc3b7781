// scaleIn (DESIGN.md §4.2): baseline → choose victims (idle first, then least loaded; never by age
// or low CPU) and where their partitions go (consolidation under the per-instance limit, rolled
// back whole when one cannot be placed) → drain the victims (stop fetching, finish in-flight,
// commit, release) → fenced write of the reduced placement, survivors take the released partitions
// from the committed offsets → confirm the removed own nothing → compare → ledger. A drain past its
// deadline, an agent failing mid-drain, an abort after the drain began, or a comparison with a
// failed row ends in the replan.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { planScaleIn, type ScaleInDecision } from '../domain/scale-in';
import { applyPlacement } from './apply-placement';
import { kubernetesScale } from './kubernetes-scale';
import { checkInput, failureMessage, formatDuration, isStalePlan, profiles, reportingOutcome, runtimesOf } from './operation';
import { EVIDENCE_JUDGED, SCALE_IN_STALE_REFUSED, TIER_RULES, askPatch } from './patches';
import { compareAfterScaleIn, drainDeadlineMs, forcedStops, scaleInLoads } from './scale-judgments';
import { beginScaleOperation, planView, requirePlanFor, type ScaleStatus } from './scale-operation';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export type { ScaleInInput } from '../protocol/scale-inputs';
export { drainDeadlineMs, forcedStops } from './scale-judgments';

export async function scaleIn(rawInput: unknown): Promise<ScaleStatus> {
  return reportingOutcome(() => runScaleIn(rawInput));
}

async function runScaleIn(rawInput: unknown): Promise<ScaleStatus> {
  const input = await checkInput('scaleIn', rawInput);
  const op = await beginScaleOperation('scaleIn', input);
  const { workload, placement, status, aborts, enter } = op;
  // A Kubernetes workload: the two-phase drain through the runtime port's Kubernetes activities.
  if (op.kubernetes) return kubernetesScale('scaleIn', input, op, op.kubernetes);
  const current = placement!.assignments; // a scale-in starts from replicas above the target

  /** The reviewed plan as the scale-in's decision: its stops (and the old side of its moves) drain. */
  const reviewedPlan = async (planId: string) => {
    const plan = await store.loadPlan.executeWithOptions({ summary: `the reviewed plan ${planId}` }, [planId]);
    requirePlanFor(plan, input.workload, input.replicas);
    if (plan.basis.placementFence !== placement!.fence || plan.basis.registryRevision !== workload.revision) {
      return op.refuseStale(`the basis of ${planId} moved (revision ${plan.basis.registryRevision} → ${workload.revision}, fence ${plan.basis.placementFence} → ${placement!.fence})`);
    }
    const victims = [...plan.stops, ...plan.moves.map((m) => m.from)];
    const decision: ScaleInDecision = {
      victims, survivors: plan.target, moves: [], stoppedAbove: null,
      reasons: Object.fromEntries(victims.map((v) => [v.taskId, `stopped by the reviewed plan ${planId}`])),
    };
    status.scaleIn = { victims, reasons: decision.reasons, moves: [], stoppedAbove: null, receipts: [], confirmation: null };
    status.plan = planView(plan);
    if (aborts.reason) return op.cancel(aborts.reason);
    return { plan, decision };
  };
  // Before the drain begins nothing changed: an abort or a cancellation ends it `cancelled`.
  const { plan, decision } = await op.beforeChange(async () => {
    // Tier constraints hold here too, not only in the autoscaler (runs recorded before `tier-rules` skip them).
    if (askPatch(TIER_RULES)) await op.holdTierRules(input.override);
    enter('baseline');
    status.baseline = await agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
    if (input.planId) return reviewedPlan(input.planId);

    enter('choosing-victims');
    const decision = planScaleIn({
      current, target: input.replicas, perInstanceLimit: input.perInstanceLimit, minReplicas: input.minReplicas, loads: scaleInLoads(current, status.baseline),
    });
    status.scaleIn = { victims: decision.victims, reasons: decision.reasons, moves: decision.moves, stoppedAbove: decision.stoppedAbove, receipts: [], confirmation: null };
    if (decision.victims.length === 0) {
      status.evidenceGap = decision.stoppedAbove?.reason ?? 'no replica can be removed';
      return op.refuse(`nothing moved: ${status.evidenceGap}`);
    }
    if (aborts.reason) return op.cancel(aborts.reason);

    // The same planner as every other change, on the target decided here (survivors keep their task
    // ids; the victims are the plan's stops). Refused as stale, before any change, if the placement
    // moved since the victims were chosen.
    const plan = await store.preparePlan.executeWithOptions({ summary: `plan ${input.workload} ${current.length} → ${decision.survivors.length}` }, [{
      workload: input.workload, replicas: decision.survivors.length,
      decided: {
        assignments: decision.survivors, onFence: placement!.fence,
        warnings: decision.stoppedAbove ? [`stopping above target: ${decision.stoppedAbove.reason}`] : [],
      },
    }]).catch((error) => {
      if (aborts.isAbort(error)) throw error;
      // Another change wrote the placement after the victims were chosen (chaos seed 14): nothing
      // moved yet, so the scale-in is refused as stale, as a scale-out is, not failed.
      return isStalePlan(error) && askPatch(SCALE_IN_STALE_REFUSED) ? op.refuseStale(failureMessage(error)) : op.fail(error);
    });
    status.plan = planView(plan);
    return { plan, decision };
  });

  const scaleIn = status.scaleIn!;
  // From the drain on, an abort or a cancellation in any phase is compensated by the replan.
  await op.guarded(async () => {
    // Drain first: each victim stops fetching, finishes in-flight, commits and releases its
    // partitions; only then does the fenced write hand them to the survivors, which are awaited once.
    await applyPlacement(plan, {
      convergeTimeoutMs: input.convergeTimeoutMs, onPhase: enter, desired: plan.replicas,
      drainFirst: {
        drainTimeoutMs: drainDeadlineMs(input.drainTimeoutMs, workload),
        onDrained: (receipts) => {
          scaleIn.receipts = receipts;
        },
      },
    });
    // the after window: latency samples taken since the reduced placement converged
    const windowStart = Date.now();
    enter('confirming');
    scaleIn.confirmation = await agentCalls.confirmRemoved.executeWithOptions(
      { summary: `confirm ${plan.stops.length ? runtimesOf(plan.stops) : 'nothing'} own nothing of ${input.workload}` },
      [{ workload: input.workload, removed: plan.stops.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId })) }],
    );
    if (input.soakMs > 0) {
      enter('soaking');
      await sleep(input.soakMs, { summary: `soak ${formatDuration(input.soakMs)}` });
    }
    enter('comparing');
    status.after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload}` }, [{ workload: input.workload, sinceMs: windowStart }]);
  }, (abort, error) => op.compensateAt(input.replicas, abort ?? `scale-in failed after the drain began: ${failureMessage(error)}`));

  // A failed row compensates, the replan restoring the ownership at the size applied. Runs
  // recorded before patch evidence-judged completed whatever it said.
  status.comparison = compareAfterScaleIn(status.baseline!, status.after!, { expectedTasks: decision.survivors.length, kind: workload.kind });
  if (status.comparison.verdict === 'regression' && askPatch(EVIDENCE_JUDGED)) {
    return op.compensateAt(decision.survivors.length, `regression after scale-in: ${status.comparison.reasons.join('; ')}`);
  }
  const forced = forcedStops(scaleIn.receipts as Parameters<typeof forcedStops>[0]);
  scaleIn.forced = forced;
  const note = [
    decision.stoppedAbove ? `; stopped at ${decision.survivors.length}, above ${input.replicas}: ${decision.stoppedAbove.reason}` : '',
    forced.length ? `; ${forced.length} task(s) did not stop within their grace and were killed: ${forced.join(', ')}` : '',
  ].join('');
  return op.complete(`${input.reason}${note}`, {}, decision.stoppedAbove ? 'completed-above-target' : 'completed');
}
