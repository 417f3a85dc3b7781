// scaleOut (DESIGN.md §4.1): baseline → gates → smallest increase on a fresh basis → optional
// manual approval → apply → converge → soak → compare → ledger. A failed gate stops before any
// change; a failure after the placement write, or an abort, ends in the stop-the-world replan.
import { condition, defineUpdate, proxyActivities, setCurrentDetails, setHandler, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  baselineHealth, compareEvidence, CPU_JUDGED_AFTER_SOAK_MS, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_CPU_TOLERANCE, DEFAULT_LATENCY_TOLERANCE, DEFAULT_RSS_TOLERANCE, expectedRateAt, type ComparisonOptions,
} from '../domain/evidence';
import { evaluateScaleOutGates, formatEvidenceGap, type GateReport } from '../domain/gates';
import type { Plan } from '../domain/plan';
import { ScaleOutInputSchema } from '../protocol/scale-inputs';
import { failureMessage, isStalePlan, formatDuration, judgedSinceEvidencePatch, judgedSincePatch, parseInput, profiles, regressionDiffers, reportingOutcome, runtimesOf } from './operation';
import { applyPlacement } from './apply-placement';
import { stepSizes } from '../domain/steps';
import { beginScaleOperation, planView, requirePlanFor, ScaleStatus } from './scale-operation';
import { kubernetesScale } from './kubernetes-scale';
import { APPLY_APPROVED_PLAN, BASELINE_TASKS_READY, ERROR_RATE_TESTED, LATENCY_JUDGED, RESOURCES_AND_BACKLOG_JUDGED, THROUGHPUT_TESTED, UNKNOWN_DOWNSTREAM_REFUSED, askPatch } from './patches';

export { abortSignal, statusQuery } from './scale-operation';
export type { ScaleStatus } from './scale-operation';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export { ScaleOutInputSchema, type ScaleOutInput } from '../protocol/scale-inputs';

export interface DecisionArgs {
  by?: string;
}
export const approveUpdate = defineUpdate<ScaleStatus, [DecisionArgs]>('approve');
export const rejectUpdate = defineUpdate<ScaleStatus, [DecisionArgs]>('reject');

/** The Web UI's details line while a change waits for approval: the proposal and the gates, to review before approving. */
export function approvalDetails(workload: string, from: number, plan: Pick<Plan, 'starts' | 'stops' | 'moves' | 'warnings' | 'target'>, gates: GateReport | null): string {
  const where = (list: { runtimeId: string }[]) => (list.length ? ` on ${runtimesOf(list)}` : '');
  return [
    `scale ${workload} ${from} → ${plan.target.length}: **awaiting approval** (approve: POST /v1/operations/scale:${workload}/approve)`,
    `plan: ${plan.starts.length} start(s)${where(plan.starts)}, ${plan.stops.length} stop(s)${where(plan.stops)}, ${plan.moves.length} move(s)`,
    `gates: ${gates ? gates.rows.map((r) => `${r.gate} ${r.passed ? 'ok' : 'FAILED'}`).join(', ') : 'not evaluated'}`,
    ...(plan.warnings.length ? [`warnings: ${plan.warnings.join('; ')}`] : []),
  ].join('\n\n');
}

export async function scaleOut(rawInput: unknown): Promise<ScaleStatus> {
  return reportingOutcome(() => runScaleOut(rawInput));
}

async function runScaleOut(rawInput: unknown): Promise<ScaleStatus> {
  const input = parseInput(ScaleOutInputSchema, rawInput, 'scaleOut');
  const begun = await beginScaleOperation('scaleOut', input);
  const { workload, from, status, aborts, enter, ledger, compensateAt, endUnchanged, cancelledOr, wrongWay, fewerRoundTrips } = begun;
  if (wrongWay) {
    status.error = wrongWay;
    return endUnchanged('refused', 'refused', wrongWay);
  }
  const decide = (decision: 'approved' | 'rejected', by?: string) => {
    status.approval.decision = decision;
    status.approval.by = by ?? 'operator';
    return status;
  };
  const awaitingApproval = () => {
    if (status.phase !== 'awaiting-approval' || status.approval.decision !== null) {
      throw new Error(`nothing to approve: the operation is ${status.phase}`);
    }
  };
  setHandler(approveUpdate, (args: DecisionArgs) => decide('approved', args?.by), { validator: (_args: DecisionArgs) => awaitingApproval() });
  setHandler(rejectUpdate, (args: DecisionArgs) => decide('rejected', args?.by), { validator: (_args: DecisionArgs) => awaitingApproval() });
  // A Kubernetes workload: the same operation (and approval) through the runtime port's Kubernetes activities.
  if (begun.kubernetes) return kubernetesScale('scaleOut', input, begun, begun.kubernetes);

  // Before the first change: an abort or a cancellation ends the operation `cancelled`, nothing changed.
  type Prepared = { plan: Awaited<ReturnType<Activities['preparePlan']>> } | { ended: ScaleStatus };
  const prepare = async (): Promise<Prepared> => {
    enter('baseline');
    const captureBaseline = () => agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
    const propose = () => input.planId
      ? store.loadPlan.executeWithOptions({ summary: `gates: the reviewed plan ${input.planId}` }, [input.planId])
      : store.preparePlan.executeWithOptions(
        { summary: `gates: propose ${input.workload} ${from} → ${input.replicas}` }, [{ workload: input.workload, replicas: input.replicas }],
      );
    let proposal: Awaited<ReturnType<typeof propose>>;
    if (fewerRoundTrips) {
      // Independent: the evidence reads the tasks, the proposal the placement.
      [status.baseline, proposal] = await Promise.all([captureBaseline(), propose()]);
      enter('gates');
    } else {
      status.baseline = await captureBaseline();
      enter('gates');
      proposal = await propose();
    }
    // A reviewed plan, or one proposed for a manual approval, is shown before anything is decided.
    const reviewed = input.planId !== undefined || input.approval === 'manual';
    if (input.planId) requirePlanFor(proposal, input.workload, input.replicas);
    if (reviewed) status.plan = planView(proposal);
    const recipients = [...proposal.starts, ...proposal.moves.map((m) => m.to)].map((a) => a.runtimeId);
    const facts = await agentCalls.gatherGateFacts.executeWithOptions(
      { summary: `gates: probe ${recipients.length ? runtimesOf(recipients.map((runtimeId) => ({ runtimeId }))) : 'no recipient'}` },
      [{ workload: input.workload, recipientRuntimeIds: recipients }],
    );
    status.gates = evaluateScaleOutGates({
      workload, currentReplicas: from, targetReplicas: input.replicas, eligibleRuntimes: facts.eligible, probes: facts.probes,
      recipientRuntimeIds: recipients, broker: facts.broker,
      baseline: judgedSinceEvidencePatch(baselineHealth(status.baseline, from), () => baselineHealth(status.baseline!, from, false), (a, b) => a.ok !== b.ok),
      // Since BASELINE_TASKS_READY: a crash-looping or unready task of the baseline refuses, named.
      ...(askPatch(BASELINE_TASKS_READY) ? { baselineTasks: status.baseline.tasks } : {}),
      expectedRatePerSec: expectedRateAt(workload.kind, status.baseline, from, input.replicas),
      accepted: input.accept,
      unknownDownstreamPasses: !askPatch(UNKNOWN_DOWNSTREAM_REFUSED),
    });
    if (!status.gates.passed || proposal.unplaced) {
      status.evidenceGap = formatEvidenceGap(status.gates) || `placement short: ${proposal.unplaced?.missing} replica(s) unplaced`;
      return { ended: await endUnchanged('refused', 'refused', status.evidenceGap) };
    }

    if (input.approval === 'manual') {
      enter('awaiting-approval');
      setCurrentDetails(approvalDetails(input.workload, from, proposal, status.gates));
      const decided = await condition(() => status.approval.decision !== null || aborts.reason !== null, input.approvalTimeoutMs, {
        summary: `await approval (${formatDuration(input.approvalTimeoutMs)})`,
      });
      if (aborts.reason) return { ended: await endUnchanged('cancelled', 'cancelled', aborts.reason) };
      if (!decided || status.approval.decision !== 'approved') {
        return { ended: await endUnchanged('rejected', 'rejected', decided ? `rejected by ${status.approval.by}` : 'no approval in time') };
      }
    }
    if (aborts.reason) return { ended: await endUnchanged('cancelled', 'cancelled', aborts.reason) };

    // The plan applied is the one reviewed or approved (its basis is checked by the fenced write:
    // one that moved meanwhile refuses it as stale). Runs recorded before `apply-approved-plan`
    // planned again after an approval.
    if (input.planId || (input.approval === 'manual' && askPatch(APPLY_APPROVED_PLAN))) return { plan: proposal };
    // Without a wait for approval, the plan applied is the one the gates probed the recipients of
    // (since FEWER_ROUND_TRIPS); a basis that moved meanwhile is refused as stale by the write.
    if (fewerRoundTrips) {
      status.plan = planView(proposal);
      return { plan: proposal };
    }
    // Runs before it planned again on a fresh basis, in case the gates had taken a while.
    const plan = await store.preparePlan.executeWithOptions(
      { summary: `plan ${input.workload} ${from} → ${input.replicas}` }, [{ workload: input.workload, replicas: input.replicas }],
    );
    status.plan = planView(plan);
    return { plan };
  };
  const prepared = await aborts.guard(prepare).catch(async (error): Promise<Prepared> => ({ ended: await cancelledOr(error) }));
  if ('ended' in prepared) return prepared.ended;
  const { plan } = prepared;

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
    try {
      // From the placement write on, an abort or a cancellation is compensated by the replan.
      await aborts.guard(async () => {
        if (step) {
          applied = await store.preparePlan.executeWithOptions(
            { summary: `step ${index + 1}/${sizes.length}: plan ${input.workload} ${lastGood} → ${size}` }, [{ workload: input.workload, replicas: size }],
          );
          status.plan = planView(applied);
        }
        await applyPlacement(applied, {
          convergeTimeoutMs: input.convergeTimeoutMs, onPhase: enter, onCommitted: () => { committedSize = size; }, desired: size,
        });
        // the after window: latency samples taken since the new size converged
        const windowStart = Date.now();
        if (input.soakMs > 0) {
          status.soakEndsAt = new Date(Date.now() + input.soakMs).toISOString();
          enter('soaking');
          await sleep(input.soakMs, { summary: `soak ${formatDuration(input.soakMs)}${which}` });
        }
        enter('comparing');
        status.after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload}${which}` }, [{ workload: input.workload, sinceMs: windowStart }]);
      });
    } catch (error) {
      const abort = aborts.isAbort(error);
      if (committedSize === null) {
        if (abort) return endUnchanged('cancelled', 'cancelled', aborts.reason!);
        if (isStalePlan(error)) {
          status.evidenceGap = `stale plan: ${failureMessage(error)}; plan again`;
          return endUnchanged('refused', 'stale-plan', status.evidenceGap);
        }
        status.outcome = 'failed';
        status.error = failureMessage(error);
        enter('failed');
        await ledger('failed', status.error);
        throw error;
      }
      return compensateAt(committedSize, abort ? aborts.reason! : `failed after the placement write${which}: ${failureMessage(error)}`);
    }

    // A service's latency (its agent times the readiness path in steady state) is judged against
    // the baseline since patch latency-judged. A consumer's or stream's record latency is not: the
    // partition handover within the soak raises it by design, and would read as a regression.
    const latency = askPatch(LATENCY_JUDGED) && workload.kind === 'service' ? DEFAULT_LATENCY_TOLERANCE : undefined;
    // Since patch resources-and-backlog-judged the backlog and the largest task's memory are judged
    // too, and its CPU after a soak long enough not to hold a new process's start.
    const judged = askPatch(RESOURCES_AND_BACKLOG_JUDGED)
      ? { backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE, ...(input.soakMs >= CPU_JUDGED_AFTER_SOAK_MS ? { cpu: DEFAULT_CPU_TOLERANCE } : {}) }
      : {};
    // Since patch evidence-judged: receipts balanced per partition, tasks not measured, latency tested over its samples.
    const options = { expectedTasks: applied.target.length, kind: workload.kind, latency, ...judged };
    // Since patch error-rate-tested errors are a rate tested over both windows (any new error before).
    const compare = (judgment: Partial<ComparisonOptions>) => compareEvidence(status.baseline!, status.after!, { ...options, ...judgment });
    // Since patch throughput-tested throughput is tested while the workload is behind (no row before).
    const before = { throughputTested: false };
    status.comparison = judgedSinceEvidencePatch(
      judgedSincePatch(
        ERROR_RATE_TESTED,
        judgedSincePatch(THROUGHPUT_TESTED, compare({}), () => compare(before), regressionDiffers),
        () => compare({ ...before, errorRateTested: false }), regressionDiffers,
      ),
      () => compare({ ...before, evidenceJudged: false, errorRateTested: false }), regressionDiffers,
    );
    if (step) Object.assign(step, { after: status.after, reasons: status.comparison.reasons, outcome: status.comparison.verdict === 'regression' ? 'regression' : 'good' });
    if (status.comparison.verdict === 'regression') {
      const back = step && lastGood !== from ? `rolling back to ${lastGood}, the last good step` : `rolling back to ${from}`;
      return compensateAt(lastGood, `regression after scale-out${which}: ${status.comparison.reasons.join('; ')} (${back})`);
    }
    lastGood = size;
  }
  status.outcome = 'completed';
  enter('done');
  await ledger('completed', input.reason, stepped ? { steps: sizes } : {});
  return status;
}
