// A plan: the diff from the current to the target assignments of one workload, its warnings, the
// evidence a replica change needs, and the basis it was computed on (registry revision + placement
// fence). Applying a plan whose basis moved is refused as stale.
import { computePlacement, diffAssignments, eligibleInPass, eligibleRuntimes, PlacementUnavailableError, requirePassOf, type PlacementPass } from './placement';
import type { Assignment, Contract, ReplicaCount } from '../protocol';
import type { Placement, Runtime, Unplaced, Workload } from '../protocol';

export interface PlanBasis {
  /** the workload's registry revision when the plan was made */
  registryRevision: number;
  /** the placement fence when the plan was made (0 = no placement record yet) */
  placementFence: number;
}

export interface Plan {
  workload: string;
  kind: Workload['kind'];
  fromReplicas: number;
  replicas: ReplicaCount;
  /** the assignments the plan leads to */
  target: Assignment[];
  generation: number;
  starts: Assignment[];
  stops: Assignment[];
  moves: { from: Assignment; to: Assignment }[];
  warnings: string[];
  evidenceRequired: string[];
  unplaced: Unplaced | null;
  basis: PlanBasis;
}

/** What a plan is computed from: the fleet, every placement and every workload, read at one moment. */
export interface FleetSnapshot {
  runtimes: readonly Runtime[];
  placements: readonly Placement[];
  workloads: readonly Workload[];
}

/**
 * A target decided elsewhere (the scale-in choice of victims and hand-overs) rather than by
 * rendezvous placement; valid only on the placement it was decided from.
 */
export interface DecidedTarget {
  assignments: Assignment[];
  /** the placement fence the decision was made on */
  onFence: number;
  warnings?: string[];
}

/** A decided target no longer fits: the placement it was decided from has moved. */
export class DecisionStaleError extends Error {
  readonly code = 'stale-plan';
  constructor(
    readonly workload: string,
    readonly decidedOnFence: number,
    readonly currentFence: number,
  ) {
    super(`the target for ${workload} was decided on placement fence ${decidedOnFence}, now ${currentFence}; decide again`);
  }
}

const CONTRACT_ROWS = ['ownership', 'state', 'ordering', 'delivery', 'recovery'] as const;

export function unknownContractRows(contract: Contract): string[] {
  return CONTRACT_ROWS.filter((row) => contract[row] === 'unknown');
}

/** Slots other workloads hold on each runtime (stream subtasks share runtimes up to `slots`). */
export function usedSlotsByOthers(workload: string, placements: readonly Placement[]): Record<string, number> {
  const used: Record<string, number> = {};
  for (const placement of placements) {
    if (placement.workload === workload) continue;
    for (const a of placement.assignments) used[a.runtimeId] = (used[a.runtimeId] ?? 0) + 1;
  }
  return used;
}

/**
 * The diff from current to target. A task kept as it is (same task id on the same runtime) is
 * neither started nor stopped, even when its index or partitions change (a scale-in survivor
 * re-indexed into a freed slot): the PUT of the target updates it in place.
 */
function diffPlan(current: readonly Assignment[], target: readonly Assignment[]) {
  const key = (a: Assignment) => `${a.runtimeId}\n${a.taskId}`;
  const inCurrent = new Set(current.map(key));
  const inTarget = new Set(target.map(key));
  return diffAssignments(current.filter((a) => !inTarget.has(key(a))), target.filter((a) => !inCurrent.has(key(a))));
}

/** Rendezvous placement of the target; a shortfall is recorded as unplaced (with a warning), never thrown. */
function placeTarget(input: {
  workload: Workload;
  replicas: ReplicaCount;
  runtimes: readonly Runtime[];
  nowMs: number;
  current: Assignment[];
  usedSlots: Record<string, number>;
  colocatedWith: Assignment[] | undefined;
  generation: number;
  writtenFence: number | undefined;
  wanted: number;
  pass: PlacementPass | undefined;
}): { target: Assignment[]; unplaced: Unplaced | null; warnings: string[] } {
  const { workload, replicas } = input;
  try {
    const result = computePlacement({
      workload: { ...workload, replicas },
      runtimes: input.runtimes,
      nowMs: input.nowMs,
      current: input.current,
      usedSlots: input.usedSlots,
      colocatedWith: input.colocatedWith,
      generation: input.generation,
      writtenFence: input.writtenFence,
      pass: input.pass,
    });
    const warnings = [...result.warnings];
    if (result.unplaced) warnings.push(`capacity short: ${result.unplaced.missing} replica(s) cannot be placed (placement-unavailable)`);
    return { target: result.assignments, unplaced: result.unplaced ?? null, warnings };
  } catch (error) {
    if (!(error instanceof PlacementUnavailableError)) throw error;
    return { target: [], unplaced: { workload: workload.name, reason: 'placement-unavailable', missing: input.wanted }, warnings: [error.message] };
  }
}

export function buildPlan(input: {
  workload: Workload;
  replicas: ReplicaCount;
  runtimes: readonly Runtime[];
  placements: readonly Placement[];
  /** every workload: the colocation group's leader is found among them */
  workloads?: readonly Workload[];
  nowMs: number;
  /** a stop-the-world replan starts a new generation and keeps nothing sticky */
  newGeneration?: boolean;
  /** a target decided elsewhere (scale-in): taken as it is instead of placing */
  decided?: DecidedTarget;
  /** a pass begun on `runtimes` at `nowMs`, shared by the plans of one snapshot (eligibility once per selector, cached rendezvous keys) */
  pass?: PlacementPass;
  /** the workload's record among `placements` (null: none), when the caller holds it already */
  placement?: Placement | null;
  /**
   * the other placements' replicas per runtime, when the caller counted them: `placements` then
   * needs only the workload's own record and its colocation group's
   */
  usedSlots?: Readonly<Record<string, number>>;
}): Plan {
  const { workload, replicas, runtimes, nowMs, decided, pass } = input;
  if (pass) requirePassOf(pass, runtimes, nowMs);
  const current = input.placement !== undefined ? input.placement : input.placements.find((p) => p.workload === workload.name) ?? null;
  if (decided && decided.onFence !== (current?.fence ?? 0)) throw new DecisionStaleError(workload.name, decided.onFence, current?.fence ?? 0);
  const firstOfGeneration = input.newGeneration || !current;
  const generation = (current?.generation ?? 0) + (firstOfGeneration ? 1 : 0);
  const warnings: string[] = [];
  const eligible = pass ? eligibleInPass(pass, workload.selector) : eligibleRuntimes(runtimes, workload, nowMs);
  if (eligible.length === 0) warnings.push(`selector ${JSON.stringify(workload.selector)} matches no fresh READY runtime`);

  const partitions = workload.kind === 'consumer' ? workload.spec.partitions : workload.kind === 'stream' ? workload.spec.partitions : undefined;
  const wanted = replicas === 'all' ? eligible.length : replicas;
  const contractPartitions = workload.contract.partitions ?? partitions;
  if (contractPartitions !== undefined && wanted > contractPartitions) {
    warnings.push(`replicas ${wanted} above ${contractPartitions} partitions: ${wanted - contractPartitions} replica(s) would own nothing`);
  }
  const unknown = unknownContractRows(workload.contract);
  if (unknown.length) warnings.push(`contract rows unknown: ${unknown.join(', ')} (a replica increase will be refused until they are known)`);

  let colocatedWith: Assignment[] | undefined;
  if (workload.colocate) {
    // The group's leader is its first member (by name) that already has a placement.
    const members = (input.workloads ?? []).filter((w) => w.colocate === workload.colocate && w.name !== workload.name && !w.retired);
    const leader = members
      .map((w) => input.placements.find((p) => p.workload === w.name))
      .find((p): p is Placement => p !== undefined && p.assignments.length > 0 && p.workload < workload.name);
    colocatedWith = leader?.assignments;
  }

  const placed = decided
    ? { target: decided.assignments, unplaced: null, warnings: decided.warnings ?? [] }
    : placeTarget({
        workload, replicas, runtimes, nowMs, generation, colocatedWith, wanted, pass,
        // the write is compare-and-set on the current fence, so it carries the next one
        writtenFence: firstOfGeneration || !current ? undefined : current.fence + 1,
        current: input.newGeneration ? [] : current?.assignments ?? [],
        usedSlots: input.usedSlots ?? usedSlotsByOthers(workload.name, input.placements),
      });
  const { target, unplaced } = placed;
  warnings.push(...placed.warnings);
  if (colocatedWith && target.some((a) => !colocatedWith!.some((c) => c.runtimeId === a.runtimeId))) {
    warnings.push(`colocation group ${workload.colocate} split: some replicas are not beside the group`);
  }

  const diff = diffPlan(current?.assignments ?? [], target);
  const fromReplicas = current?.assignments.length ?? 0;
  const evidenceRequired = target.length > fromReplicas
    ? ['baseline', 'input-ownership', 'state', 'ordering', 'delivery', 'recovery', 'capacity', 'connectivity', 'downstream']
    : target.length < fromReplicas
      ? ['drain receipts', 'removed runtimes own no assignment']
      : [];
  return {
    workload: workload.name,
    kind: workload.kind,
    fromReplicas,
    replicas,
    target,
    generation,
    ...diff,
    warnings,
    evidenceRequired,
    unplaced,
    basis: { registryRevision: workload.revision, placementFence: current?.fence ?? 0 },
  };
}

/** Plans are applied only on the basis they were made on. */
export function basisMoved(plan: PlanBasis, now: PlanBasis): boolean {
  return plan.registryRevision !== now.registryRevision || plan.placementFence !== now.placementFence;
}
