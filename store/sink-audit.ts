// The sink audits (DESIGN.md §5 contracts), as plain SQL. Consumer: every source record in the sink
// exactly once, in offset order per partition; no moment when two tasks held a partition; which
// partitions a set of tasks still owns. Stream: every key's count equals its source rows; and, at
// one instant, the sink holds exactly what the last completed checkpoint covers.
import type { Pool, PoolClient } from 'pg';
import type { PartitionReceipt } from '../domain/evidence';
import { OFFSETS_TABLE, OWNERSHIP_LOG_TABLE, quoteIdentifier } from '../protocol/consumer-tables';
import { STREAM_CHECKPOINTS_TABLE, STREAM_JOBS_TABLE, STREAM_SNAPSHOTS_TABLE } from '../protocol/stream-tables';
import { inReadOnlySnapshot, isUndefinedTable, withPool } from './db';
import { streamJobReads, type StreamCheckpoint } from './stream-jobs';

export interface PartitionAudit {
  source: number;
  sink: number;
  missing: number;
  extra: number;
  duplicates: number;
  orderViolations: number;
  keyMismatches: number;
}

export interface SinkAudit {
  sourceCount: number;
  sinkCount: number;
  /** source records with no sink row */
  missing: number;
  /** sink rows beyond one per (partition, offset); the sink's primary key should keep this 0 */
  duplicates: number;
  /** sink rows with no source record */
  extra: number;
  /** sink rows processed (by processed_at, then offset) after a higher offset of their partition */
  orderViolations: number;
  /** sink rows whose key differs from their source record's */
  keyMismatches: number;
  perPartition: Record<string, PartitionAudit>;
  /** asked with a workload: each partition against its committed offset and owner, in the same snapshot */
  receipts?: PartitionReceipt[];
}

export interface OwnershipOverlap {
  workload: string;
  partition: number;
  /** the task that held the partition (acquired, not yet released) */
  heldBy: string;
  heldByIncarnation: string | null;
  heldSinceLogId: number;
  /** the task that acquired it meanwhile */
  acquiredBy: string;
  acquiredByIncarnation: string | null;
  acquiredAtLogId: number;
  at: string;
}

interface PartitionAuditRow {
  partition: number;
  source: number;
  sink: number;
  missing: number;
  extra: number;
  duplicates: number;
  order_violations: number;
  key_mismatches: number;
}

/** The audit query and its totals; `source` and `sink` are quoted identifiers. */
async function auditTables(client: PoolClient, source: string, sink: string): Promise<SinkAudit> {
  const { rows } = await client.query<PartitionAuditRow>(
    `with source_counts as (
       select partition, count(*)::int as source from ${source} group by partition),
     sink_counts as (
       select partition, count(*)::int as sink,
              (count(*) - count(distinct "offset"))::int as duplicates
         from ${sink} group by partition),
     missing as (
       select s.partition, count(*)::int as missing from ${source} s
        where not exists (select 1 from ${sink} k where k.partition = s.partition and k."offset" = s."offset")
        group by s.partition),
     extra as (
       select k.partition, count(*)::int as extra from ${sink} k
        where not exists (select 1 from ${source} s where s.partition = k.partition and s."offset" = k."offset")
        group by k.partition),
     key_mismatches as (
       select k.partition, count(*)::int as key_mismatches from ${sink} k
         join ${source} s on s.partition = k.partition and s."offset" = k."offset"
        where k.key is distinct from s.key
        group by k.partition),
     processing_order as (
       select partition, "offset",
              lag("offset") over (partition by partition order by processed_at, "offset") as previous_offset
         from ${sink}),
     order_violations as (
       select partition, count(*)::int as order_violations from processing_order
        where previous_offset is not null and "offset" <= previous_offset
        group by partition),
     partitions as (
       select partition from source_counts union select partition from sink_counts)
     select p.partition,
            coalesce(sc.source, 0) as source, coalesce(kc.sink, 0) as sink,
            coalesce(m.missing, 0) as missing, coalesce(e.extra, 0) as extra,
            coalesce(kc.duplicates, 0) as duplicates,
            coalesce(o.order_violations, 0) as order_violations,
            coalesce(km.key_mismatches, 0) as key_mismatches
       from partitions p
       left join source_counts sc using (partition)
       left join sink_counts kc using (partition)
       left join missing m using (partition)
       left join extra e using (partition)
       left join order_violations o using (partition)
       left join key_mismatches km using (partition)
      order by p.partition`,
  );
  const audit: SinkAudit = {
    sourceCount: 0, sinkCount: 0, missing: 0, duplicates: 0, extra: 0, orderViolations: 0, keyMismatches: 0, perPartition: {},
  };
  for (const row of rows) {
    const entry: PartitionAudit = {
      source: row.source, sink: row.sink, missing: row.missing, extra: row.extra,
      duplicates: row.duplicates, orderViolations: row.order_violations, keyMismatches: row.key_mismatches,
    };
    audit.perPartition[String(row.partition)] = entry;
    audit.sourceCount += entry.source;
    audit.sinkCount += entry.sink;
    audit.missing += entry.missing;
    audit.extra += entry.extra;
    audit.duplicates += entry.duplicates;
    audit.orderViolations += entry.orderViolations;
    audit.keyMismatches += entry.keyMismatches;
  }
  return audit;
}

/**
 * Every partition of the source, the sink or the workload's offsets: its source records, its
 * committed offset and the source records at or below it, the sink rows at or below it and above it,
 * and its stored owner. `source` and `sink` are quoted identifiers.
 */
async function partitionReceipts(client: PoolClient, workload: string, source: string, sink: string): Promise<PartitionReceipt[]> {
  const { rows } = await client.query<{ partition: number; source: number; committed_offset: string; committed_records: number; received: number; above: number; owner_task: string | null }>(
    `with offsets as (select partition, committed_offset, owner_task from ${OFFSETS_TABLE} where workload = $1),
     source_counts as (
       select s.partition, count(*)::int as source,
              count(*) filter (where s."offset" <= coalesce(o.committed_offset, -1))::int as committed_records
         from ${source} s left join offsets o using (partition) group by s.partition),
     sink_counts as (
       select k.partition,
              count(*) filter (where k."offset" <= coalesce(o.committed_offset, -1))::int as received,
              count(*) filter (where k."offset" > coalesce(o.committed_offset, -1))::int as above
         from ${sink} k left join offsets o using (partition) group by k.partition),
     partitions as (
       select partition from source_counts union select partition from sink_counts union select partition from offsets)
     select p.partition, coalesce(sc.source, 0) as source, coalesce(o.committed_offset, -1) as committed_offset,
            coalesce(sc.committed_records, 0) as committed_records, coalesce(kc.received, 0) as received,
            coalesce(kc.above, 0) as above, o.owner_task
       from partitions p
       left join source_counts sc using (partition)
       left join sink_counts kc using (partition)
       left join offsets o using (partition)
      order by p.partition`,
    [workload],
  );
  return rows.map((r) => ({
    partition: r.partition, source: r.source, committedOffset: Number(r.committed_offset), committedRecords: r.committed_records,
    received: r.received, aboveCommit: r.above, owner: r.owner_task,
  }));
}

export function createSinkAuditStore(db: Pool) {
  return {
    /** A stream job's sink against its last completed checkpoint (auditStreamCheckpoint). */
    streamCheckpoint: (options: { job: string; source: string | null; sink: string }) => auditStreamCheckpoint(db, options),

    /**
     * The exactly-once audit of a source table against its sink table, per partition and in total;
     * with a workload, its receipts per partition against its committed offsets too.
     */
    async exactlyOnce(options: { source: string; sink: string; workload?: string }): Promise<SinkAudit> {
      const source = quoteIdentifier(options.source);
      const sink = quoteIdentifier(options.sink);
      // Every table in one snapshot, so a running producer or consumer cannot skew the counts.
      return inReadOnlySnapshot(db, async (client) => {
        const audit = await auditTables(client, source, sink);
        if (options.workload === undefined) return audit;
        return { ...audit, receipts: await partitionReceipts(client, options.workload, source, sink) };
      });
    },

    /**
     * Replays the ownership log per partition, in log order (id: an acquire is logged only after the
     * previous holder's release committed, so id order is causal order), and reports every acquire by
     * one task while another task still held the partition.
     */
    async ownershipOverlaps(workload: string): Promise<OwnershipOverlap[]> {
      const { rows } = await db.query<{ id: string; partition: number; task_id: string; incarnation: string | null; event: 'acquire' | 'release'; at: Date }>(
        `select id, partition, task_id, incarnation, event, at from ${OWNERSHIP_LOG_TABLE}
          where workload = $1 order by partition, id`,
        [workload],
      );
      const overlaps: OwnershipOverlap[] = [];
      const holdersByPartition = new Map<number, Map<string, { incarnation: string | null; logId: number }>>();
      for (const row of rows) {
        const holders = holdersByPartition.get(row.partition) ?? new Map<string, { incarnation: string | null; logId: number }>();
        holdersByPartition.set(row.partition, holders);
        if (row.event === 'release') {
          holders.delete(row.task_id);
          continue;
        }
        for (const [heldBy, held] of holders) {
          if (heldBy === row.task_id) continue; // re-acquiring (e.g. at a raised fence) is not an overlap
          overlaps.push({
            workload,
            partition: row.partition,
            heldBy,
            heldByIncarnation: held.incarnation,
            heldSinceLogId: held.logId,
            acquiredBy: row.task_id,
            acquiredByIncarnation: row.incarnation,
            acquiredAtLogId: Number(row.id),
            at: row.at.toISOString(),
          });
        }
        holders.set(row.task_id, { incarnation: row.incarnation, logId: Number(row.id) });
      }
      return overlaps;
    },

    /** The partitions of the workload whose stored owner is one of `taskIds` (none before the consumer made its tables). */
    /** A consumer's committed offset per partition (-1: none yet); empty before its first task ran. */
    async committedOffsets(workload: string): Promise<Map<number, number>> {
      try {
        const { rows } = await db.query<{ partition: number; committed_offset: string }>(
          `select partition, committed_offset from ${OFFSETS_TABLE} where workload = $1`, [workload],
        );
        return new Map(rows.map((r) => [r.partition, Number(r.committed_offset)]));
      } catch (error) {
        if (isUndefinedTable(error)) return new Map();
        throw error;
      }
    },

    async partitionsOwnedBy(workload: string, taskIds: string[]): Promise<{ partition: number; ownerTask: string }[]> {
      try {
        const { rows } = await db.query<{ partition: number; owner_task: string }>(
          `select partition, owner_task from ${OFFSETS_TABLE} where workload = $1 and owner_task = any($2::text[]) order by partition`,
          [workload, taskIds],
        );
        return rows.map((r) => ({ partition: r.partition, ownerTask: r.owner_task }));
      } catch (error) {
        if (isUndefinedTable(error)) return [];
        throw error;
      }
    },
  };
}
export type SinkAuditStore = ReturnType<typeof createSinkAuditStore>;

/** The exactly-once audit for a caller holding only a database URL (scripts/verify-sink, tests). */
export function verifyExactlyOnce(options: { databaseUrl: string; source: string; sink: string }): Promise<SinkAudit> {
  return withPool(options.databaseUrl, 1, (db) => createSinkAuditStore(db).exactlyOnce(options));
}

/** The ownership-overlap check for a caller holding only a database URL (scripts/verify-sink, tests). */
export function ownershipOverlaps(options: { databaseUrl: string; workload: string }): Promise<OwnershipOverlap[]> {
  return withPool(options.databaseUrl, 1, (db) => createSinkAuditStore(db).ownershipOverlaps(options.workload));
}

// ---------------------------------------------------------------------------------------------
// Stream jobs: the sink table (key, count, checkpoint) against the source table it counts

export interface StreamKeyMismatch {
  key: string;
  /** source rows with this key */
  source: number;
  /** the sink's count for it (0 when the sink has no row) */
  sink: number;
}

export interface StreamSinkAudit {
  sourceRows: number;
  /** the sum of the sink's counts */
  sinkTotal: number;
  /** distinct keys in the source */
  keys: number;
  /** the first STREAM_MISMATCHES_SHOWN source keys whose sink count differs, by key */
  mismatched: StreamKeyMismatch[];
  mismatchedKeys: number;
  /** sink keys with no source row */
  extraKeys: number;
  /** every key counted exactly once, and nothing else */
  exact: boolean;
}

export interface StreamCheckpointAudit {
  job: string;
  /** the latest completed checkpoint C (null: none yet) */
  checkpoint: StreamCheckpoint | null;
  /** a checkpoint triggered above C and not completed, at the same instant */
  checkpointInFlight: StreamCheckpoint | null;
  /** the source table's rows; null for a Kafka topic (its records are on the broker) */
  sourceRows: number | null;
  /** source rows at or below C's source offset of their partition (0 without C) */
  coveredSourceRows: number;
  sinkTotal: number;
  /** sink rows written by a checkpoint above C (without C: every sink row) */
  rowsAboveCheckpoint: number;
  /** the sink shows exactly C: sinkTotal == coveredSourceRows and no row above C */
  consistent: boolean;
}

export const STREAM_MISMATCHES_SHOWN = 20;

/** Per-key counts of the source against the sink; `source` and `sink` are quoted identifiers. */
async function auditStreamTables(client: PoolClient, source: string, sink: string): Promise<StreamSinkAudit> {
  const { rows } = await client.query<{ source_rows: string; sink_total: string; keys: string; mismatched_keys: string; extra_keys: string; mismatched: StreamKeyMismatch[] }>(
    `with source_counts as (select key, count(*) as source from ${source} group by key),
     compared as (
       select s.key, s.source, coalesce(k.count, 0) as sink
         from source_counts s left join ${sink} k on k.key = s.key),
     mismatches as (select * from compared where sink <> source)
     select (select coalesce(sum(source), 0) from source_counts) as source_rows,
            (select coalesce(sum(count), 0) from ${sink}) as sink_total,
            (select count(*) from source_counts) as keys,
            (select count(*) from mismatches) as mismatched_keys,
            (select count(*) from ${sink} k where not exists (select 1 from source_counts s where s.key = k.key)) as extra_keys,
            (select coalesce(jsonb_agg(jsonb_build_object('key', key, 'source', source, 'sink', sink) order by key), '[]'::jsonb)
               from (select * from mismatches order by key limit $1) m) as mismatched`,
    [STREAM_MISMATCHES_SHOWN],
  );
  const row = rows[0];
  const audit = {
    sourceRows: Number(row.source_rows), sinkTotal: Number(row.sink_total), keys: Number(row.keys),
    mismatched: row.mismatched.map((m) => ({ key: m.key, source: Number(m.source), sink: Number(m.sink) })),
    mismatchedKeys: Number(row.mismatched_keys), extraKeys: Number(row.extra_keys),
  };
  return { ...audit, exact: audit.mismatchedKeys === 0 && audit.extraKeys === 0 };
}

/** Whether every named table exists (in the caller's snapshot). */
async function tablesExist(client: PoolClient, tables: readonly string[]): Promise<boolean> {
  const { rows } = await client.query<{ missing: number }>('select count(*)::int as missing from unnest($1::text[]) t where to_regclass(t) is null', [tables]);
  return rows[0].missing === 0;
}

/**
 * A stream job's sink against its source, per key, in one snapshot: the exactly-once check once the
 * job has checkpointed everything the source holds. Missing tables fail (a mistyped name is no audit).
 */
export function auditStreamSink(db: Pool, options: { source: string; sink: string }): Promise<StreamSinkAudit> {
  const source = quoteIdentifier(options.source);
  const sink = quoteIdentifier(options.sink);
  return inReadOnlySnapshot(db, (client) => auditStreamTables(client, source, sink));
}

/**
 * What the sink shows against the last completed checkpoint C, all read at one instant (one
 * REPEATABLE READ snapshot): the two-phase-commit sink changes only in the transaction that
 * completes a checkpoint, so at every instant sinkTotal == coveredSourceRows and
 * rowsAboveCheckpoint == 0, even while a later checkpoint is in flight. No bookkeeping tables yet:
 * no checkpoint.
 */
export function auditStreamCheckpoint(db: Pool, options: { job: string; source: string | null; sink: string }): Promise<StreamCheckpointAudit> {
  const source = options.source === null ? null : quoteIdentifier(options.source);
  const sink = quoteIdentifier(options.sink);
  return inReadOnlySnapshot(db, async (client) => {
    const reads = streamJobReads(client);
    const bookkept = await tablesExist(client, [STREAM_JOBS_TABLE, STREAM_CHECKPOINTS_TABLE, STREAM_SNAPSHOTS_TABLE]);
    const checkpoint = bookkept ? await reads.lastCompletedCheckpoint(options.job) : null;
    const checkpointInFlight = bookkept ? await reads.checkpointInFlight(options.job) : null;
    const coveredSourceRows = checkpoint ? await reads.recordsCoveredBy(options.job, options.source, checkpoint.id) : 0;
    const { rows } = await client.query<{ source_rows: string; sink_total: string; rows_above: string }>(
      `select ${source === null ? 'null' : `(select count(*) from ${source})`} as source_rows,
              (select coalesce(sum(count), 0) from ${sink}) as sink_total,
              (select count(*) from ${sink} where checkpoint > $1) as rows_above`,
      [checkpoint?.id ?? -1],
    );
    const audit = {
      job: options.job, checkpoint, checkpointInFlight, sourceRows: rows[0].source_rows === null ? null : Number(rows[0].source_rows), coveredSourceRows,
      sinkTotal: Number(rows[0].sink_total), rowsAboveCheckpoint: Number(rows[0].rows_above),
    };
    return { ...audit, consistent: audit.sinkTotal === audit.coveredSourceRows && audit.rowsAboveCheckpoint === 0 };
  });
}

/** A consumer sink counted against the records a Kafka producer had acknowledged (store/kafka-feed.ts). */
export interface AckedSinkAudit {
  acked: number;
  sinkCount: number;
  /** acknowledged records with no sink row */
  missing: number;
  /** sink rows beyond one per (partition, offset) */
  duplicates: number;
  /** sink rows of no acknowledged record */
  extra: number;
  /** sink rows whose key differs from the acknowledged record's */
  keyMismatches: number;
}

export function verifyAgainstAcked(options: { databaseUrl: string; sink: string; acked: readonly { partition: number; offset: number; key: string }[] }): Promise<AckedSinkAudit> {
  const sink = quoteIdentifier(options.sink);
  return withPool(options.databaseUrl, 1, async (pool) => {
    const { rows } = await pool.query<{ sink_count: number; missing: number; duplicates: number; extra: number; key_mismatches: number }>(
      `with acked as (select * from unnest($1::int[], $2::bigint[], $3::text[]) as a(partition, "offset", key)),
            sunk as (select partition, "offset", key, count(*) over (partition by partition, "offset") as copies from ${sink})
       select (select count(*)::int from ${sink}) as sink_count,
              (select count(*)::int from acked a where not exists (select 1 from ${sink} s where s.partition = a.partition and s."offset" = a."offset")) as missing,
              (select count(*)::int from sunk where copies > 1) - (select count(distinct (partition, "offset"))::int from sunk where copies > 1) as duplicates,
              (select count(*)::int from ${sink} s where not exists (select 1 from acked a where a.partition = s.partition and a."offset" = s."offset")) as extra,
              (select count(*)::int from ${sink} s join acked a using (partition, "offset") where s.key <> a.key) as key_mismatches`,
      [options.acked.map((a) => a.partition), options.acked.map((a) => a.offset), options.acked.map((a) => a.key)],
    );
    const row = rows[0];
    return { acked: options.acked.length, sinkCount: row.sink_count, missing: row.missing, duplicates: row.duplicates, extra: row.extra, keyMismatches: row.key_mismatches };
  });
}

/** A stream job's per-key sink counted against the records a Kafka producer had acknowledged. */
export interface AckedStreamAudit {
  acked: number;
  sinkTotal: number;
  keys: number;
  /** acknowledged keys whose sink count is not their number of acknowledged records */
  mismatchedKeys: number;
  /** sink keys no acknowledged record has */
  extraKeys: number;
  exact: boolean;
}

export function verifyStreamAgainstAcked(options: { databaseUrl: string; sink: string; acked: readonly { key: string }[] }): Promise<AckedStreamAudit> {
  const expected = new Map<string, number>();
  for (const { key } of options.acked) expected.set(key, (expected.get(key) ?? 0) + 1);
  return withPool(options.databaseUrl, 1, async (pool) => {
    const { rows } = await pool.query<{ sink_total: number; mismatched: number; extra: number }>(
      `with acked as (select * from unnest($1::text[], $2::bigint[]) as a(key, records))
       select (select coalesce(sum(count), 0)::int from ${quoteIdentifier(options.sink)}) as sink_total,
              (select count(*)::int from acked a left join ${quoteIdentifier(options.sink)} s using (key) where coalesce(s.count, 0) <> a.records) as mismatched,
              (select count(*)::int from ${quoteIdentifier(options.sink)} s where not exists (select 1 from acked a where a.key = s.key)) as extra`,
      [[...expected.keys()], [...expected.values()]],
    );
    const row = rows[0];
    return {
      acked: options.acked.length, sinkTotal: row.sink_total, keys: expected.size, mismatchedKeys: row.mismatched, extraKeys: row.extra,
      exact: row.mismatched === 0 && row.extra === 0 && row.sink_total === options.acked.length,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Two live owners, as the sink sees them (issue 35 item 4)

export interface SinkWriterInterleaving {
  workload: string;
  partition: number;
  /** the task whose sink rows came back after another task had written there */
  task: string;
  /** the first offset of that return */
  fromOffset: number;
  /** the task that wrote in between */
  after: string;
}

/**
 * Each partition's sink rows, in offset order, form runs by the task that wrote them. Every run
 * must follow an acquisition of the partition by its writer, in the ownership log's order: a task
 * that writes again after another task took the partition, without acquiring it again, wrote while
 * it no longer owned it (two live owners). The owner fence makes that impossible; without it (the
 * broken build owner-fence-unchecked) a partitioned owner's late batches land between the new
 * owner's. Reads only the database, so no agent's clock enters it.
 */
export async function sinkWriterInterleavings(db: Pool, options: { workload: string; sink: string }): Promise<SinkWriterInterleaving[]> {
  const sink = quoteIdentifier(options.sink);
  const { rows: runs } = await db.query<{ partition: number; task_id: string; first: string }>(
    `select partition, task_id, min("offset") as first from (
       select partition, "offset", task_id,
              sum(case when task_id is distinct from previous then 1 else 0 end) over (partition by partition order by "offset") as run
         from (select partition, "offset", task_id, lag(task_id) over (partition by partition order by "offset") as previous from ${sink}) marked
     ) numbered group by partition, task_id, run order by partition, min("offset")`,
  );
  const { rows: acquisitions } = await db.query<{ partition: number; task_id: string }>(
    `select partition, task_id from ${OWNERSHIP_LOG_TABLE} where workload = $1 and event = 'acquire' order by partition, id`, [options.workload],
  );
  const acquiredBy = new Map<number, string[]>();
  for (const row of acquisitions) acquiredBy.set(row.partition, [...(acquiredBy.get(row.partition) ?? []), row.task_id]);
  const found: SinkWriterInterleaving[] = [];
  /** per partition: the index in its log of the acquisition the last run was written under, and that run's writer */
  const under = new Map<number, { at: number; writer: string }>();
  for (const run of runs) {
    const log = acquiredBy.get(run.partition) ?? [];
    const last = under.get(run.partition) ?? { at: -1, writer: '(none)' };
    // A run follows another writer's (runs alternate by definition): its writer must be the owner of
    // the last acquisition a run was written under (it comes back after an intruder's rows), or have
    // acquired the partition after it.
    const at = log[last.at] === run.task_id ? last.at : log.findIndex((task, index) => index > last.at && task === run.task_id);
    if (at < 0) found.push({ workload: options.workload, partition: run.partition, task: run.task_id, fromOffset: Number(run.first), after: last.writer });
    under.set(run.partition, { at: at < 0 ? last.at : at, writer: run.task_id });
  }
  return found;
}
