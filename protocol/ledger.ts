// The scale ledger's vocabulary (DESIGN.md §3 "Ledger"): every row's kind and outcome is one of
// these, so a reader (the API's filters, /metrics, the CLI, tests) can rely on the words.

export const LEDGER_KIND = {
  scaleOut: 'scale-out',
  scaleIn: 'scale-in',
  apply: 'apply',
  replan: 'replan',
  rescale: 'rescale',
  recover: 'recover',
  retire: 'retire',
  autoscale: 'autoscale',
} as const;
export type LedgerKind = (typeof LEDGER_KIND)[keyof typeof LEDGER_KIND];

export const LEDGER_OUTCOMES = [
  // the change is in place
  'completed', 'completed-above-target', 'degraded', 'replanned', 'not-needed',
  // nothing changed
  'refused', 'rejected', 'cancelled', 'stale-plan',
  // a change was made, then the replan compensated it
  'compensated',
  'failed',
  // autoscaler decisions
  'no-change', 'started', 'waiting', 'running',
] as const;
export type LedgerOutcome = (typeof LEDGER_OUTCOMES)[number];
