// Rendezvous placement (DESIGN.md §3, reference/placement-records.txt).
//
// Pure computation: no I/O, no clock, no randomness; everything returned is plain records and
// arrays. It hashes with node:crypto, which the Temporal workflow sandbox lacks, so activities
// and the API load it and workflows import only its types (and domain/plan's, which loads it):
// eslint.config.mjs and test/unit/architecture.test.ts hold that line.
import * as crypto from 'node:crypto';
import type { Labels, ReplicaCount, WorkloadKind } from '../protocol';
import type { Assignment, Runtime, Unplaced } from '../protocol';

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
  /** how many rendezvous digests the pass has computed (for benchmarks and tests) */
  digestsComputed: number;
}

interface EligibleSet {
  runtimes: Runtime[];
  ids: Set<string>;
}

export function beginPlacementPass(runtimes: readonly Runtime[], nowMs: number): PlacementPass {
  return {
    runtimes,
    nowMs,
    fresh: runtimes.filter((runtime) => isFresh(runtime, nowMs)),
    eligibleBySelector: Object.create(null) as Record<string, EligibleSet>,
    digestsComputed: 0,
  };
}

function sortedEntries(labels: Labels): [string, string][] {
  return Object.keys(labels)
    .sort()
    .map((key): [string, string] => [key, labels[key]]);
}

function selectEligible(fresh: readonly Runtime[], selector: Labels): EligibleSet {
  const matching = fresh.filter((runtime) => matchesSelector(runtime.labels, selector));
  return { runtimes: matching, ids: new Set(matching.map((runtime) => runtime.id)) };
}

function eligibleFor(pass: PlacementPass, selector: Labels): EligibleSet {
  const key = JSON.stringify(sortedEntries(selector));
  return (pass.eligibleBySelector[key] ??= selectEligible(pass.fresh, selector));
}

// ---------------------------------------------------------------------------------------------
// Rendezvous order

/**
 * Lowercase hex SHA-256 of the UTF-8 bytes of `text`. The one-shot `crypto.hash` (Node ≥ 20.12)
 * is the fastest way to a short digest here (no Hash object, and a hex string is cheaper to
 * produce than a Buffer); older Node falls back to createHash.
 */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/** The rendezvous score of a runtime for a workload: sha256("<name>\n<runtimeId>") in hex. */
export function rendezvousScore(name: string, runtimeId: string): string {
  return sha256Hex(`${name}\n${runtimeId}`);
}

export interface ScoredRuntime {
  runtimeId: string;
  /** lowercase hex, all of one length, so string order is numeric order */
  score: string;
}

/** Rendezvous comparator: highest score first; equal scores fall back to runtime id ascending. */
export function compareRendezvous(a: ScoredRuntime, b: ScoredRuntime): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  if (a.runtimeId === b.runtimeId) return 0;
  return a.runtimeId < b.runtimeId ? -1 : 1;
}

/** Runtime ids in rendezvous order for `name`. `score` is injectable so tests can force ties. */
export function rendezvousOrder(
  name: string,
  runtimes: ReadonlyArray<Pick<Runtime, 'id'>>,
  score: (name: string, runtimeId: string) => string = rendezvousScore,
): string[] {
  return runtimes
    .map((runtime): ScoredRuntime => ({ runtimeId: runtime.id, score: score(name, runtime.id) }))
    .sort(compareRendezvous)
    .map((scored) => scored.runtimeId);
}

/**
 * The hot-path equivalent of rendezvousOrder used by computePlacement: each (name, runtime) is
 * hashed once, candidates are ranked by index, and only the first `limit` positions of the order
 * are produced (partial selection when `limit` is small).
 */
function rankByRendezvous(name: string, candidates: readonly Runtime[], limit: number, pass: PlacementPass | undefined): Runtime[] {
  const count = candidates.length;
  if (count === 0 || limit <= 0) return [];
  const digests = new Array<string>(count);
  for (let i = 0; i < count; i++) digests[i] = sha256Hex(`${name}\n${candidates[i].id}`);
  if (pass) pass.digestsComputed += count;

  // Negative when candidate i ranks before candidate j (same order as compareRendezvous).
  const compare = (i: number, j: number): number => {
    const digestI = digests[i];
    const digestJ = digests[j];
    if (digestI !== digestJ) return digestI > digestJ ? -1 : 1;
    const idI = candidates[i].id;
    const idJ = candidates[j].id;
    return idI === idJ ? 0 : idI < idJ ? -1 : 1;
  };

  const wanted = Math.min(limit, count);
  let order: number[];
  if (wanted <= 16 && wanted < count) {
    // Keep the best `wanted` in a small sorted array: O(count × wanted) with tiny constants.
    order = [];
    for (let i = 0; i < count; i++) {
      if (order.length === wanted && compare(i, order[wanted - 1]) >= 0) continue;
      let at = order.length < wanted ? order.length : wanted - 1;
      if (order.length < wanted) order.push(i);
      while (at > 0 && compare(i, order[at - 1]) < 0) {
        order[at] = order[at - 1];
        at--;
      }
      order[at] = i;
    }
  } else {
    order = Array.from({ length: count }, (_, i) => i).sort(compare);
    order.length = wanted;
  }
  return order.map((i) => candidates[i]);
}

// ---------------------------------------------------------------------------------------------
// Placement

export function taskIdFor(name: string, index: number, generation: number): string {
  return `${name}-${index}-g${generation}`;
}

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
  if (pass && (pass.runtimes !== input.runtimes || pass.nowMs !== nowMs)) {
    throw new Error('computePlacement: input.pass was built from other runtimes or another nowMs');
  }
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
  const usedSlots = input.usedSlots ?? {};
  const oneTaskPerRuntime = workload.kind !== 'stream';

  const placed = input.colocatedWith
    ? followLeader(input, input.colocatedWith, eligible, usedSlots, generation, warnings)
    : placeByRendezvous(input, eligible, usedSlots, generation, oneTaskPerRuntime);

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
  generation: number,
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
    if (!eligible.ids.has(assignment.runtimeId)) continue;
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
  const candidates: Runtime[] = [];
  let candidatesWithOwnTasks = 0;
  for (const runtime of eligible.runtimes) {
    if (freeSlots(runtime) <= 0) continue;
    const ownTasks = tasksOnRuntime[runtime.id] ?? 0;
    if (oneTaskPerRuntime && ownTasks > 0) continue;
    candidates.push(runtime);
    if (ownTasks > 0) candidatesWithOwnTasks++;
  }

  const newAssignment = (runtime: Runtime, index: number): void => {
    assignments.push({ runtimeId: runtime.id, index, taskId: taskIdFor(workload.name, index, generation) });
    tasksOnRuntime[runtime.id] = (tasksOnRuntime[runtime.id] ?? 0) + 1;
  };

  let filled = 0;
  if (oneTaskPerRuntime) {
    // The best-ranked free runtime takes the lowest missing index.
    for (const runtime of rankByRendezvous(workload.name, candidates, missingIndices.length, input.pass)) {
      newAssignment(runtime, missingIndices[filled++]);
    }
  } else {
    // Stream subtasks spread first: each missing index goes to the candidate with the fewest of
    // this workload's subtasks, best rank first, until slots run out. Only the top
    // (missing + candidates already loaded) ranks can be chosen: that many candidates include
    // at least `missing` unloaded ones, each with a free slot, which level 0 alone would take.
    const ranked = rankByRendezvous(workload.name, candidates, missingIndices.length + candidatesWithOwnTasks, input.pass);
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
  generation: number,
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
    assignments.push(sticky ? keepAssignment(previous) : { runtimeId, index, taskId: taskIdFor(workload.name, index, generation) });
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
