// The make-before-break apply shared by every workflow that changes a placement: fenced write,
// start the target tasks, await the new ones, then drain the removed ones.
import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { Plan } from '../domain/plan';
import { profiles } from './operation';

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

