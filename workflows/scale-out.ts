// scaleOut (DESIGN.md §4.1): baseline → gates → smallest increase on a fresh basis → optional
// manual approval → apply → converge → soak → compare → ledger. A failed gate stops before any
// change; a failure after the placement write, or an abort, ends in the stop-the-world replan.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { formatEvidenceGap, type FleetCapacity } from '../domain/gates';
import { stepSizes } from '../domain/steps';
import { applyPlacement } from './apply-placement';
import { kubernetesScale } from './kubernetes-scale';
import { checkInput, failureMessage, formatDuration, isStalePlan, profiles, reportingOutcome, runtimesOf } from './operation';
import { APPLY_APPROVED_PLAN, askPatch } from './patches';
import { approvalDetails, awaitApproval, handleApproval } from './scale-approval';
import { compareAfterScaleOut, judgeScaleOutGates } from './scale-judgments';
import { beginScaleOperation, planView, requirePlanFor, type ScaleStatus } from './scale-operation';

export { abortSignal, statusQuery, type ScaleStatus } from './scale-operation';
export { approvalDetails, approveUpdate, rejectUpdate, type DecisionArgs } from './scale-approval';
export type { ScaleOutInput } from '../protocol/scale-inputs';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export async function scaleOut(rawInput: unknown): Promise<ScaleStatus> {
  return reportingOutcome(() => runScaleOut(rawInput));
}

async function runScaleOut(rawInput: unknown): Promise<ScaleStatus> {
  const input = await checkInput('scaleOut', rawInput);
  const op = await beginScaleOperation('scaleOut', input);
  const { workload, from, status, aborts, enter } = op;
  handleApproval(status);
  // A Kubernetes workload: the same operation (and approval) through the runtime port's Kubernetes activities.
  if (op.kubernetes) return kubernetesScale('scaleOut', input, op, op.kubernetes);

  // Before the first change: an abort or a cancellation ends the operation `cancelled`, nothing changed.
  const plan = await op.beforeChange(async () => {
    enter('baseline');
    const captureBaseline = () => agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
    const propose = () => input.planId
      ? store.loadPlan.executeWithOptions({ summary: `gates: the reviewed plan ${input.planId}` }, [input.planId])
      : store.preparePlan.executeWithOptions(
        { summary: `gates: propose ${input.workload} ${from} → ${input.replicas}` }, [{ workload: input.workload, replicas: input.replicas }],
      );
    let proposal: Awaited<ReturnType<typeof propose>>;
    if (op.fewerRoundTrips) {
      // Independent: the evidence reads the tasks, the proposal the placement.
      [status.baseline, proposal] = await Promise.all([captureBaseline(), propose()]);
      enter('gates');
    } else {
      status.baseline = await captureBaseline();
      enter('gates');
      proposal = await propose();
    }
    if (input.planId) requirePlanFor(proposal, input.workload, input.replicas);
    // A reviewed plan, or one proposed for a manual approval, is shown before anything is decided.
    if (input.planId !== undefined || input.approval === 'manual') status.plan = planView(proposal);
    const recipients = [...proposal.starts, ...proposal.moves.map((m) => m.to)].map((a) => a.runtimeId);
    // A plan preparePlan made counts the room its fleet had, and the capacity gate judges that fleet;
    // a reviewed plan (or one from a worker before the count) has none, and the facts count it now.
    const planned = 'capacity' in proposal ? proposal.capacity as FleetCapacity | undefined : undefined;
    const facts = await agentCalls.gatherGateFacts.executeWithOptions(
      { summary: `gates: probe ${recipients.length ? runtimesOf(recipients.map((runtimeId) => ({ runtimeId }))) : 'no recipient'}` },
      [{ workload: input.workload, recipientRuntimeIds: recipients, capacity: planned ? 'known' : 'count' }],
    );
    status.gates = judgeScaleOutGates({ workload, from, to: input.replicas, baseline: status.baseline, recipients, facts, planned, accepted: input.accept });
    if (!status.gates.passed || proposal.unplaced) {
      status.evidenceGap = formatEvidenceGap(status.gates) || `placement short: ${proposal.unplaced?.missing} replica(s) unplaced`;
      return op.refuse(status.evidenceGap);
    }
    if (input.approval === 'manual') {
      const details = approvalDetails(input.workload, from, proposal, status.gates);
      await awaitApproval(op, details, input.approvalTimeoutMs, `await approval (${formatDuration(input.approvalTimeoutMs)})`);
    }
    if (aborts.reason) return op.cancel(aborts.reason);

    // The plan applied is the one reviewed or approved (its basis is checked by the fenced write:
    // one that moved meanwhile refuses it as stale). Runs recorded before `apply-approved-plan`
    // planned again after an approval.
    if (input.planId || (input.approval === 'manual' && askPatch(APPLY_APPROVED_PLAN))) return proposal;
    // Without a wait for approval, the plan applied is the one the gates probed the recipients of
    // (since FEWER_ROUND_TRIPS); a basis that moved meanwhile is refused as stale by the write.
    // Runs before it planned again on a fresh basis, in case the gates had taken a while.
    const plan = op.fewerRoundTrips ? proposal : await store.preparePlan.executeWithOptions(
      { summary: `plan ${input.workload} ${from} → ${input.replicas}` }, [{ workload: input.workload, replicas: input.replicas }],
    );
    status.plan = planView(plan);
    return plan;
  });

  // One step without `steps` (the plan above is for the target); with them, each size planned,
  // applied, converged, soaked and compared before the next (domain/steps.ts). The request's steps,
  // else the workload's own (a reviewed plan, planId, is applied as the one step it is).
  const workloadSteps = input.planId === undefined && workload.kind !== 'stream' ? workload.steps : undefined;
  const sizes = stepSizes(from, input.replicas, input.steps ?? workloadSteps);
  const stepped = sizes.length > 1;
  if (stepped) status.steps = sizes.map((size) => ({ size, outcome: 'pending', after: null, reasons: [] }));
  /** the size whose placement was written last: what a failure after the write is replanned at */
  let committedSize: number | null = null;
  let lastGood = from;
  for (const [index, size] of sizes.entries()) {
    const step = stepped ? status.steps![index] : null;
    const which = step ? ` (step ${index + 1} of ${sizes.length}, size ${size})` : '';
    let applied = plan;
    await op.guarded(async () => {
      if (step) {
        applied = await store.preparePlan.executeWithOptions(
          { summary: `step ${index + 1}/${sizes.length}: plan ${input.workload} ${lastGood} → ${size}` }, [{ workload: input.workload, replicas: size }],
        );
        status.plan = planView(applied);
      }
      await applyPlacement(applied, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: enter, onCommitted: () => { committedSize = size; }, desired: size });
      // the after window: latency samples taken since the new size converged
      const windowStart = Date.now();
      if (input.soakMs > 0) {
        status.soakEndsAt = new Date(Date.now() + input.soakMs).toISOString();
        enter('soaking');
        await sleep(input.soakMs, { summary: `soak ${formatDuration(input.soakMs)}${which}` });
      }
      enter('comparing');
      status.after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload}${which}` }, [{ workload: input.workload, sinceMs: windowStart }]);
    }, (abort, error) => {
      // From the placement write on, an abort or a cancellation is compensated by the replan.
      if (committedSize !== null) return op.compensateAt(committedSize, abort ?? `failed after the placement write${which}: ${failureMessage(error)}`);
      if (abort !== null) return op.cancel(abort);
      return isStalePlan(error) ? op.refuseStale(failureMessage(error)) : op.fail(error);
    });

    status.comparison = compareAfterScaleOut(status.baseline!, status.after!, { expectedTasks: applied.target.length, kind: workload.kind, soakMs: input.soakMs });
    if (step) Object.assign(step, { after: status.after, reasons: status.comparison.reasons, outcome: status.comparison.verdict === 'regression' ? 'regression' : 'good' });
    if (status.comparison.verdict === 'regression') {
      const back = step && lastGood !== from ? `rolling back to ${lastGood}, the last good step` : `rolling back to ${from}`;
      return op.compensateAt(lastGood, `regression after scale-out${which}: ${status.comparison.reasons.join('; ')} (${back})`);
    }
    lastGood = size;
  }
  return op.complete(input.reason, stepped ? { steps: sizes } : {});
}
