// A PostgreSQL table as a consumer's source (DESIGN.md §5): rows (partition, "offset", key, payload
// [, appended_at]). The consumer creates it with the data contract's DDL, if missing, before prepare().
import type { Pool } from 'pg';
import { quoteIdentifier, sourceHasAppendedAt } from '../consumer-schema';
import type { PartitionRecord, SourcePort, SourceRecord } from './source';

export function tableSource(pool: Pool, table: string): SourcePort {
  const quoted = quoteIdentifier(table);
  let hasAppendedAt = false;
  // A source table created under the bare contract may lack appended_at: its records' append time is
  // unknown. Whole milliseconds, as a watermark and a Kafka record's timestamp are.
  const appendedMs = () => (hasAppendedAt ? `(extract(epoch from appended_at) * 1000)::bigint` : `null::bigint`);
  const msOf = (value: string | null): number | null => (value === null ? null : Number(value));
  return {
    description: `table ${table}`,
    async prepare() {
      hasAppendedAt = await sourceHasAppendedAt(pool, table);
    },
    async newestOffsets(partitions) {
      // One index probe per partition, one round trip in all: an idle consumer polls cheaply.
      const { rows } = await pool.query<{ partition: number; max_offset: string | null }>(
        `select p.partition, (select max("offset") from ${quoted} s where s.partition = p.partition) as max_offset
           from unnest($1::int[]) as p(partition)`,
        [[...partitions]],
      );
      return new Map(rows.map((r) => [r.partition, r.max_offset === null ? -1 : Number(r.max_offset)]));
    },
    async readAfter(partition, after, limit) {
      const { rows } = await pool.query<{ offset: string; key: string; payload: string; appended_ms: string | null }>(
        `select "offset", key, payload::text as payload, ${appendedMs()} as appended_ms
           from ${quoted}
          where partition = $1 and "offset" > $2
          order by "offset"
          limit $3`,
        [partition, after, limit],
      );
      return rows.map((r): SourceRecord => ({ offset: Number(r.offset), key: r.key, payload: r.payload, appendedMs: msOf(r.appended_ms) }));
    },
    async readEach(after, perPartition) {
      const partitions = [...after.keys()];
      const { rows } = await pool.query<{ partition: number; offset: string; key: string; payload: string; appended_ms: string | null }>(
        `select s.partition, s."offset", s.key, s.payload::text as payload, s.appended_ms
           from unnest($1::int[], $2::bigint[]) as o(partition, after)
           cross join lateral (
             select partition, "offset", key, payload, ${appendedMs()} as appended_ms from ${quoted}
              where partition = o.partition and "offset" > o.after order by "offset" limit $3) s
          order by s.partition, s."offset"`,
        [partitions, partitions.map((p) => after.get(p)!), perPartition],
      );
      return rows.map((r): PartitionRecord => ({ partition: r.partition, offset: Number(r.offset), key: r.key, payload: r.payload, appendedMs: msOf(r.appended_ms) }));
    },
    async forget() {},
    async mirrorProcessed() {},
    async close() {},
  };
}
