// The checker's pure verdicts (harness/chaos/checker.ts gathers the facts, these judge them): unit
// tested on their own (test/unit/chaos-verdicts.test.ts), each case named after the seed that
// found it.

/** A fault's window on the multi-host stack (harness/chaos/run.ts NemesisWindow), in ms since the schedule's start at t0. */
export interface FaultWindow {
  kind: string;
  runtime: string | null;
  fromMs: number;
  toMs: number | null;
}

/** A `runtime.lost` event: who declared it (the event's detail.by) and when. */
export interface LostEvent {
  subject: string;
  at: Date;
  by: string | null;
}

/** What an operator's recover request writes as the declaring party: a decision, not a lease verdict. */
const OPERATOR_RECOVERY = 'recover (operator)';

/**
 * Leases never depend on an agent's clock: a node whose clock alone was skewed (no other fault on
 * it within a lease of the skew, no control-plane fault meanwhile) is not declared LOST while it
 * was skewed. An operator's recover of it is no lease verdict (chaos seed 15 of the network long
 * run recovered a skewed node by hand), so it is not counted.
 */
export function skewedAgentsDeclaredLost(
  nemeses: readonly FaultWindow[], lost: readonly LostEvent[], t0: number, leaseTtlMs: number, nowMs: number,
): string[] {
  const found: string[] = [];
  for (const skew of nemeses.filter((n) => n.kind === 'clock-skew')) {
    const skewTo = skew.toMs ?? nowMs - t0;
    const from = t0 + skew.fromMs;
    const to = t0 + skewTo;
    const overlaps = (n: FaultWindow) => n !== skew && n.runtime === skew.runtime && n.fromMs - leaseTtlMs < skewTo && (n.toMs ?? Infinity) + leaseTtlMs > skew.fromMs;
    if (nemeses.some(overlaps) || nemeses.some((n) => n.runtime === null && n.fromMs < skewTo && (n.toMs ?? Infinity) > skew.fromMs)) continue;
    for (const event of lost) {
      if (event.by === OPERATOR_RECOVERY) continue;
      if (event.subject === skew.runtime && event.at.getTime() >= from && event.at.getTime() <= to) {
        found.push(`${skew.runtime} declared LOST at ${event.at.toISOString()} (by ${event.by ?? 'unknown'}) while only its clock was skewed (${new Date(from).toISOString()} – ${new Date(to).toISOString()})`);
      }
    }
  }
  return found;
}
