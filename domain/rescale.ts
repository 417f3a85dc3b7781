// Whether a rescale of one operator of a stream job can cut over hot, at a checkpoint barrier
// (reference/hot-rescale-at-a-barrier.txt), or goes to the stop-the-world replan, and why; and where
// its new subtasks run. Pure (placement's hash is node:crypto: activities load this, workflows only its types).
import type { Assignment, StreamSpec } from '../protocol';
import { rendezvousOrder, taskIdFor } from './placement';
import { blockOf, operatorBlocks, type OperatorBlock } from './stream';

export type RescaleEligibility =
  | { hot: true; operator: OperatorBlock; from: number; to: number }
  | { hot: false; reason: string; from: number | null; to: number };

/**
 * Hot only for the keyed aggregate (the operator whose state moves by key group; a source's read
 * positions and the two-phase-commit sink's transaction cycles are what a hot rescale must keep
 * running), and only by an integer factor (2 → 4, 4 → 2): each new subtask's key groups then come
 * from exactly one old subtask or each old subtask's from exactly one new one.
 */
export function rescaleEligibility(spec: StreamSpec, operatorId: string, parallelism: number): RescaleEligibility {
  const operator = operatorBlocks(spec).find((b) => b.id === operatorId);
  if (!operator) return { hot: false, from: null, to: parallelism, reason: `the job has no operator "${operatorId}"` };
  const from = operator.parallelism;
  const refuse = (reason: string): RescaleEligibility => ({ hot: false, from, to: parallelism, reason });
  if (parallelism === from) return refuse(`operator "${operatorId}" already runs ${from} subtasks`);
  if (operator.kind !== blockOf(spec, 'keyed-aggregate').kind) {
    return refuse(`operator "${operatorId}" is the ${operator.kind}: only the keyed-aggregate rescales hot (a source's read positions and the sink's commit cycle must not move mid-run)`);
  }
  const integerFactor = parallelism > from ? parallelism % from === 0 : from % parallelism === 0;
  if (!integerFactor) return refuse(`${from} → ${parallelism} is not an integer factor (2 → 4, 4 → 2): the hot cutover maps key groups between whole subtasks only`);
  return { hot: true, operator, from, to: parallelism };
}

/**
 * Where the new subtasks of a hot rescale run: each on the eligible runtime with a free slot that
 * hosts the fewest of the job's subtasks, best rendezvous rank first. Indices the slots cannot hold
 * are returned as `missing` (a hot rescale then does not start: its replan fallback places the job whole).
 */
export function placeAppended(input: {
  job: string;
  indices: readonly number[];
  generation: number;
  /** eligible runtimes (fresh, READY, matching the selector) with their slots */
  runtimes: ReadonlyArray<{ id: string; slots: number }>;
  /** slots each runtime has taken, this job's subtasks included */
  usedSlots: Readonly<Record<string, number>>;
  /** this job's subtasks per runtime */
  jobSubtasks: Readonly<Record<string, number>>;
}): { assignments: Assignment[]; missing: number[] } {
  const order = rendezvousOrder(input.job, input.runtimes);
  const rank = new Map(order.map((id, i) => [id, i]));
  const used = { ...input.usedSlots };
  const mine = { ...input.jobSubtasks };
  const assignments: Assignment[] = [];
  const missing: number[] = [];
  for (const index of input.indices) {
    const candidates = input.runtimes.filter((r) => r.slots - (used[r.id] ?? 0) > 0);
    if (candidates.length === 0) {
      missing.push(index);
      continue;
    }
    candidates.sort((a, b) => (mine[a.id] ?? 0) - (mine[b.id] ?? 0) || rank.get(a.id)! - rank.get(b.id)!);
    const chosen = candidates[0].id;
    used[chosen] = (used[chosen] ?? 0) + 1;
    mine[chosen] = (mine[chosen] ?? 0) + 1;
    assignments.push({ runtimeId: chosen, index, taskId: taskIdFor(input.job, index, input.generation) });
  }
  return { assignments, missing };
}
