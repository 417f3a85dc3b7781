// Rendezvous placement (DESIGN.md §3, reference/placement-records.txt).
//
// Pure computation: no I/O, no clock, no randomness; everything returned is plain records and
// arrays. It hashes with node:crypto (domain/rendezvous.ts), which the Temporal workflow sandbox
// lacks, so activities and the API load it and workflows import only its types (and domain/plan's,
// which loads it): eslint.config.mjs and test/unit/architecture.test.ts hold that line.
import { fillKeys, missingPositions, NO_KEY, topAdmitted, type KeyLayout, type KeyWork, type RendezvousKeyCache } from './rendezvous';
import type { Labels, ReplicaCount, WorkloadKind } from '../protocol';
import { taskIdFor } from './task-identity';
import type { Assignment, Runtime, Unplaced } from '../protocol';

export { compareRendezvous, rendezvousOrder, rendezvousScore, RendezvousKeyCache, type ScoredRuntime } from './rendezvous';

// ---------------------------------------------------------------------------------------------
// Types

/** The fields of a workload that placement reads; a full `Workload` fits. */
export interface PlacementWorkload {
  name: string;
  kind: WorkloadKind;
  replicas: ReplicaCount;
  selector: Labels;
  colocate?: string;
  /** the driver spec; only a consumer's `partitions` is read */
  spec: unknown;
}

export interface PlacementInput {
  workload: PlacementWorkload;
  runtimes: readonly Runtime[];
  nowMs: number;
  /** the workload's previous assignments; those still on an eligible runtime stay put */
  current?: readonly Assignment[];
  /** slots taken on each runtime by OTHER workloads */
  usedSlots?: Readonly<Record<string, number>>;
  /** the leading workload's assignments of the same colocate group: follow them, in order */
  colocatedWith?: readonly Assignment[];
  /** partition count of a consumer; defaults to spec.partitions */
  partitions?: number;
  /** task generation used in new task ids (a stop-the-world replan starts a new one); default 1 */
  generation?: number;
  /**
   * The fence the placement write will carry, when the generation was placed before: new task ids
   * then carry it (`-f<fence>`), so no new task takes an id a live or stopped task of the
   * generation held (DESIGN.md §3 "Task identity"). Unset for a generation's first placement.
   */
  writtenFence?: number;
  /** shared per-pass view of the fleet (see beginPlacementPass); must be built from the same runtimes and nowMs */
  pass?: PlacementPass;
}

export interface PlacementResult {
  assignments: Assignment[];
  unplaced?: Unplaced;
  warnings: string[];
}

export interface AssignmentDiff {
  starts: Assignment[];
  stops: Assignment[];
  /** same index, different runtime; such an index appears in neither starts nor stops */
  moves: { from: Assignment; to: Assignment }[];
}

/** Thrown when no runtime at all is fresh READY: the whole assignment pass cannot run. */
export class PlacementUnavailableError extends Error {
  readonly code = 'placement-unavailable' as const;
  constructor(message: string) {
    super(message);
    this.name = 'PlacementUnavailableError';
  }
}

// ---------------------------------------------------------------------------------------------
// Eligibility

/** Fresh = READY and the lease has not expired yet. An unparsable lease is not fresh. */
export function isFresh(runtime: Runtime, nowMs: number): boolean {
  return runtime.status === 'READY' && Date.parse(runtime.leaseExpiresAt) > nowMs;
}

const hasOwn = (record: object, key: string): boolean => Object.prototype.hasOwnProperty.call(record, key);

/** AND over exact values; labels the selector does not mention are ignored; {} matches all. */
export function matchesSelector(labels: Labels, selector: Labels): boolean {
  for (const key in selector) {
    if (!hasOwn(selector, key)) continue;
    // Own-property check so that a selector key like "constructor" never matches the prototype.
    if (!hasOwn(labels, key) || labels[key] !== selector[key]) return false;
  }
  return true;
}

export function eligibleRuntimes(runtimes: readonly Runtime[], workload: Pick<PlacementWorkload, 'selector'>, nowMs: number): Runtime[] {
  return runtimes.filter((runtime) => isFresh(runtime, nowMs) && matchesSelector(runtime.labels, workload.selector));
}

/**
 * A per-pass view of the fleet, shared by computePlacement calls over many workloads so that
 * lease parsing and selector filtering happen once per pass (per distinct selector) instead of
 * once per workload. Transient: never put it in workflow state.
 */
export interface PlacementPass {
  readonly runtimes: readonly Runtime[];
  readonly nowMs: number;
  readonly fresh: readonly Runtime[];
  /** eligible runtimes per canonical selector, filled on demand */
  readonly eligibleBySelector: Record<string, EligibleSet>;
  /** rendezvous keys kept across passes; without it each ranking hashes afresh */
  readonly keys?: RendezvousKeyCache;
  /** how many rendezvous digests the pass has computed (for benchmarks and tests) */
  digestsComputed: number;
}

interface EligibleSet {
  runtimes: Runtime[];
  idList: string[];
  /** each runtime's position in `runtimes` */
  positionOf: Map<string, number>;
  /** the layout of cached keys, when the pass has a cache */
  layout?: KeyLayout;
}

export function beginPlacementPass(runtimes: readonly Runtime[], nowMs: number, options: { keys?: RendezvousKeyCache } = {}): PlacementPass {
  return {
    runtimes,
    nowMs,
    fresh: runtimes.filter((runtime) => isFresh(runtime, nowMs)),
    eligibleBySelector: Object.create(null) as Record<string, EligibleSet>,
    ...(options.keys ? { keys: options.keys } : {}),
    digestsComputed: 0,
  };
}

function sortedEntries(labels: Labels): [string, string][] {
  return Object.keys(labels)
    .sort()
    .map((key): [string, string] => [key, labels[key]]);
}

function selectEligible(fresh: readonly Runtime[], selector: Labels): EligibleSet {
  const runtimes = fresh.filter((runtime) => matchesSelector(runtime.labels, selector));
  const idList = runtimes.map((runtime) => runtime.id);
  return { runtimes, idList, positionOf: new Map(idList.map((id, position) => [id, position])) };
}

function eligibleFor(pass: PlacementPass, selector: Labels): EligibleSet {
  const key = JSON.stringify(sortedEntries(selector));
  let eligible = pass.eligibleBySelector[key];
  if (!eligible) {
    eligible = pass.eligibleBySelector[key] = selectEligible(pass.fresh, selector);
    if (pass.keys) eligible.layout = pass.keys.layout(eligible.idList);
  }
  return eligible;
}

/** A pass answers only for the runtimes and the moment it was begun with. */
export function requirePassOf(pass: PlacementPass, runtimes: readonly Runtime[], nowMs: number): void {
  if (pass.runtimes !== runtimes || pass.nowMs !== nowMs) throw new Error('placement pass built from other runtimes or another nowMs');
}

/** The pass's eligible runtimes for a selector (fresh READY ∩ selector), computed once per selector. */
export function eligibleInPass(pass: PlacementPass, selector: Labels): readonly Runtime[] {
  return eligibleFor(pass, selector).runtimes;
}

// ---------------------------------------------------------------------------------------------
// Rendezvous order

/**
 * The hot-path equivalent of rendezvousOrder: the first `limit` of the eligible runtimes that
 * `admit` accepts, in rendezvous order. Every eligible runtime's key is computed at most once per
 * pass, and never again while the pass's cache holds it.
 */
function rankByRendezvous(name: string, eligible: EligibleSet, limit: number, admit: (runtime: Runtime) => boolean, pass: PlacementPass | undefined): Runtime[] {
  const count = eligible.runtimes.length;
  if (count === 0 || limit <= 0) return [];
  const cached = pass?.keys && eligible.layout ? pass.keys.keysFor(name, eligible.layout) : undefined;
  const keys = cached ?? new Float64Array(count).fill(NO_KEY);
  const computed = fillKeys(name, eligible.idList, keys);
  if (pass) pass.digestsComputed += computed;
  if (pass?.keys) pass.keys.digestsComputed += computed;
  return topAdmitted(name, eligible.idList, keys, limit, (position) => admit(eligible.runtimes[position])).map((position) => eligible.runtimes[position]);
}

/**
 * The first `limit` in rendezvous order for `name` of the pass's eligible runtimes for `selector`
 * that none of the `except` sets names, and how many such candidates there are: counted from the
 * sets, so the cost is the eligible runtimes' keys (cached) and the excluded ids, not a check of
 * every runtime.
 */
export function rankEligibleExcept(
  pass: PlacementPass,
  name: string,
  selector: Labels,
  limit: number,
  except: readonly ReadonlySet<string>[],
): { ranked: Runtime[]; candidates: number } {
  const eligible = eligibleFor(pass, selector);
  const excluded = new Set<string>();
  for (const ids of except) for (const id of ids) if (eligible.positionOf.has(id)) excluded.add(id);
  const ranked = rankByRendezvous(name, eligible, limit, (runtime) => !excluded.has(runtime.id), pass);
  return { ranked, candidates: eligible.runtimes.length - excluded.size };
}

/** Keys computed ahead of ranking have nowhere to go but a cache. */
function cacheOf(pass: PlacementPass): RendezvousKeyCache {
  if (!pass.keys) throw new Error('placement pass without a key cache: keys are computed ahead only into a cache');
  return pass.keys;
}

/**
 * The keys `pass` lacks (in its cache) for ranking these workloads over their eligible runtimes,
 * as work any thread can compute (computeKeyWork), and where each job's keys go back.
 */
export function missingKeys(pass: PlacementPass, workloads: readonly Pick<PlacementWorkload, 'name' | 'selector'>[]): { work: KeyWork; targets: Float64Array[] } {
  const cache = cacheOf(pass);
  const lists: KeyLayout[] = [];
  const names: string[] = [];
  const listOf: number[] = [];
  const positions: (Int32Array | null)[] = [];
  const start: number[] = [0];
  const targets: Float64Array[] = [];
  for (const workload of workloads) {
    const layout = eligibleFor(pass, workload.selector).layout!;
    const cached = cache.keysFor(workload.name, layout);
    const missing = missingPositions(cached);
    if (missing.length === 0) continue;
    let list = lists.indexOf(layout);
    if (list < 0) list = lists.push(layout) - 1;
    names.push(workload.name);
    listOf.push(list);
    targets.push(cached);
    positions.push(missing.length === cached.length ? null : missing);
    start.push(start[start.length - 1] + missing.length);
  }
  const work: KeyWork = { lists: lists.map((layout) => layout.ids), names, listOf: Int32Array.from(listOf), positions, start: Int32Array.from(start) };
  return { work, targets };
}

/** Writes keys computed for `work` (missingKeys) into the pass's cache, and counts them as the pass's digests. */
export function storeKeys(pass: PlacementPass, work: KeyWork, targets: readonly Float64Array[], keys: Float64Array): void {
  const cache = cacheOf(pass);
  for (let job = 0; job < work.names.length; job++) {
    const target = targets[job];
    const positions = work.positions[job];
    let at = work.start[job];
    if (positions === null) for (let p = 0; p < target.length; p++) target[p] = keys[at++];
    else for (let k = 0; k < positions.length; k++) target[positions[k]] = keys[at++];
  }
  const total = work.start[work.names.length];
  pass.digestsComputed += total;
  cache.digestsComputed += total;
}

// ---------------------------------------------------------------------------------------------
// Placement

export { taskIdFor };

function readSpecPartitions(spec: unknown): number | undefined {
  if (typeof spec !== 'object' || spec === null || !('partitions' in spec)) return undefined;
  const partitions = (spec as { partitions: unknown }).partitions;
  return typeof partitions === 'number' && Number.isInteger(partitions) && partitions > 0 ? partitions : undefined;
}

/** The partition count that governs a workload's split, or undefined when it has none. */
function consumerPartitions(input: PlacementInput): number | undefined {
  if (input.workload.kind !== 'consumer') return undefined;
  return input.partitions ?? readSpecPartitions(input.workload.spec);
}

/**
 * Replica at position k (by index) of n owns partitions p with p % n === k. With indices
 * 0..n-1 that is "replica i owns p % n === i"; with a gap (a shortfall) every partition still has
 * an owner. Unchanged n gives unchanged ownership.
 */
function splitPartitions(assignments: Assignment[], partitions: number): void {
  const owners = assignments.length;
  assignments.forEach((assignment, position) => {
    const owned: number[] = [];
    for (let partition = position; partition < partitions; partition += owners) owned.push(partition);
    assignment.partitions = owned;
  });
}

/** A copy of a sticky assignment without derived fields (partitions are recomputed). */
function keepAssignment(assignment: Assignment): Assignment {
  const kept: Assignment = { runtimeId: assignment.runtimeId, index: assignment.index, taskId: assignment.taskId };
  if (assignment.ports) kept.ports = { ...assignment.ports };
  // a survivor keeps running what it runs (DESIGN.md §3 "Versions and rollouts")
  if (assignment.revision !== undefined) kept.revision = assignment.revision;
  return kept;
}

/**
 * Target assignments of one workload. Throws PlacementUnavailableError when no runtime is fresh
 * READY at all; otherwise places what fits and reports the rest as unplaced.
 */
export function computePlacement(input: PlacementInput): PlacementResult {
  const { workload, nowMs } = input;
  if (workload.replicas !== 'all' && !(Number.isInteger(workload.replicas) && workload.replicas >= 1)) {
    // 0 is refused by the schema (retire or delete instead); never read it as "place nothing".
    throw new RangeError(`workload "${workload.name}": replicas must be an integer ≥ 1 or "all", got ${workload.replicas}`);
  }
  const pass = input.pass;
  if (pass) requirePassOf(pass, input.runtimes, nowMs);
  const fresh = pass ? pass.fresh : input.runtimes.filter((runtime) => isFresh(runtime, nowMs));
  if (fresh.length === 0) {
    throw new PlacementUnavailableError(`no fresh READY runtime: cannot place workload "${workload.name}"`);
  }
  const eligible = pass ? eligibleFor(pass, workload.selector) : selectEligible(fresh, workload.selector);

  const warnings: string[] = [];
  if (eligible.runtimes.length === 0) {
    warnings.push(`selector matches nothing: no fresh READY runtime carries ${JSON.stringify(workload.selector)}`);
  }
  const generation = input.generation ?? 1;
  const mintTaskId = (index: number): string => taskIdFor(workload.name, index, generation, input.writtenFence);
  const usedSlots = input.usedSlots ?? {};
  const oneTaskPerRuntime = workload.kind !== 'stream';

  const placed = input.colocatedWith
    ? followLeader(input, input.colocatedWith, eligible, usedSlots, mintTaskId, warnings)
    : placeByRendezvous(input, eligible, usedSlots, mintTaskId, oneTaskPerRuntime);

  const assignments = placed.assignments.sort((a, b) => a.index - b.index);
  const partitions = consumerPartitions(input);
  if (partitions !== undefined) {
    if (placed.desired > partitions) {
      warnings.push(`replicas ${placed.desired} > partitions ${partitions}: ${placed.desired - partitions} replica(s) will own no partition`);
    }
    if (assignments.length > 0) splitPartitions(assignments, partitions);
  }

  const result: PlacementResult = { assignments, warnings };
  if (placed.missing > 0) {
    // Selector and colocation causes have their own warnings above; the rest is capacity.
    if (!input.colocatedWith && eligible.runtimes.length > 0) {
      warnings.push(`capacity short: placed ${assignments.length} of ${placed.desired} replica(s), ${placed.missing} unplaced`);
    }
    result.unplaced = { workload: workload.name, reason: 'placement-unavailable', missing: placed.missing };
  }
  return result;
}

interface Placed {
  assignments: Assignment[];
  desired: number;
  missing: number;
}

function placeByRendezvous(
  input: PlacementInput,
  eligible: EligibleSet,
  usedSlots: Readonly<Record<string, number>>,
  mintTaskId: (index: number) => string,
  oneTaskPerRuntime: boolean,
): Placed {
  const { workload } = input;
  const desired = workload.replicas === 'all' ? eligible.runtimes.length : workload.replicas;
  if (desired === 0) {
    // replicas "all" under a selector that matches nothing: unplaced, not silently empty.
    return { assignments: [], desired: 0, missing: 1 };
  }

  // Sticky: keep every previous assignment whose runtime is still eligible and whose index is
  // still wanted (shrinking drops the highest indices).
  const assignments: Assignment[] = [];
  const keptIndices = new Set<number>();
  const tasksOnRuntime: Record<string, number> = Object.create(null) as Record<string, number>;
  const previous = [...(input.current ?? [])].sort((a, b) => a.index - b.index);
  for (const assignment of previous) {
    if (assignment.index >= desired || keptIndices.has(assignment.index)) continue;
    if (!eligible.positionOf.has(assignment.runtimeId)) continue;
    if (oneTaskPerRuntime && tasksOnRuntime[assignment.runtimeId]) continue;
    assignments.push(keepAssignment(assignment));
    keptIndices.add(assignment.index);
    tasksOnRuntime[assignment.runtimeId] = (tasksOnRuntime[assignment.runtimeId] ?? 0) + 1;
  }

  const missingIndices: number[] = [];
  for (let index = 0; index < desired; index++) if (!keptIndices.has(index)) missingIndices.push(index);
  if (missingIndices.length === 0) return { assignments, desired, missing: 0 };

  const freeSlots = (runtime: Runtime): number =>
    runtime.slots - (usedSlots[runtime.id] ?? 0) - (tasksOnRuntime[runtime.id] ?? 0);
  const isCandidate = (runtime: Runtime): boolean => freeSlots(runtime) > 0 && !(oneTaskPerRuntime && tasksOnRuntime[runtime.id]);
  // Candidates already holding some of this workload's tasks (kept ones: all eligible).
  let candidatesWithOwnTasks = 0;
  for (const runtimeId in tasksOnRuntime) if (isCandidate(eligible.runtimes[eligible.positionOf.get(runtimeId)!])) candidatesWithOwnTasks++;

  const newAssignment = (runtime: Runtime, index: number): void => {
    assignments.push({ runtimeId: runtime.id, index, taskId: mintTaskId(index) });
    tasksOnRuntime[runtime.id] = (tasksOnRuntime[runtime.id] ?? 0) + 1;
  };

  let filled = 0;
  if (oneTaskPerRuntime) {
    // The best-ranked free runtime takes the lowest missing index.
    for (const runtime of rankByRendezvous(workload.name, eligible, missingIndices.length, isCandidate, input.pass)) {
      newAssignment(runtime, missingIndices[filled++]);
    }
  } else {
    // Stream subtasks spread first: each missing index goes to the candidate with the fewest of
    // this workload's subtasks, best rank first, until slots run out. Only the top
    // (missing + candidates already loaded) ranks can be chosen: that many candidates include
    // at least `missing` unloaded ones, each with a free slot, which level 0 alone would take.
    const ranked = rankByRendezvous(workload.name, eligible, missingIndices.length + candidatesWithOwnTasks, isCandidate, input.pass);
    // Loads only grow, so at `level` every runtime with a free slot carries at least `level`
    // subtasks; levels are bounded by the slot counts, and stop once no slot is free.
    for (let level = 0; filled < missingIndices.length; level++) {
      let anyFreeSlot = false;
      for (const runtime of ranked) {
        if (filled === missingIndices.length) break;
        if (freeSlots(runtime) <= 0) continue;
        anyFreeSlot = true;
        if ((tasksOnRuntime[runtime.id] ?? 0) === level) newAssignment(runtime, missingIndices[filled++]);
      }
      if (!anyFreeSlot) break;
    }
  }
  return { assignments, desired, missing: missingIndices.length - filled };
}

function followLeader(
  input: PlacementInput,
  leader: readonly Assignment[],
  eligible: EligibleSet,
  usedSlots: Readonly<Record<string, number>>,
  mintTaskId: (index: number) => string,
  warnings: string[],
): Placed {
  const { workload } = input;
  const groupName = workload.colocate ?? '(unnamed)';
  if (leader.length === 0) {
    const missing = workload.replicas === 'all' ? Math.max(1, eligible.runtimes.length) : workload.replicas;
    warnings.push(`colocation split: the leader of group "${groupName}" has no assignments to follow`);
    return { assignments: [], desired: missing, missing };
  }
  if (workload.replicas !== 'all' && workload.replicas !== leader.length) {
    warnings.push(`replicas ${workload.replicas} differ from the ${leader.length} of colocate group "${groupName}": following the group`);
  }
  const previousByIndex: Record<number, Assignment> = {};
  for (const assignment of input.current ?? []) previousByIndex[assignment.index] ??= assignment;
  const runtimesById: Record<string, Runtime> = Object.create(null) as Record<string, Runtime>;
  for (const runtime of eligible.runtimes) runtimesById[runtime.id] = runtime;

  const assignments: Assignment[] = [];
  const tasksOnRuntime: Record<string, number> = Object.create(null) as Record<string, number>;
  let missing = 0;
  leader.forEach((leaderAssignment, index) => {
    const runtimeId = leaderAssignment.runtimeId;
    const runtime = runtimesById[runtimeId];
    const previous = previousByIndex[index];
    const sticky = previous !== undefined && previous.runtimeId === runtimeId;
    const ownTasks = tasksOnRuntime[runtimeId] ?? 0;
    let refusal: string | undefined;
    if (!runtime) refusal = 'is not eligible (not fresh READY or outside the selector)';
    else if (workload.kind !== 'stream' && ownTasks > 0) refusal = `already runs a task of this ${workload.kind}`;
    else if (!sticky && runtime.slots - (usedSlots[runtimeId] ?? 0) - ownTasks <= 0) refusal = 'has no free slot';
    if (refusal) {
      missing++;
      warnings.push(`colocation split: replica ${index} cannot follow group "${groupName}" onto runtime ${runtimeId}: it ${refusal}`);
      return;
    }
    assignments.push(sticky ? keepAssignment(previous) : { runtimeId, index, taskId: mintTaskId(index) });
    tasksOnRuntime[runtimeId] = ownTasks + 1;
  });
  return { assignments, desired: leader.length, missing };
}

// ---------------------------------------------------------------------------------------------
// Diff

/**
 * Current → target, matched by index. Same index on another runtime is a move. Same index and
 * runtime with another task id (a new generation) is a stop plus a start: the task is replaced.
 */
export function diffAssignments(current: readonly Assignment[], target: readonly Assignment[]): AssignmentDiff {
  const byIndex = (a: Assignment, b: Assignment): number => a.index - b.index;
  const currentByIndex: Record<number, Assignment> = {};
  for (const assignment of current) currentByIndex[assignment.index] ??= assignment;
  const matched = new Set<Assignment>();
  const diff: AssignmentDiff = { starts: [], stops: [], moves: [] };
  for (const to of [...target].sort(byIndex)) {
    const from = currentByIndex[to.index];
    if (!from || matched.has(from)) {
      diff.starts.push(to);
      continue;
    }
    matched.add(from);
    if (from.runtimeId !== to.runtimeId) diff.moves.push({ from, to });
    else if (from.taskId !== to.taskId) {
      diff.stops.push(from);
      diff.starts.push(to);
    }
  }
  // Everything current that no target index claimed (dropped indices, stray duplicates) stops.
  for (const from of current) if (!matched.has(from)) diff.stops.push(from);
  diff.stops.sort(byIndex);
  diff.starts.sort(byIndex);
  return diff;
}
