// Activities: thin I/O adapters the workflows call. Built by a factory over injected dependencies
// so tests hand in real or fake ports without module mocking.
import type { Pool } from 'pg';
import { createLedgerStore, LedgerEntry } from '../store/ledger';
import { createRegistryStore } from '../store/registry';
import { createRuntimeStore } from '../store/runtimes';

export interface ActivityDeps {
  db: Pool;
}

export function createActivities(deps: ActivityDeps) {
  const runtimes = createRuntimeStore(deps.db);
  const registry = createRegistryStore(deps.db);
  const ledger = createLedgerStore(deps.db);
  return {
    /** A store round trip: proves the worker reaches PostgreSQL. */
    async storePing(): Promise<{ runtimes: number; ready: number; workloads: number }> {
      const all = await runtimes.list();
      const workloads = await registry.listWorkloads();
      return { runtimes: all.length, ready: all.filter((r) => r.status === 'READY').length, workloads: workloads.length };
    },

    async appendLedger(entry: LedgerEntry): Promise<number | null> {
      return ledger.append(entry);
    },
  };
}
export type Activities = ReturnType<typeof createActivities>;
