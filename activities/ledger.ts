// Ledger activities: the append-only scale events every workflow writes, and waiting for one.
import { ApplicationFailure } from '@temporalio/activity';
import type { LedgerEntry, LedgerRow } from '../store/ledger';
import { heartbeat, idempotencyKey, pause, runningWorkflow, type ActivityDeps } from './ports';

export function ledgerActivities(deps: ActivityDeps) {
  /** The newest row of `kind` for `workload` written at or after `sinceIso`, with an outcome, or null. */
  async function rowSince(input: { workload: string; kind: string; sinceIso: string }): Promise<LedgerRow | null> {
    const since = Date.parse(input.sinceIso);
    const rows = await deps.stores.ledger.list({ workload: input.workload, kind: input.kind, limit: 5 });
    return rows.find((r) => Date.parse(r.at) >= since && r.outcome) ?? null;
  }

  return {
    /** When the running replan of `workload` started (null: none runs): a rescale joins only a replan that began after its window opened. */
    async runningReplanStart(input: { workload: string }): Promise<{ startedAt: string | null }> {
      return { startedAt: (await runningWorkflow(`replan:${input.workload}`))?.startTime.toISOString() ?? null };
    },
    /** The row an operation someone else started wrote at its end, if one was written at or after `sinceIso` (awaitLedgerRow without the wait). */
    async findLedgerRow(input: { workload: string; kind: string; sinceIso: string }): Promise<LedgerRow | null> {
      return rowSince(input);
    },

    /** Appends one row; a retried activity writes it once (keyed by workflow, run and activity id). */
    async appendLedger(entry: LedgerEntry): Promise<number | null> {
      return deps.stores.ledger.append({ ...entry, idempotencyKey: entry.idempotencyKey ?? idempotencyKey() });
    },

    /**
     * Waits for the row an operation that someone else started writes at its end (e.g. the replan
     * a recovery started while a rescale wanted to start it): the newest row of that kind for the
     * workload written at or after `sinceIso`, with an outcome.
     */
    async awaitLedgerRow(input: { workload: string; kind: string; sinceIso: string; timeoutMs: number }): Promise<LedgerRow> {
      const deadline = deps.now() + input.timeoutMs;
      for (;;) {
        const row = await rowSince(input);
        heartbeat({ waitingFor: `${input.kind} of ${input.workload}`, found: row?.id ?? null });
        if (row) return row;
        if (deps.now() > deadline) {
          throw ApplicationFailure.create({ type: 'converge-deadline', message: `no ${input.kind} row for ${input.workload} within ${input.timeoutMs} ms`, nonRetryable: true });
        }
        await pause(250);
      }
    },
  };
}
