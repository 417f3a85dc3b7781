// Tier constraints at every entry point (DESIGN.md §3 "One desired state"): a scale-in below a tier's
// minReplicas, or one inside a change window that forbids scale-in, is refused naming the rule,
// whether the request came from the autoscaler, the API, the CLI or `temporal workflow start`. The
// only exception is a request that says `override` with a reason (the ledger records it).

/** What one tier that holds the workload asks, as of now. */
export interface TierRule {
  tier: string;
  minReplicas: number;
  /** change windows forbidding scale-in that are open now */
  openScaleInWindows: { label: string; endMs: number }[];
}

/** The rules a scale-in to `target` replicas breaks, one line each (empty: none). */
export function scaleInViolations(target: number, rules: readonly TierRule[]): string[] {
  const violations: string[] = [];
  for (const rule of rules) {
    if (target < rule.minReplicas) violations.push(`tier ${rule.tier}: minReplicas is ${rule.minReplicas}, below it is ${target}`);
    for (const window of rule.openScaleInWindows) {
      violations.push(`tier ${rule.tier}: change window ${window.label} forbids scale-in until ${new Date(window.endMs).toISOString()}`);
    }
  }
  return violations;
}
