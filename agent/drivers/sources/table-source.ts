// A PostgreSQL table as a consumer's source (DESIGN.md §5): rows (partition, "offset", key, payload
// [, appended_at]). The consumer creates it with the data contract's DDL, if missing, before prepare().
import type { Pool } from 'pg';
import { quoteIdentifier, sourceHasAppendedAt } from '../consumer-schema';
import type { SourcePort, SourceRecord } from './source';

export function tableSource(pool: Pool, table: string): SourcePort {
  const quoted = quoteIdentifier(table);
  let hasAppendedAt = false;
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
      const appendedMs = hasAppendedAt ? `extract(epoch from appended_at)::float8 * 1000` : `null::float8`;
      const { rows } = await pool.query<{ offset: string; key: string; payload: string; appended_ms: number | null }>(
        `select "offset", key, payload::text as payload, ${appendedMs} as appended_ms
           from ${quoted}
          where partition = $1 and "offset" > $2
          order by "offset"
          limit $3`,
        [partition, after, limit],
      );
      return rows.map((r): SourceRecord => ({ offset: Number(r.offset), key: r.key, payload: r.payload, appendedMs: r.appended_ms }));
    },
    async forget() {},
    async close() {},
  };
}
