// scaleIn (DESIGN.md §4.2): baseline → choose victims (idle first, then least loaded; never by age
// or low CPU) and where their partitions go (consolidation under the per-instance limit, rolled
// back whole when one cannot be placed) → drain the victims (stop fetching, finish in-flight,
// commit, release) → fenced write of the reduced placement, survivors take the released partitions
// from the committed offsets → confirm the removed own nothing → compare → ledger. A drain past its
// deadline, an agent failing mid-drain, an abort after the drain began, or a comparison with a
// failed row ends in the replan.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { compareEvidence, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_LATENCY_TOLERANCE, DEFAULT_RSS_TOLERANCE } from '../domain/evidence';
import { planScaleIn, type ScaleInDecision } from '../domain/scale-in';
import { scaleInViolations } from '../domain/tier-rules';
import type { Workload } from '../protocol';
import { ScaleInInputSchema } from '../protocol/scale-inputs';
import { failureMessage, formatDuration, judgedSincePatch, regressionDiffers, isStalePlan, parseInput, profiles, reportingOutcome, runtimesOf } from './operation';
import { applyPlacement } from './apply-placement';
import { beginScaleOperation, planView, requirePlanFor, ScaleStatus } from './scale-operation';
import { kubernetesScale } from './kubernetes-scale';
import { ERROR_RATE_TESTED, EVIDENCE_JUDGED, SCALE_IN_STALE_REFUSED, THROUGHPUT_TESTED, TIER_RULES, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export { ScaleInInputSchema, type ScaleInInput } from '../protocol/scale-inputs';

/** A process task's grace period is honoured: the drain deadline is never shorter than it (plus time to report). */
export function drainDeadlineMs(requestedMs: number, workload: Workload): number {
  const graceMs = workload.kind === 'service' ? (workload.spec as { graceMs?: number }).graceMs ?? 0 : 0;
  return Math.max(requestedMs, graceMs + 5_000);
}

/** The drained tasks that had to be killed: they did not stop within their grace period. */
export function forcedStops(receipts: readonly { taskId: string; receipt?: Record<string, unknown> }[]): string[] {
  return receipts.filter((r) => r.receipt?.forced === true).map((r) => r.taskId);
}

export async function scaleIn(rawInput: unknown): Promise<ScaleStatus> {
  return reportingOutcome(() => runScaleIn(rawInput));
}

async function runScaleIn(rawInput: unknown): Promise<ScaleStatus> {
  const input = parseInput(ScaleInInputSchema, rawInput, 'scaleIn');
  const begun = await beginScaleOperation('scaleIn', input);
  const { workload, placement, status, aborts, enter, ledger, compensateAt, endUnchanged, cancelledOr, failUnchanged, wrongWay } = begun;
  if (wrongWay) {
    status.error = wrongWay;
    return endUnchanged('refused', 'refused', wrongWay);
  }
  // A Kubernetes workload: the two-phase drain through the runtime port's Kubernetes activities.
  if (begun.kubernetes) return kubernetesScale('scaleIn', input, begun, begun.kubernetes);
  const current = placement!.assignments; // a scale-in starts from replicas above the target

  // Before the drain begins nothing changed: an abort or a cancellation ends it `cancelled`.
  type Prepared = { plan: Awaited<ReturnType<Activities['preparePlan']>>; decision: ScaleInDecision } | { ended: ScaleStatus };
  const prepare = async (): Promise<Prepared> => {
    // Tier constraints hold here too, not only in the autoscaler (runs recorded before `tier-rules` skip them).
    if (askPatch(TIER_RULES)) {
      const rules = await store.tierRules.executeWithOptions({ summary: `tier rules of ${input.workload}` }, [{ workload: input.workload }]);
      const violations = scaleInViolations(input.replicas, rules);
      status.tierRules = { violations, override: violations.length && input.override ? input.override.reason : null };
      if (violations.length && !input.override) {
        status.evidenceGap = `${violations.join('; ')} (a request with override and a reason may go past it)`;
        return { ended: await endUnchanged('refused', 'refused', status.evidenceGap) };
      }
    }

    enter('baseline');
    status.baseline = await agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
    const evidenceOf = (taskId: string) => status.baseline!.tasks.find((t) => t.taskId === taskId);

    if (input.planId) return reviewedPlan(input.planId);

    enter('choosing-victims');
    const decision = planScaleIn({
      current,
      target: input.replicas,
      perInstanceLimit: input.perInstanceLimit,
      minReplicas: input.minReplicas,
      loads: current.map((a) => ({
        taskId: a.taskId, runtimeId: a.runtimeId, index: a.index,
        ownedPartitions: a.partitions?.length ?? evidenceOf(a.taskId)?.ownedPartitions ?? 0,
        inFlight: evidenceOf(a.taskId)?.inFlight ?? 0,
        load: evidenceOf(a.taskId)?.ratePerSec ?? 0,
      })),
    });
    status.scaleIn = { victims: decision.victims, reasons: decision.reasons, moves: decision.moves, stoppedAbove: decision.stoppedAbove, receipts: [], confirmation: null };
    if (decision.victims.length === 0) {
      status.evidenceGap = decision.stoppedAbove?.reason ?? 'no replica can be removed';
      return { ended: await endUnchanged('refused', 'refused', `nothing moved: ${status.evidenceGap}`) };
    }
    if (aborts.reason) return { ended: await endUnchanged('cancelled', 'cancelled', aborts.reason) };

    // The same planner as every other change, on the target decided here (survivors keep their task
    // ids; the victims are the plan's stops). Refused as stale, before any change, if the placement
    // moved since the victims were chosen.
    const plan = await store.preparePlan.executeWithOptions({ summary: `plan ${input.workload} ${current.length} → ${decision.survivors.length}` }, [{
      workload: input.workload, replicas: decision.survivors.length,
      decided: {
        assignments: decision.survivors, onFence: placement!.fence,
        warnings: decision.stoppedAbove ? [`stopping above target: ${decision.stoppedAbove.reason}`] : [],
      },
    }]).catch(async (error): Promise<{ ended: ScaleStatus }> => {
      if (aborts.isAbort(error)) throw error;
      // Another change wrote the placement after the victims were chosen (chaos seed 14): nothing
      // moved yet, so the scale-in is refused as stale, as a scale-out is, not failed.
      if (!isStalePlan(error) || !askPatch(SCALE_IN_STALE_REFUSED)) return failUnchanged(error);
      status.evidenceGap = `stale plan: ${failureMessage(error)}; plan again`;
      return { ended: await endUnchanged('refused', 'stale-plan', status.evidenceGap) };
    });
    if ('ended' in plan) return plan;
    status.plan = planView(plan);
    return { plan, decision };
  };
  /** The reviewed plan as the scale-in's decision: its stops (and the old side of its moves) drain. */
  const reviewedPlan = async (planId: string): Promise<Prepared> => {
    const plan = await store.loadPlan.executeWithOptions({ summary: `the reviewed plan ${planId}` }, [planId]);
    requirePlanFor(plan, input.workload, input.replicas);
    if (plan.basis.placementFence !== placement!.fence || plan.basis.registryRevision !== workload.revision) {
      status.evidenceGap = `stale plan: the basis of ${planId} moved (revision ${plan.basis.registryRevision} → ${workload.revision}, fence ${plan.basis.placementFence} → ${placement!.fence}); plan again`;
      return { ended: await endUnchanged('refused', 'stale-plan', status.evidenceGap) };
    }
    const victims = [...plan.stops, ...plan.moves.map((m) => m.from)];
    const decision: ScaleInDecision = {
      victims, survivors: plan.target, moves: [], stoppedAbove: null,
      reasons: Object.fromEntries(victims.map((v) => [v.taskId, `stopped by the reviewed plan ${planId}`])),
    };
    status.scaleIn = { victims, reasons: decision.reasons, moves: [], stoppedAbove: null, receipts: [], confirmation: null };
    status.plan = planView(plan);
    if (aborts.reason) return { ended: await endUnchanged('cancelled', 'cancelled', aborts.reason) };
    return { plan, decision };
  };
  const prepared = await aborts.guard(prepare).catch(async (error): Promise<Prepared> => ({ ended: await cancelledOr(error) }));
  if ('ended' in prepared) return prepared.ended;
  const { plan, decision } = prepared;

  const scaleIn = status.scaleIn!;
  try {
    // From the drain on, an abort or a cancellation in any phase is compensated by the replan.
    await aborts.guard(async () => {
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
    });
  } catch (error) {
    const abort = aborts.isAbort(error);
    return compensateAt(input.replicas, abort ? aborts.reason! : `scale-in failed after the drain began: ${failureMessage(error)}`);
  }

  // Judged like a scaleOut's (receipts per partition, every partition owned, tasks, errors, a
  // service's latency, backlog and memory): a failed row compensates, the replan restoring the
  // ownership at the size applied. Runs recorded before patch evidence-judged completed whatever it said.
  const latency = workload.kind === 'service' ? DEFAULT_LATENCY_TOLERANCE : undefined;
  // Since patch error-rate-tested errors are a rate tested over both windows (any new error before).
  // Since patch throughput-tested throughput is tested while the workload is behind (no row before).
  const compare = (errorRateTested: boolean, throughputTested: boolean) => compareEvidence(status.baseline!, status.after!, {
    expectedTasks: decision.survivors.length, kind: workload.kind, latency, backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE, errorRateTested, throughputTested,
  });
  status.comparison = judgedSincePatch(
    ERROR_RATE_TESTED,
    judgedSincePatch(THROUGHPUT_TESTED, compare(true, true), () => compare(true, false), regressionDiffers),
    () => compare(false, false), regressionDiffers,
  );
  if (status.comparison.verdict === 'regression' && askPatch(EVIDENCE_JUDGED)) {
    return compensateAt(decision.survivors.length, `regression after scale-in: ${status.comparison.reasons.join('; ')}`);
  }
  const forced = forcedStops(scaleIn.receipts as Parameters<typeof forcedStops>[0]);
  scaleIn.forced = forced;
  status.outcome = 'completed';
  enter('done');
  const note = [
    decision.stoppedAbove ? `; stopped at ${decision.survivors.length}, above ${input.replicas}: ${decision.stoppedAbove.reason}` : '',
    forced.length ? `; ${forced.length} task(s) did not stop within their grace and were killed: ${forced.join(', ')}` : '',
  ].join('');
  await ledger(decision.stoppedAbove ? 'completed-above-target' : 'completed', `${input.reason}${note}`);
  return status;
}
