// The apply shared by every workflow that changes a placement, in one of two orders:
// - make-before-break (default): fenced write, start the target tasks, await the new ones, then
//   stop the removed ones;
// - drain-first (scale-in): drain the removed ones with a deadline, fenced write, PUT every target
//   task (survivors take the released partitions from the committed offsets), await the target.
// Either way a removed task is stopped once and readiness is awaited once.
import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { Plan } from '../domain/plan';
import type { ReplicaCount } from '../protocol';
import { formatDuration, profiles, quickStore, runtimesOf } from './operation';
import { DRAIN_TASKS_NAMED, SPEC_OF_THE_BASIS, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);

export { DEFAULT_CONVERGE_TIMEOUT_MS } from '../protocol/bounds';

export type DrainReceipts = Awaited<ReturnType<Activities['drainTasks']>>;

/**
 * The drain activity, asked where a drain is scheduled: `drainTasks`; runs recorded before patch
 * drain-tasks-named scheduled the same activity as `stopTasks`.
 */
export const drainActivity = () => (askPatch(DRAIN_TASKS_NAMED) ? long.drainTasks : long.stopTasks);

export interface PlacementOutcome {
  workload: string;
  fence: number;
  generation: number;
  started: string[];
  stopped: string[];
}

export interface ApplyOptions {
  convergeTimeoutMs: number;
  onPhase: (phase: string) => void;
  /** runs right after the fenced write, so callers know from when a failure needs compensation */
  onCommitted?: () => void;
  /**
   * The operation's result as the workload's desired replicas, written with the placement (scale
   * operations, applied plans, the replan); absent for recovery, which restores the desired state.
   */
  desired?: ReplicaCount;
  /**
   * Drain the removed tasks before the write (their input ownership is released first) instead of
   * after the new ones are ready. `onDrained` gets the receipts and may throw to stop before the write.
   */
  drainFirst?: { drainTimeoutMs: number; onDrained?: (receipts: DrainReceipts) => void };
}

/**
 * The plan as applied when some runtimes cannot be called (LOST, or found unreachable): their
 * removed tasks are neither drained nor stopped (the agent may be gone, or frozen: a call would
 * hang), so moves from them become plain starts. Their tasks stop when the agent heartbeats again
 * and is told they are revoked.
 */
export function withoutRemovalsOn<P extends Plan>(plan: P, runtimeIds: readonly string[]): P {
  const on = (a: { runtimeId: string }) => runtimeIds.includes(a.runtimeId);
  return {
    ...plan,
    starts: [...plan.starts, ...plan.moves.filter((m) => on(m.from)).map((m) => m.to)],
    moves: plan.moves.filter((m) => !on(m.from)),
    stops: plan.stops.filter((a) => !on(a)),
  };
}

const refs = (assignments: Plan['target']) => assignments.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId }));

/** The workload as the plan saw it (its basis revision), or the plan is stale: nothing is written. */
async function loadPlannedWorkload(plan: Plan, shortCalls: typeof store) {
  const workload = await shortCalls.loadWorkload.executeWithOptions({ summary: `load workload ${plan.workload} (revision ${plan.basis.registryRevision})` }, [plan.workload]);
  if (!workload) throw ApplicationFailure.create({ type: 'not-found', message: `workload ${plan.workload} vanished`, nonRetryable: true });
  if (workload.revision !== plan.basis.registryRevision) {
    throw ApplicationFailure.create({
      type: 'stale-plan', nonRetryable: true,
      message: `the definition of ${plan.workload} moved (revision ${plan.basis.registryRevision} → ${workload.revision}) since the plan was made; plan again`,
    });
  }
  return workload;
}

/**
 * Fenced write, then every target task is PUT (new ones start, survivors take their new partitions
 * in place). Make-before-break awaits the new tasks and then drains the removed ones; drain-first
 * drains the removed ones before the write and awaits the whole target after it.
 */
export async function applyPlacement(plan: Plan & { id: string }, options: ApplyOptions): Promise<PlacementOutcome> {
  const { workflowId } = workflowInfo();
  const fresh = [...plan.starts, ...plan.moves.map((m) => m.to)];
  const removed = [...plan.stops, ...plan.moves.map((m) => m.from)];
  /** Stops are fenced: an agent refuses one decided under an older placement than it has seen. */
  const drainRemoved = async (placementFence: number, drainTimeoutMs?: number) => {
    if (removed.length === 0) return [];
    options.onPhase(drainTimeoutMs === undefined ? 'stopping-removed' : 'draining');
    const summary = drainTimeoutMs === undefined
      ? `stop ${removed.length} removed task(s) on ${runtimesOf(removed)}`
      : `drain ${runtimesOf(removed)} (${removed.length} task(s), deadline ${formatDuration(drainTimeoutMs)})`;
    return drainActivity().executeWithOptions({ summary }, [{ tasks: refs(removed), drainTimeoutMs, placementFence }]);
  };

  if (options.drainFirst) {
    const receipts = await drainRemoved(plan.basis.placementFence, options.drainFirst.drainTimeoutMs);
    options.drainFirst.onDrained?.(receipts);
  }
  options.onPhase('writing-placement');
  // The tasks start with the spec the plan was made on: read before the fenced write, which refuses
  // if the revision moved after this read. Read after it (runs before this patch), a spec another
  // change wrote meanwhile reached tasks placed for the old one (chaos seed 11).
  const specOfBasis = askPatch(SPEC_OF_THE_BASIS);
  // The read and the fenced write (idempotent: a retry recognises its own plan) as local activities.
  const shortCalls = quickStore();
  const planned = specOfBasis ? await loadPlannedWorkload(plan, shortCalls) : null;
  const placement = await shortCalls.commitPlacement.executeWithOptions(
    { summary: `write placement of ${plan.workload}: ${plan.target.length} task(s), fenced on ${plan.basis.placementFence}` },
    [{
      workload: plan.workload, basis: plan.basis, assignments: plan.target, generation: plan.generation,
      unplaced: plan.unplaced, writer: workflowId, planId: plan.id,
      ...(options.desired !== undefined ? { desiredReplicas: options.desired } : {}),
    }],
  );
  options.onCommitted?.();
  const workload = planned ?? await store.loadWorkload.executeWithOptions({ summary: `load workload ${plan.workload}` }, [plan.workload]);
  if (!workload) throw ApplicationFailure.create({ type: 'not-found', message: `workload ${plan.workload} vanished`, nonRetryable: true });

  options.onPhase('starting-tasks');
  await long.startTasks.executeWithOptions(
    { summary: `start ${placement.assignments.length} task(s) on ${runtimesOf(placement.assignments)}` },
    [{
      workload: plan.workload, kind: workload.kind, spec: workload.spec, placementFence: placement.fence,
      generation: placement.generation, assignments: placement.assignments,
    }],
  );
  options.onPhase('converging');
  // Drain-first: survivors report ready again once they hold every partition handed to them.
  const awaited = options.drainFirst ? placement.assignments : fresh;
  await long.awaitTasksReady.executeWithOptions(
    { summary: `converge: await ${awaited.length} task(s) ready (timeout ${formatDuration(options.convergeTimeoutMs)})` },
    [{ tasks: refs(awaited), timeoutMs: options.convergeTimeoutMs }],
  );
  if (!options.drainFirst) await drainRemoved(placement.fence);
  return {
    workload: plan.workload, fence: placement.fence, generation: placement.generation,
    started: fresh.map((a) => a.taskId), stopped: removed.map((a) => a.taskId),
  };
}
