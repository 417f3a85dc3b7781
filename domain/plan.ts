// A plan: the diff from the current to the target assignments of one workload, its warnings, the
// evidence a replica change needs, and the basis it was computed on (registry revision + placement
// fence). Applying a plan whose basis moved is refused as stale.
import { computePlacement, diffAssignments, eligibleRuntimes, PlacementUnavailableError } from './placement';
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
}): Plan {
  const { workload, replicas, runtimes, nowMs } = input;
  const current = input.placements.find((p) => p.workload === workload.name) ?? null;
  const generation = (current?.generation ?? 0) + (input.newGeneration || !current ? 1 : 0);
  const warnings: string[] = [];
  const eligible = eligibleRuntimes(runtimes, workload, nowMs);
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

  let target: Assignment[] = [];
  let unplaced: Unplaced | null = null;
  try {
    const result = computePlacement({
      workload: { ...workload, replicas },
      runtimes,
      nowMs,
      current: input.newGeneration ? [] : current?.assignments ?? [],
      usedSlots: usedSlotsByOthers(workload.name, input.placements),
      colocatedWith,
      generation,
      pass: undefined,
    });
    target = result.assignments;
    warnings.push(...result.warnings);
    if (result.unplaced) {
      unplaced = result.unplaced;
      warnings.push(`capacity short: ${result.unplaced.missing} replica(s) cannot be placed (placement-unavailable)`);
    }
  } catch (error) {
    if (!(error instanceof PlacementUnavailableError)) throw error;
    unplaced = { workload: workload.name, reason: 'placement-unavailable', missing: wanted };
    warnings.push(error.message);
  }
  if (colocatedWith && target.some((a) => !colocatedWith!.some((c) => c.runtimeId === a.runtimeId))) {
    warnings.push(`colocation group ${workload.colocate} split: some replicas are not beside the group`);
  }

  const diff = diffAssignments(current?.assignments ?? [], target);
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
