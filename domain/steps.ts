// The smallest step first (the placement guide: "plan the smallest replica increase"): a scale-out
// from `from` to `to` with `steps` grows through the sizes they name, each applied, converged,
// soaked and compared before the next. A regression rolls back to the last good size.
//   n      add n replicas at this step
//   "P%"   reach P % of the whole increase (at least one more than the step before)
//   "rest" the target
// The last size is always the target (a "rest" is implied); sizes only grow and never pass it.

/** What StepsSchema (protocol/workload.ts) takes: a count, "P%" or "rest". */
export type Step = number | string;

/** The sizes a scale-out from `from` to `to` goes through, in order; [to] without steps. */
export function stepSizes(from: number, to: number, steps: readonly Step[] | undefined): number[] {
  if (!steps?.length || to <= from) return [to];
  const sizes: number[] = [];
  let at = from;
  for (const step of steps) {
    let next: number;
    if (step === 'rest') next = to;
    else if (typeof step === 'number') next = at + step;
    else next = Math.max(at + 1, from + Math.ceil(((to - from) * Number.parseInt(step, 10)) / 100));
    next = Math.min(to, next);
    if (next > at) sizes.push(next);
    at = next;
    if (at === to) break;
  }
  if (sizes[sizes.length - 1] !== to) sizes.push(to);
  return sizes;
}
