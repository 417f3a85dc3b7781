// A rollout's steps (DESIGN.md §3 "Versions and rollouts", §4.7): which replicas each step
// replaces, and the placement a step writes. Pure, free of node:crypto: the rollout workflow uses it.
import type { Assignment } from '../protocol';
import { taskIdFor } from './task-identity';

export interface RolloutStepPlan {
  role: 'canary' | 'batch';
  /** the task ids this step replaces, in index order */
  taskIds: string[];
}

/** The revision a replica runs: its recorded one, else (placed before revisions were recorded) `current`. */
export const revisionOfReplica = (assignment: Pick<Assignment, 'revision'>, current: string): string => assignment.revision ?? current;

/**
 * The steps that bring every replica onto `target`: the replicas on another revision, in index
 * order, a canary step of one first, then batches of `batchSize` (default: half of the replicas
 * to replace, rounded up, so a fleet of 3 is a canary and one batch of 2). Replicas already on
 * `target` are left alone; none to replace is no step.
 */
export function planRolloutSteps(assignments: readonly Assignment[], target: string, batchSize?: number): RolloutStepPlan[] {
  const pending = assignments.filter((a) => revisionOfReplica(a, target) !== target).sort((a, b) => a.index - b.index || (a.taskId < b.taskId ? -1 : 1));
  if (pending.length === 0) return [];
  const [canary, ...rest] = pending;
  const size = Math.max(1, batchSize ?? Math.ceil(pending.length / 2));
  const steps: RolloutStepPlan[] = [{ role: 'canary', taskIds: [canary.taskId] }];
  for (let at = 0; at < rest.length; at += size) steps.push({ role: 'batch', taskIds: rest.slice(at, at + size).map((a) => a.taskId) });
  return steps;
}

export interface Replacement {
  /** the task replaced */
  from: Assignment;
  /** its replacement: same runtime, index and partitions, a new task id, the revision it is to run */
  to: Assignment;
}

/**
 * The placement a step writes: each replica named in `revisions` (task id → revision to run) is
 * replaced on its runtime and index by a new task of that revision, with an id minted on the fence
 * the write takes (`fence` + 1, which only grows, so no id is ever minted twice); the others are kept
 * as they are. A task id `revisions` names that is not in `current` is an error: the placement moved.
 */
export function replaceReplicas(
  current: readonly Assignment[],
  revisions: Readonly<Record<string, string>>,
  placement: { workload: string; fence: number; generation: number },
): { assignments: Assignment[]; replacements: Replacement[] } {
  const missing = Object.keys(revisions).filter((taskId) => !current.some((a) => a.taskId === taskId));
  if (missing.length) throw new Error(`${placement.workload}: no replica ${missing.join(', ')} in the placement at fence ${placement.fence}`);
  const replacements: Replacement[] = [];
  const assignments = current.map((from) => {
    const revision = Object.hasOwn(revisions, from.taskId) ? revisions[from.taskId] : undefined;
    if (revision === undefined) return from;
    const to: Assignment = {
      runtimeId: from.runtimeId, index: from.index, taskId: taskIdFor(placement.workload, from.index, placement.generation, placement.fence + 1), revision,
      ...(from.partitions ? { partitions: [...from.partitions] } : {}),
    };
    replacements.push({ from, to });
    return to;
  });
  return { assignments, replacements };
}
