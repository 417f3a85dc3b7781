// The scale-in decision (DESIGN.md §4.2): which replicas go (domain/victims: idle first, then least
// loaded, never by age or low CPU), where their input units go (domain/consolidation: onto
// survivors with room under the per-instance limit, all-or-nothing per victim), and the survivors'
// assignments afterwards. Pure: the scaleIn workflow runs it on evidence its activities captured.
import { planConsolidation, UnitMove } from './consolidation';
import { duplicateTaskIds } from './task-identity';
import type { Assignment } from '../protocol';
import { chooseVictims, ReplicaLoad } from './victims';

export interface ScaleInDecision {
  /** the assignments to drain and stop, in removal order */
  victims: Assignment[];
  /** the assignments that stay, re-indexed 0..n-1, with their partitions after the moves */
  survivors: Assignment[];
  /** partitions handed from a victim to a survivor */
  moves: UnitMove[];
  reasons: Record<string, string>;
  /** set when the target could not be reached safely (or min replicas refused part of it) */
  stoppedAbove: { target: number; actual: number; reason: string } | null;
}

export function planScaleIn(input: {
  current: Assignment[];
  target: number;
  loads: ReplicaLoad[];
  /** most partitions one replica may own; default ceil(partitions / target), which always fits */
  perInstanceLimit?: number;
  minReplicas?: number;
}): ScaleInDecision {
  const { current, target } = input;
  // Victims and survivors are told apart by task id: a repeated id would stop both of its tasks,
  // so such a placement is refused whole (placement writes refuse it too; this guards older records).
  const repeated = duplicateTaskIds(current);
  if (repeated.length > 0) {
    const reason = `task id ${repeated.join(', ')} names more than one replica: victims cannot be told apart`;
    return { victims: [], survivors: current, moves: [], reasons: {}, stoppedAbove: { target, actual: current.length, reason } };
  }
  const partitionCount = current.reduce((n, a) => n + (a.partitions?.length ?? 0), 0);
  const capacity = input.perInstanceLimit ?? Math.max(1, Math.ceil(partitionCount / Math.max(1, target)));
  const choice = chooseVictims({ replicas: input.loads, removeCount: Math.max(0, current.length - target), minReplicas: input.minReplicas });
  const plan = planConsolidation({
    workers: current.map((a) => ({ id: a.taskId, assigned: (a.partitions ?? []).map(String), capacity })),
    desiredWorkers: target,
    victimOrder: choice.victims,
  });

  const removed = new Set(plan.removed);
  const owned: Record<string, number[]> = {};
  for (const a of current) owned[a.taskId] = [...(a.partitions ?? [])];
  for (const move of plan.moves) {
    owned[move.from] = owned[move.from].filter((p) => String(p) !== move.unit);
    owned[move.to].push(Number(move.unit));
  }

  // Survivors keep their runtime, task id and ports; the ones above the new count take the freed
  // lower indices, so later plans (which keep indices 0..n-1) leave them where they are.
  const kept = current.filter((a) => !removed.has(a.taskId)).sort((a, b) => a.index - b.index);
  const taken = new Set(kept.filter((a) => a.index < kept.length).map((a) => a.index));
  const free = Array.from({ length: kept.length }, (_, i) => i).filter((i) => !taken.has(i));
  const survivors = kept.map((a) => {
    const index = a.index < kept.length ? a.index : free.shift()!;
    const next: Assignment = { ...a, index };
    if (a.partitions) next.partitions = owned[a.taskId].sort((x, y) => x - y);
    return next;
  });

  let stoppedAbove = plan.stoppedAbove ?? null;
  if (!stoppedAbove && choice.refused) stoppedAbove = { target, actual: kept.length, reason: choice.refused };
  return {
    victims: plan.removed.map((taskId) => current.find((a) => a.taskId === taskId)!),
    survivors,
    moves: plan.moves,
    reasons: Object.fromEntries(plan.removed.map((taskId) => [taskId, choice.reasons[taskId]])),
    stoppedAbove,
  };
}
