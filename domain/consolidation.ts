// Scale-in by consolidation (reference/fleet-reconcile-loop.txt, DESIGN.md §4.2): while the fleet
// is above target, reclaim an idle worker; else drain the least-loaded worker by moving each of its
// units onto a remaining worker with room. If even one unit cannot be placed, every move of that
// worker is rolled back and consolidation stops: the fleet ends one worker above target rather
// than one unit without a worker. Moving a unit here is bookkeeping; applying it is the caller's.

export interface ConsolidationWorker {
  id: string;
  /** unit ids (partitions, users …) currently on this worker */
  assigned: string[];
  /** most units one worker may hold */
  capacity: number;
}

export interface ConsolidationInput {
  workers: ConsolidationWorker[];
  desiredWorkers: number;
  /**
   * Worker ids in the order they should be removed (e.g. domain/victims' choice: idle first, by
   * load, never by age). When given, it replaces the built-in "no units first, then fewest units".
   */
  victimOrder?: string[];
}

export interface UnitMove {
  unit: string;
  from: string;
  to: string;
}

export interface ConsolidationPlan {
  /** committed moves only, one per unit: `from` is its original worker, `to` its final one */
  moves: UnitMove[];
  /** workers to stop, in the order they were freed */
  removed: string[];
  /** set when no safe move remained before reaching the target */
  stoppedAbove?: { target: number; actual: number; reason: string };
}

// Plain `<` comparison, not localeCompare: the order must not depend on the host's locale, since
// workflows replay this on any worker.
const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export function planConsolidation(input: ConsolidationInput): ConsolidationPlan {
  const target = Math.max(0, input.desiredWorkers);
  // Working copies sorted by id so every tie below resolves the same way.
  let remaining = input.workers
    .map((worker) => ({ id: worker.id, capacity: worker.capacity, assigned: [...worker.assigned] }))
    .sort(byId);
  const moves: UnitMove[] = [];
  const removed: string[] = [];

  while (remaining.length > target) {
    const victim = nextVictim(remaining, input.victimOrder);
    if (!victim) break; // the caller named no further victim
    const others = remaining.filter((worker) => worker !== victim);
    const refusal = drainInto(victim, others, moves);
    if (refusal) return { moves, removed, stoppedAbove: { target, actual: remaining.length, reason: refusal } };
    removed.push(victim.id);
    remaining = others;
  }

  return { moves, removed };
}

/**
 * The caller's next named victim, else the least-loaded worker: fewest units, ties by id
 * (`remaining` is id-sorted and the sort is stable), so an idle worker (no units) always goes first.
 */
function nextVictim(remaining: ConsolidationWorker[], victimOrder: string[] | undefined): ConsolidationWorker | undefined {
  if (victimOrder) {
    const id = victimOrder.find((name) => remaining.some((worker) => worker.id === name));
    return remaining.find((worker) => worker.id === id);
  }
  return [...remaining].sort((a, b) => a.assigned.length - b.assigned.length)[0];
}

/**
 * Moves every unit of `victim` onto `others` (most room first). Place tentatively on a tally of the
 * units each destination would gain; nothing is applied until every unit has a place, so a rollback
 * is just dropping the tally. Returns the reason when one unit has nowhere to go (nothing moved).
 */
function drainInto(victim: ConsolidationWorker, others: ConsolidationWorker[], moves: UnitMove[]): string | null {
  const gained = others.map(() => 0);
  const tentative: UnitMove[] = [];
  for (const unit of victim.assigned) {
    const position = roomiest(others, gained);
    if (position === undefined) {
      return (
        `cannot place unit "${unit}" of worker "${victim.id}": no remaining worker has room ` +
        `(rolled back ${tentative.length} move(s) of that worker)`
      );
    }
    gained[position] += 1;
    tentative.push({ unit, from: victim.id, to: others[position].id });
  }
  for (const move of tentative) {
    others.find((worker) => worker.id === move.to)!.assigned.push(move.unit);
    recordMove(moves, move);
  }
  return null;
}

/**
 * Position of the worker with the most free room (capacity − assigned − gained > 0), ties by id;
 * undefined when no worker has room.
 */
function roomiest(workers: ConsolidationWorker[], gained: number[]): number | undefined {
  let best: number | undefined;
  let bestRoom = 0;
  workers.forEach((worker, position) => {
    const room = worker.capacity - worker.assigned.length - gained[position];
    if (room > bestRoom || (room === bestRoom && best !== undefined && worker.id < workers[best].id)) {
      best = position;
      bestRoom = room;
    }
  });
  return best;
}

/**
 * A unit moved onto a worker that is later drained moves again; keep one move per unit from its
 * original worker to its final one, so the plan applies each unit exactly once.
 */
function recordMove(moves: UnitMove[], move: UnitMove): void {
  const earlier = moves.find((existing) => existing.unit === move.unit && existing.to === move.from);
  if (earlier) earlier.to = move.to;
  else moves.push(move);
}
