// scaleIn (DESIGN.md §4.2): baseline → choose victims (idle first, then least loaded; never by age
// or low CPU) and where their partitions go (consolidation under the per-instance limit, rolled
// back whole when one cannot be placed) → drain the victims (stop fetching, finish in-flight,
// commit, release) → fenced write of the reduced placement, survivors take the released partitions
// from the committed offsets → confirm the removed own nothing → compare → ledger. A drain past its
// deadline, an agent failing mid-drain, or an abort after the drain began ends in the replan.
import { isCancellation, proxyActivities } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { compareEvidence } from '../domain/evidence';
import { planScaleIn } from '../domain/scale-in';
import { WorkloadName } from '../protocol';
import { failureMessage, parseInput, profiles, runtimesOf } from './operation';
import { applyPlacement, DEFAULT_CONVERGE_TIMEOUT_MS } from './apply-placement';
import { beginScaleOperation, ScaleStatus } from './scale-operation';

const store = proxyActivities<Activities>(profiles.storeWrite);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export const ScaleInInputSchema = z.object({
  workload: WorkloadName,
  replicas: z.int().min(1, { message: 'replicas must be an integer ≥ 1 (0 is a retire: DELETE the workload)' }),
  reason: z.string().max(500).default('requested'),
  /** how long each victim may take to finish in-flight work, commit and release */
  drainTimeoutMs: z.int().min(100).max(3_600_000).default(60_000),
  /** most partitions one replica may own after consolidation; default ceil(partitions / replicas) */
  perInstanceLimit: z.int().min(1).optional(),
  minReplicas: z.int().min(1).default(1),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});
export type ScaleInInput = z.input<typeof ScaleInInputSchema>;

export async function scaleIn(rawInput: unknown): Promise<ScaleStatus> {
  const input = parseInput(ScaleInInputSchema, rawInput, 'scaleIn');
  const { placement, status, aborted, enter, ledger, compensateAt, endUnchanged, failUnchanged } = await beginScaleOperation('scaleIn', input);
  const current = placement!.assignments; // a scale-in starts from replicas above the target

  enter('baseline');
  status.baseline = await agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
  const evidenceOf = (taskId: string) => status.baseline!.tasks.find((t) => t.taskId === taskId);

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
    return endUnchanged('refused', 'refused', `nothing moved: ${status.evidenceGap}`);
  }
  if (aborted.reason) return endUnchanged('rejected', 'aborted', aborted.reason);

  // The same planner as every other change, on the target decided here (survivors keep their task
  // ids; the victims are the plan's stops). Refused as stale, before any change, if the placement
  // moved since the victims were chosen.
  const plan = await store.preparePlan.executeWithOptions({ summary: `plan ${input.workload} ${current.length} → ${decision.survivors.length}` }, [{
    workload: input.workload, replicas: decision.survivors.length,
    decided: {
      assignments: decision.survivors, onFence: placement!.fence,
      warnings: decision.stoppedAbove ? [`stopping above target: ${decision.stoppedAbove.reason}`] : [],
    },
  }]).catch(failUnchanged);
  status.plan = { id: plan.id, starts: plan.starts, stops: plan.stops, moves: plan.moves, warnings: plan.warnings, basis: plan.basis, target: plan.target };
  const scaleIn = status.scaleIn;
  try {
    // Drain first: each victim stops fetching, finishes in-flight, commits and releases its
    // partitions; only then does the fenced write hand them to the survivors, which are awaited once.
    await applyPlacement(plan, {
      convergeTimeoutMs: input.convergeTimeoutMs, onPhase: enter,
      drainFirst: {
        drainTimeoutMs: input.drainTimeoutMs,
        onDrained: (receipts) => {
          scaleIn.receipts = receipts;
          if (aborted.reason) throw new Error(aborted.reason);
        },
      },
    });
    enter('confirming');
    scaleIn.confirmation = await agentCalls.confirmRemoved.executeWithOptions(
      { summary: `confirm ${plan.stops.length ? runtimesOf(plan.stops) : 'nothing'} own nothing of ${input.workload}` },
      [{ workload: input.workload, removed: plan.stops.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId })) }],
    );
  } catch (error) {
    if (!aborted.reason && isCancellation(error)) throw error; // the workflow itself was cancelled
    return compensateAt(input.replicas, aborted.reason ?? `scale-in failed after the drain began: ${failureMessage(error)}`);
  }

  enter('comparing');
  status.after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload}` }, [{ workload: input.workload }]);
  status.comparison = compareEvidence(status.baseline, status.after, { expectedTasks: decision.survivors.length });
  status.outcome = 'completed';
  enter('done');
  const note = decision.stoppedAbove ? `; stopped at ${decision.survivors.length}, above ${input.replicas}: ${decision.stoppedAbove.reason}` : '';
  await ledger(decision.stoppedAbove ? 'completed-above-target' : 'completed', `${input.reason}${note}`);
  return status;
}
