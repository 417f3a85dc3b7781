// The scale ledger's vocabulary (DESIGN.md §3 "Ledger"): every row's kind and outcome is one of
// these, so a reader (the API's filters, /metrics, the CLI, tests) can rely on the words. No schema
// here: every workflow run evaluates this module (workflows/operation.ts), and building zod
// schemas is what a run's module evaluation costs; the rows as read back are ./api.ts's.
export const LEDGER_KIND = {
  scaleOut: 'scale-out',
  scaleIn: 'scale-in',
  apply: 'apply',
  replan: 'replan',
  rescale: 'rescale',
  recover: 'recover',
  retire: 'retire',
  autoscale: 'autoscale',
  rollout: 'rollout',
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

/**
 * How an operation ended, in the API's words (DESIGN.md §6; GET /v1/operations/:id `status`, the
 * ScalegateOutcome search attribute, the CLI's exit code): completed, refused (nothing changed),
 * compensated (changed, then replanned), cancelled (nothing changed), failed.
 */
export const OPERATION_STATUSES = ['running', 'completed', 'refused', 'compensated', 'cancelled', 'failed'] as const;
export type OperationStatusWord = (typeof OPERATION_STATUSES)[number];

/** Every outcome word a workflow or the ledger says → the API's status word (typed: a new word must be placed here). */
const STATUS_OF_OUTCOME: Record<LedgerOutcome, OperationStatusWord> = {
  running: 'running', completed: 'completed', refused: 'refused', compensated: 'compensated', rejected: 'cancelled', cancelled: 'cancelled', failed: 'failed',
  'stale-plan': 'refused',
  // applied with a shortfall recorded as unplaced
  degraded: 'completed',
  // a rescale that could not cut over hot and went to the stop-the-world replan, as asked
  replanned: 'completed',
  // a scale that found more running than asked, and left them (nothing to remove)
  'completed-above-target': 'completed',
  // a recovery of a runtime that came back before it began
  'not-needed': 'completed',
  // the autoscaler's decisions: kept, a scale started, waiting (cooldown, another operation)
  'no-change': 'completed', started: 'completed', waiting: 'running',
};

/** The API's status word of an outcome word; a word nobody placed is `failed`, never a success by default. */
export function statusOfOutcome(outcome: string): OperationStatusWord {
  return Object.hasOwn(STATUS_OF_OUTCOME, outcome) ? STATUS_OF_OUTCOME[outcome as LedgerOutcome] : 'failed';
}

/**
 * An operation's status word from what Temporal's visibility lists of a run (GET /v1/operations):
 * its execution status and its ScalegateOutcome search attribute (set at its end; null before, or
 * for a run that ended without setting it). A closed run's outcome decides, so a start that refused
 * itself (FAILED, outcome refused) is `refused`; a cancellation or termination is `cancelled`.
 */
export function listedStatusOf(temporalStatus: string, outcome: string | null | undefined): OperationStatusWord {
  if (temporalStatus === 'RUNNING') return 'running';
  if (temporalStatus === 'CANCELLED' || temporalStatus === 'TERMINATED') return 'cancelled';
  if (outcome) return statusOfOutcome(outcome);
  return temporalStatus === 'COMPLETED' ? 'completed' : 'failed';
}
