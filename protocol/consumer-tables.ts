// The consumer's data contract (DESIGN.md §5) as table names and DDL, in one place: the consumer
// driver (data plane), the sink audit and the source feed (store/) create and read the very same
// tables. Plain SQL text on purpose, so producers and auditors who never load this code can feed
// and check the tables; nothing here runs a query.

import { dataPlaneGrants } from './data-plane';

export const OFFSETS_TABLE = 'scalegate_consumer_offsets';
export const OWNERSHIP_LOG_TABLE = 'scalegate_consumer_ownership_log';

/** Serialises `create table if not exists` across processes starting at once (concurrent creates of one table can fail). */
export const CONSUMER_DDL_LOCK_KEY = 727_274_105; // arbitrary, fixed: "scalegate consumer tables"

const SQL_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A table name as a quoted SQL identifier. Only plain lowercase identifiers pass (the same rule
 * as ConsumerSpecSchema), so quoting can never be escaped; anything else throws.
 */
export function quoteIdentifier(name: string): string {
  if (!SQL_IDENTIFIER.test(name)) throw new Error(`not a plain lowercase SQL identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

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

/** The driver's bookkeeping: committed offsets with their owner, and the ownership log. */
export const BOOKKEEPING_DDL: readonly string[] = [
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
  // only when missing: even `if not exists` needs the table's owner, and the log may be another role's (a producer's feed created it)
  `do $$ begin if to_regclass('${OWNERSHIP_LOG_TABLE}_by_partition') is null then
     create index ${OWNERSHIP_LOG_TABLE}_by_partition on ${OWNERSHIP_LOG_TABLE} (workload, partition, id); end if; end $$`,
];

/** Every statement that creates, if missing, the source table, the sink table (when named) and the bookkeeping tables. */
export function consumerTablesDdl(source: string | null, sink?: string): string[] {
  const named = [...(source === null ? [] : [source]), ...(sink === undefined ? [] : [sink])];
  return [
    ...(source === null ? [] : [sourceTableDdl(source)]), ...(sink === undefined ? [] : [sinkTableDdl(sink)]), ...BOOKKEEPING_DDL,
    dataPlaneGrants([...named.map(quoteIdentifier), OFFSETS_TABLE, OWNERSHIP_LOG_TABLE], [`${OWNERSHIP_LOG_TABLE}_id_seq`]),
  ];
}
