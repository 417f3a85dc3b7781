// The consumer driver's data contract (DESIGN.md §5) as DDL, in one place: the driver, the load
// generator and anyone checking the sink create the very same tables. Plain SQL on purpose, so that
// producers and auditors who never load this code can feed and check the tables.
import type { Pool } from 'pg';
import { CONSUMER_DDL_LOCK_KEY, consumerTablesDdl, quoteIdentifier } from '../../protocol/consumer-tables';
import { inTransaction } from '../../lib/pg';

// The table names, the identifier rule and the DDL are the data contract every process shares.
export { OFFSETS_TABLE, OWNERSHIP_LOG_TABLE, quoteIdentifier } from '../../protocol/consumer-tables';

/** One transaction helper for the whole code base (lib/pg.ts). */
export const withTransaction = inTransaction;

/** Creates, if missing, the source table (when the source is one), the sink table (when named) and the driver's bookkeeping tables. */
export async function ensureConsumerTables(pool: Pool, source: string | null, sink?: string): Promise<void> {
  await withTransaction(pool, async (client) => {
    await client.query('select pg_advisory_xact_lock($1)', [CONSUMER_DDL_LOCK_KEY]);
    for (const statement of consumerTablesDdl(source, sink)) await client.query(statement);
  });
}

/**
 * Whether the source table carries `appended_at`. A table created by someone else under the bare
 * contract may lack it; the driver then reports no latency rather than altering a table it did not create.
 */
export async function sourceHasAppendedAt(pool: Pool, source: string): Promise<boolean> {
  const { rows } = await pool.query(
    `select 1 from pg_attribute
      where attrelid = to_regclass($1) and attname = 'appended_at' and not attisdropped`,
    [quoteIdentifier(source)],
  );
  return rows.length > 0;
}
