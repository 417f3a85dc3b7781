// The reconcile pass's decisions (DESIGN.md §3 placement), pure: for each workload, plan a change
// or leave it alone, and why. The pass (activities/reconcile.ts) reads the snapshot, stores the
// plans, and applyPlan carries them out.
import type { Placement, Workload } from '../protocol';
import type { PlacementPass } from './placement';
import { buildPlan, type FleetSnapshot, type Plan } from './plan';

/**
 * Why the pass leaves a workload alone:
 * - `retired`: nothing to place;
 * - `kubernetes`: a Kubernetes workload, whose pods the cluster's scheduler places;
 * - `sticky`: sticky after apply, a placed workload moves only through plan/apply or an explicit recompute;
 * - `nothing-to-change`: the plan would start, stop and move nothing;
 * - `all-only-grows`: `all` only grows here; shrinking (a runtime LOST) is recovery's decision, not reconcile's;
 * - `shortfall-only-adds`: an unplaced shortfall is retried by starting what is missing, never by
 *   stopping or moving a running task (a runtime whose lease ran out keeps its tasks until a recovery
 *   decides: DESIGN.md §3 "Static stability").
 */
export type ReconcileSkip = 'retired' | 'kubernetes' | 'sticky' | 'nothing-to-change' | 'all-only-grows' | 'shortfall-only-adds';

export type ReconcileDecision =
  | { workload: string; action: 'plan'; plan: Plan }
  | { workload: string; action: 'skip'; reason: ReconcileSkip };

/**
 * Why a workload is left alone before anything is placed (null: it is planned): retired, or
 * placed and sticky. A placed workload short of its size grows only through /scale or plan/apply
 * (their gates), or when its shortfall is recorded as unplaced.
 */
export function skipWithoutPlanning(workload: Workload, placement: Placement | undefined, unplaced: boolean): ReconcileSkip | null {
  if (workload.retired) return 'retired';
  // A Kubernetes workload's pods are the cluster's to place: nothing of it is placed on agents.
  if (workload.kind === 'service' && workload.runtime) return 'kubernetes';
  // An emptied placement record (a workload retired, then defined again) is pending, as a first
  // placement is: nothing of it runs.
  const emptied = placement !== undefined && placement.assignments.length === 0;
  if (placement && workload.replicas !== 'all' && !unplaced && !emptied) return 'sticky';
  return null;
}

/**
 * One workload: a pending workload is placed, an `all` workload grows onto new matching runtimes,
 * an unplaced shortfall is retried; everything else already placed stays where it is.
 */
export function decideForWorkload(input: FleetSnapshot & {
  workload: Workload;
  /** the workload's placement record (undefined: pending) */
  placement: Placement | undefined;
  /** whether the workload has an unplaced entry */
  unplaced: boolean;
  nowMs: number;
  /** shared by the workloads of one pass (see buildPlan) */
  pass?: PlacementPass;
}): ReconcileDecision {
  const { workload, placement } = input;
  const skip = (reason: ReconcileSkip): ReconcileDecision => ({ workload: workload.name, action: 'skip', reason });
  const early = skipWithoutPlanning(workload, placement, input.unplaced);
  if (early) return skip(early);
  const plan = buildPlan({
    workload, replicas: workload.replicas, runtimes: input.runtimes, placements: input.placements, workloads: input.workloads, nowMs: input.nowMs, pass: input.pass,
  });
  if (!placement) return { workload: workload.name, action: 'plan', plan };
  const takesAway = plan.stops.length + plan.moves.length > 0; // stops or moves a running task
  if (!takesAway && plan.starts.length === 0) return skip('nothing-to-change');
  if (takesAway && workload.replicas === 'all') return skip('all-only-grows');
  if (takesAway) return skip('shortfall-only-adds');
  return { workload: workload.name, action: 'plan', plan };
}

/** The workloads a pass over this snapshot places (the others it skips before placing anything). */
export function workloadsToPlace(input: FleetSnapshot & { unplaced: readonly string[] }): Workload[] {
  const placementOf: Record<string, Placement> = Object.fromEntries(input.placements.map((p) => [p.workload, p]));
  const unplaced = new Set(input.unplaced);
  return input.workloads.filter((workload) => skipWithoutPlanning(workload, placementOf[workload.name], unplaced.has(workload.name)) === null);
}

/** Every workload of the snapshot, in its order. */
export function decideReconcile(input: FleetSnapshot & { unplaced: readonly string[]; nowMs: number; pass?: PlacementPass }): ReconcileDecision[] {
  const placementOf: Record<string, Placement> = Object.fromEntries(input.placements.map((p) => [p.workload, p]));
  const unplaced = new Set(input.unplaced);
  return input.workloads.map((workload) =>
    decideForWorkload({ ...input, workload, placement: placementOf[workload.name], unplaced: unplaced.has(workload.name) }));
}
