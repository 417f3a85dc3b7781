// The consumer's exactly-once batch (DESIGN.md §5 "consumer"): ONE PostgreSQL transaction locks
// the partition's offsets row under the owner fence, writes a sink row per record and advances the
// committed offset. So a record is in the sink exactly once whoever processes it, and only the
// current owner can commit: a takeover waits on the row lock, and a stale owner finds the row no
// longer names it.
import type { Pool } from 'pg';
import { inTransaction } from '../../lib/pg';
import { OFFSETS_TABLE } from './consumer-schema';
import type { SourceRecord } from './sources';

export interface BatchInput {
  workload: string;
  taskId: string;
  incarnation: string;
  /** the sink table, quoted */
  sink: string;
  partition: number;
  /** the fence this task owns the partition at */
  fence: number;
  /** the committed offset the records were read after */
  readFrom: number;
  records: readonly SourceRecord[];
  /** false only for the broken build that writes sink rows without advancing the offset (tests) */
  commitOffset: boolean;
  /** false only for the broken build that skips the owner fence check (SCALEGATE_TEST_BREAK=owner-fence-unchecked, tests) */
  checkOwner?: boolean;
  /** how long the transaction may idle (a frozen agent's row lock is then ended by the server) */
  idleTimeoutMs: number;
  /** the (simulated) work on the records, inside the transaction, once ownership is proven */
  work: () => Promise<void>;
}

export type BatchOutcome =
  /** the offsets row no longer names this task and fence: ownership is lost */
  | { kind: 'not-owner' }
  /** the committed offset moved since the read: nothing written; read again from `committed` */
  | { kind: 'moved'; committed: number }
  /** written and committed; `processedMs` is when the sink rows were written */
  | { kind: 'committed'; committed: number; processedMs: number };

export async function commitBatch(pool: Pool, input: BatchInput): Promise<BatchOutcome> {
  const { records } = input;
  // Ownership not proven, or the offset moved: nothing is written, and the transaction ends at once.
  return inTransaction(pool, async (client): Promise<BatchOutcome> => {
    // A frozen agent (SIGSTOP) holding this row lock would keep a new owner waiting: the server
    // ends the session once it idles in this transaction longer than the batch's work plus a margin.
    await client.query(`set local idle_in_transaction_session_timeout = ${Math.ceil(input.idleTimeoutMs)}`);
    // The row lock serialises us with any takeover: we write only while we demonstrably still
    // own the partition, and nobody can take it until we commit or roll back.
    const ownership = await client.query<{ committed_offset: string }>(
      `select committed_offset from ${OFFSETS_TABLE}
        where workload = $1 and partition = $2 and ((owner_task = $3 and owner_fence = $4) or not $5::boolean)
        for update`,
      [input.workload, input.partition, input.taskId, input.fence, input.checkOwner !== false],
    );
    if (ownership.rowCount === 0) return { kind: 'not-owner' };
    const committed = Number(ownership.rows[0].committed_offset);
    if (committed !== input.readFrom) return { kind: 'moved', committed };
    await input.work();
    // No "on conflict": a duplicate sink row must fail the batch loudly, never be hidden.
    const inserted = await client.query<{ processed_ms: number }>(
      `with inserted as (
         insert into ${input.sink} (partition, "offset", key, payload, task_id, incarnation, processed_at)
         select $1::int, u.record_offset, u.record_key, u.record_payload::jsonb, $5::text, $6::text, statement_timestamp()
           from unnest($2::bigint[], $3::text[], $4::text[]) as u(record_offset, record_key, record_payload)
         returning processed_at)
       select extract(epoch from max(processed_at))::float8 * 1000 as processed_ms from inserted`,
      [input.partition, records.map((r) => r.offset), records.map((r) => r.key), records.map((r) => r.payload), input.taskId, input.incarnation],
    );
    const lastOffset = records[records.length - 1].offset;
    if (input.commitOffset) {
      await client.query(`update ${OFFSETS_TABLE} set committed_offset = $3 where workload = $1 and partition = $2`, [input.workload, input.partition, lastOffset]);
    }
    return { kind: 'committed', committed: input.commitOffset ? lastOffset : committed, processedMs: inserted.rows[0].processed_ms };
  });
}
