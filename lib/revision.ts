// What a replica runs, as one short name (DESIGN.md §3 "Versions and rollouts"): a service's or a
// consumer's spec (its image pinned by digest before it is stored) digested, so two definitions that
// run the same thing have one revision whatever the order of their fields. A stream job's spec
// carries its operators' layout, which a rescale rewrites: it has no revision to roll out.
import { canonicalSha256 } from './canonical-json';

export function runsRevisionOf(workload: { kind: string; spec: unknown }): string | undefined {
  if (workload.kind !== 'service' && workload.kind !== 'consumer') return undefined;
  return `r-${canonicalSha256(workload.spec).slice(0, 12)}`;
}
