// The consumer driver's data contract (DESIGN.md §5) as DDL, in one place: the driver, the load
// generator and anyone checking the sink create the very same tables. Plain SQL on purpose, so that
// producers and auditors who never load this code can feed and check the tables.
import type { Pool } from 'pg';
import { inTransaction } from '../../store/db';

export const OFFSETS_TABLE = 'scalegate_consumer_offsets';
export const OWNERSHIP_LOG_TABLE = 'scalegate_consumer_ownership_log';

/** Serialises `create table if not exists` across agents starting at once (concurrent creates of one table can fail). */
const DDL_LOCK_KEY = 727_274_105; // arbitrary, fixed: "scalegate consumer tables"

const SQL_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A table name as a quoted SQL identifier. Only plain lowercase identifiers pass (the same rule
 * as ConsumerSpecSchema), so quoting can never be escaped; anything else throws.
 */
export function quoteIdentifier(name: string): string {
  if (!SQL_IDENTIFIER.test(name)) throw new Error(`not a plain lowercase SQL identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/** One transaction helper for the whole code base (store/db.ts). */
export const withTransaction = inTransaction;

/** The input table: the contract's columns plus `appended_at` (defaulted, so producers may ignore it) for latency. */
export function sourceTableDdl(source: string): string {
  return `create table if not exists ${quoteIdentifier(source)} (
    partition int not null,
    "offset" bigint not null,
    key text not null,
    payload jsonb not null default '{}',
    appended_at timestamptz not null default now(),
    primary key (partition, "offset"))`;
}

/** The output table: one row per processed input record; the primary key makes a duplicate fail loudly. */
export function sinkTableDdl(sink: string): string {
  return `create table if not exists ${quoteIdentifier(sink)} (
    partition int,
    "offset" bigint,
    key text,
    payload jsonb,
    task_id text,
    incarnation text,
    processed_at timestamptz default now(),
    primary key (partition, "offset"))`;
}

const BOOKKEEPING_DDL = [
  `create table if not exists ${OFFSETS_TABLE} (
    workload text not null,
    partition int not null,
    committed_offset bigint not null default -1, -- last processed offset; -1 = none yet
    owner_task text,
    owner_fence bigint,
    primary key (workload, partition))`,
  `create table if not exists ${OWNERSHIP_LOG_TABLE} (
    id bigserial primary key,
    workload text not null,
    partition int not null,
    task_id text not null,
    incarnation text,
    fence bigint,
    event text not null check (event in ('acquire', 'release')),
    at timestamptz not null default now())`,
  `create index if not exists ${OWNERSHIP_LOG_TABLE}_by_partition on ${OWNERSHIP_LOG_TABLE} (workload, partition, id)`,
];

/** Creates, if missing, the source table, the sink table (when named) and the driver's bookkeeping tables. */
export async function ensureConsumerTables(pool: Pool, source: string, sink?: string): Promise<void> {
  const statements = [sourceTableDdl(source), ...(sink === undefined ? [] : [sinkTableDdl(sink)]), ...BOOKKEEPING_DDL];
  await withTransaction(pool, async (client) => {
    await client.query('select pg_advisory_xact_lock($1)', [DDL_LOCK_KEY]);
    for (const statement of statements) await client.query(statement);
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
