// The stream runtime's tables (DESIGN.md §5 "stream"), in one place: the stream driver (data
// plane), the control plane's job view and replan (store/stream-jobs.ts) and the sink audit read and
// write the very same tables. Plain SQL text on purpose, so anyone can check a job with psql;
// nothing here runs a query.
//
// What lives where:
// - scalegate_stream_jobs: one row per job: its current generation (the fence every commit checks,
//   so a subtask of a superseded generation can never commit) and that generation's exchange
//   secret (upstream subtasks present it when they connect to a downstream one).
// - scalegate_stream_subtasks: the directory of a generation: where each subtask listens for its
//   inputs. Records never go through the database, only addresses.
// - scalegate_stream_checkpoints: ids assigned by the job's coordinator, and which completed.
// - scalegate_stream_snapshots: each subtask's snapshot of a checkpoint, written before it forwards
//   that checkpoint's barrier: a source's offsets; an aggregate's mark (its counts are below).
// - scalegate_stream_keyed_state: the aggregates' counts, incrementally: a checkpoint writes a row
//   for each key counted since the previous one. A key's count at checkpoint C is its newest row
//   at or before C of a completed checkpoint; completing C deletes the older rows of its keys.
// - scalegate_stream_precommits: each sink subtask's output for a checkpoint, applied to the sink
//   table in the one transaction that completes the checkpoint (the two-phase-commit sink).
import { quoteIdentifier, sourceTableDdl } from './consumer-tables';
import { dataPlaneGrants } from './data-plane';

export const STREAM_JOBS_TABLE = 'scalegate_stream_jobs';
export const STREAM_SUBTASKS_TABLE = 'scalegate_stream_subtasks';
export const STREAM_CHECKPOINTS_TABLE = 'scalegate_stream_checkpoints';
export const STREAM_SNAPSHOTS_TABLE = 'scalegate_stream_snapshots';
export const STREAM_PRECOMMITS_TABLE = 'scalegate_stream_precommits';
export const STREAM_KEYED_STATE_TABLE = 'scalegate_stream_keyed_state';

/** Serialises `create table if not exists` across subtasks starting at once. */
export const STREAM_DDL_LOCK_KEY = 727_274_106; // arbitrary, fixed: "scalegate stream tables"

/** The sink table of the contract: one row per key, changed only by a completed checkpoint's commit. */
export function streamSinkTableDdl(sink: string): string {
  return `create table if not exists ${quoteIdentifier(sink)} (
    key text primary key,
    count bigint not null,
    checkpoint bigint not null)`;
}

export const STREAM_BOOKKEEPING_DDL: readonly string[] = [
  `create table if not exists ${STREAM_JOBS_TABLE} (
    job text primary key,
    generation int not null,
    exchange_secret text not null,
    updated_at timestamptz not null default now())`,
  `create table if not exists ${STREAM_SUBTASKS_TABLE} (
    job text not null,
    generation int not null,
    subtask int not null,
    operator text not null,
    operator_index int not null,
    runtime_id text not null,
    task_id text not null,
    incarnation text not null,
    host text,
    port int,
    started_at timestamptz not null default now(),
    primary key (job, generation, subtask))`,
  `create table if not exists ${STREAM_CHECKPOINTS_TABLE} (
    job text not null,
    id bigint not null,
    generation int not null,
    state text not null check (state in ('triggered', 'completed')),
    triggered_at timestamptz not null default now(),
    completed_at timestamptz,
    primary key (job, id))`,
  `create table if not exists ${STREAM_SNAPSHOTS_TABLE} (
    job text not null,
    checkpoint bigint not null,
    generation int not null,
    subtask int not null,
    operator text not null,
    kind text not null,
    state jsonb not null,
    primary key (job, checkpoint, generation, subtask))`,
  `create table if not exists ${STREAM_PRECOMMITS_TABLE} (
    job text not null,
    checkpoint bigint not null,
    generation int not null,
    subtask int not null,
    keys text[] not null,
    counts bigint[] not null,
    primary key (job, checkpoint, generation, subtask))`,
  `create table if not exists ${STREAM_KEYED_STATE_TABLE} (
    job text not null,
    key text not null,
    checkpoint bigint not null,
    generation int not null,
    count bigint not null,
    primary key (job, key, checkpoint))`,
];

/** Every statement that creates, if missing, the job's source table (null: it reads a Kafka topic), sink table and bookkeeping tables. */
export function streamTablesDdl(source: string | null, sink: string): string[] {
  const sourceTables = source === null ? [] : [source];
  return [
    ...sourceTables.map(sourceTableDdl), streamSinkTableDdl(sink), ...STREAM_BOOKKEEPING_DDL,
    dataPlaneGrants([...sourceTables.map(quoteIdentifier), quoteIdentifier(sink), STREAM_JOBS_TABLE, STREAM_SUBTASKS_TABLE, STREAM_CHECKPOINTS_TABLE, STREAM_SNAPSHOTS_TABLE, STREAM_PRECOMMITS_TABLE, STREAM_KEYED_STATE_TABLE]),
  ];
}
