// The control plane's connection to PostgreSQL: pools and transactions come from lib/pg.ts.
import type { Pool } from 'pg';
import { createPool } from '../lib/pg';

export { createPool, inReadOnlySnapshot, inTransaction, type PoolOptions } from '../lib/pg';

/** PostgreSQL's undefined_table: a table someone else creates (a driver's) does not exist yet. */
export function isUndefinedTable(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '42P01';
}

/** Runs `work` on a short-lived pool of its own (tools and tests that hold only a URL), then ends it. */
export async function withPool<T>(connectionString: string, max: number, work: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = createPool(connectionString, { max });
  try {
    return await work(pool);
  } finally {
    await pool.end().catch(() => {});
  }
}
