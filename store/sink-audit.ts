// The consumer audits (DESIGN.md §5 contract), as plain SQL over the consumer's tables: every
// source record in the sink exactly once, in offset order per partition; no moment when two tasks
// held a partition; which partitions a set of tasks still owns.
import type { Pool, PoolClient } from 'pg';
import { OFFSETS_TABLE, OWNERSHIP_LOG_TABLE, quoteIdentifier } from '../protocol/consumer-tables';
import { withPool } from './db';

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

/** PostgreSQL's undefined_table: the consumer has not created its tables yet. */
const UNDEFINED_TABLE = '42P01';

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

export function createSinkAuditStore(db: Pool) {
  return {
    /** The exactly-once audit of a source table against its sink table, per partition and in total. */
    async exactlyOnce(options: { source: string; sink: string }): Promise<SinkAudit> {
      const source = quoteIdentifier(options.source);
      const sink = quoteIdentifier(options.sink);
      const client = await db.connect();
      let broken: Error | undefined;
      try {
        // Read both tables in one snapshot so a running producer or consumer cannot skew the counts.
        await client.query('begin isolation level repeatable read read only');
        return await auditTables(client, source, sink);
      } finally {
        await client.query('rollback').catch((error: Error) => {
          broken = error; // a connection that cannot roll back is discarded, not pooled
        });
        client.release(broken);
      }
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
    async partitionsOwnedBy(workload: string, taskIds: string[]): Promise<{ partition: number; ownerTask: string }[]> {
      try {
        const { rows } = await db.query<{ partition: number; owner_task: string }>(
          `select partition, owner_task from ${OFFSETS_TABLE} where workload = $1 and owner_task = any($2::text[]) order by partition`,
          [workload, taskIds],
        );
        return rows.map((r) => ({ partition: r.partition, ownerTask: r.owner_task }));
      } catch (error) {
        if ((error as { code?: string }).code === UNDEFINED_TABLE) return [];
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
