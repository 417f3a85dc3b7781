// Ledger activities: the append-only scale events every workflow writes.
import type { LedgerEntry } from '../store/ledger';
import { idempotencyKey, type ActivityDeps } from './ports';

export function ledgerActivities(deps: ActivityDeps) {
  return {
    /** Appends one row; a retried activity writes it once (keyed by workflow, run and activity id). */
    async appendLedger(entry: LedgerEntry): Promise<number | null> {
      return deps.stores.ledger.append({ ...entry, idempotencyKey: entry.idempotencyKey ?? idempotencyKey() });
    },
  };
}
