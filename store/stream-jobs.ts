// What the control plane reads of a stream job's bookkeeping (DESIGN.md §5 "stream"): its current
// generation, its last completed checkpoint and the one in flight, and how far that checkpoint's
// source snapshots reach into the source table. The stream driver writes these tables
// (protocol/stream-tables.ts); before a job's first subtask has created them there is nothing yet.
// Every statement is parameterised.
import type { Pool, PoolClient } from 'pg';
import { quoteIdentifier } from '../protocol/consumer-tables';
import { STREAM_CHECKPOINTS_TABLE, STREAM_JOBS_TABLE, STREAM_SNAPSHOTS_TABLE } from '../protocol/stream-tables';
import { isUndefinedTable } from './db';

type Queryable = Pool | PoolClient;

/** A checkpoint as the job view shows it (protocol/stream.ts CheckpointViewSchema). */
export interface StreamCheckpoint {
  id: number;
  /** the generation that triggered it: the one whose snapshots make it up */
  generation: number;
  triggeredAt: string;
  completedAt: string | null;
}

interface CheckpointRow {
  id: string;
  generation: number;
  triggered_at: Date;
  completed_at: Date | null;
}

const toCheckpoint = (row: CheckpointRow): StreamCheckpoint => ({
  id: Number(row.id),
  generation: row.generation,
  triggeredAt: row.triggered_at.toISOString(),
  completedAt: row.completed_at?.toISOString() ?? null,
});

const CHECKPOINT_COLUMNS = 'id, generation, triggered_at, completed_at';

/**
 * The last emitted offset per partition of a checkpoint ($1 job, $2 checkpoint id): the union of its
 * source subtasks' snapshots, taken from the generation named in its checkpoints row only (a
 * superseded generation may have snapshotted the same id before it was stopped).
 */
const CHECKPOINT_OFFSETS_SQL = `
  select (o.key)::int as partition, max((o.value)::bigint) as last_offset
    from ${STREAM_SNAPSHOTS_TABLE} s
    join ${STREAM_CHECKPOINTS_TABLE} c on c.job = s.job and c.id = s.checkpoint and c.generation = s.generation
   cross join lateral jsonb_each_text(coalesce(s.state -> 'offsets', '{}'::jsonb)) o
   where s.job = $1 and s.checkpoint = $2 and s.kind = 'source'
   group by 1`;

/**
 * The reads on a pool or on a caller's transaction, without any tolerance for missing tables (inside
 * a transaction a failed statement ends it; the checkpoint audit checks the tables first).
 */
export function streamJobReads(q: Queryable) {
  return {
    /** The id the job's next checkpoint takes (ids grow across generations). */
    async nextCheckpointId(job: string): Promise<number> {
      const { rows } = await q.query<{ id: string }>(`select coalesce(max(id), 0) + 1 as id from ${STREAM_CHECKPOINTS_TABLE} where job = $1`, [job]);
      return Number(rows[0].id);
    },

    async lastCompletedCheckpoint(job: string): Promise<StreamCheckpoint | null> {
      const { rows } = await q.query<CheckpointRow>(
        `select ${CHECKPOINT_COLUMNS} from ${STREAM_CHECKPOINTS_TABLE}
          where job = $1 and state = 'completed' order by id desc limit 1`,
        [job],
      );
      return rows[0] ? toCheckpoint(rows[0]) : null;
    },

    /**
     * The newest checkpoint triggered above the last completed one, of the job's current generation
     * when the job has a row (a superseded generation's checkpoint can never complete: every commit
     * is fenced by the generation).
     */
    async checkpointInFlight(job: string): Promise<StreamCheckpoint | null> {
      const { rows } = await q.query<CheckpointRow>(
        `select ${CHECKPOINT_COLUMNS} from ${STREAM_CHECKPOINTS_TABLE} c
          where c.job = $1 and c.state = 'triggered'
            and c.id > coalesce((select max(id) from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and state = 'completed'), -1)
            and c.generation = coalesce((select generation from ${STREAM_JOBS_TABLE} where job = $1), c.generation)
          order by c.id desc limit 1`,
        [job],
      );
      return rows[0] ? toCheckpoint(rows[0]) : null;
    },

    async currentGeneration(job: string): Promise<number | null> {
      const { rows } = await q.query<{ generation: number }>(`select generation from ${STREAM_JOBS_TABLE} where job = $1`, [job]);
      return rows[0]?.generation ?? null;
    },

    /** The last emitted offset per partition (-1 = none) at a checkpoint; {} when it has no source snapshot. */
    async sourceOffsetsAt(job: string, checkpointId: number): Promise<Record<string, number>> {
      const { rows } = await q.query<{ partition: number; last_offset: string }>(`${CHECKPOINT_OFFSETS_SQL} order by 1`, [job, checkpointId]);
      return Object.fromEntries(rows.map((r) => [String(r.partition), Number(r.last_offset)]));
    },

    /**
     * How many source records a checkpoint covers: a table's rows with offset ≤ the checkpoint's
     * offset of their partition; for a Kafka topic (`source` null), offset + 1 per partition, since a
     * topic's offsets run from 0 without gaps as long as it is not compacted, truncated by retention
     * or written in transactions.
     */
    async recordsCoveredBy(job: string, source: string | null, checkpointId: number): Promise<number> {
      const { rows } = await q.query<{ covered: string }>(
        source === null
          ? `with offsets as (${CHECKPOINT_OFFSETS_SQL}) select coalesce(sum(last_offset + 1), 0) as covered from offsets`
          : `with offsets as (${CHECKPOINT_OFFSETS_SQL})
             select count(*) as covered from ${quoteIdentifier(source)} r
               join offsets o on o.partition = r.partition and r."offset" <= o.last_offset`,
        [job, checkpointId],
      );
      return Number(rows[0].covered);
    },
  };
}

/** A read of tables the driver has not created yet answers `nothing`. */
async function orNothing<T>(read: Promise<T>, nothing: T): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if (isUndefinedTable(error)) return nothing;
    throw error;
  }
}

export function createStreamJobStore(db: Pool) {
  const reads = streamJobReads(db);
  return {
    /** The newest completed checkpoint: where a replan restores from. */
    lastCompletedCheckpoint: (job: string) => orNothing(reads.lastCompletedCheckpoint(job), null),
    /** The id the job's next checkpoint takes (1 before the first). */
    nextCheckpointId: (job: string) => orNothing(reads.nextCheckpointId(job), 1),
    /** The newest triggered checkpoint above the last completed one (see streamJobReads). */
    checkpointInFlight: (job: string) => orNothing(reads.checkpointInFlight(job), null),
    /** The job's placement generation as its subtasks fence on it. */
    currentGeneration: (job: string) => orNothing(reads.currentGeneration(job), null),
    /** partition → last emitted offset (-1 = none) in the checkpoint's source snapshots. */
    sourceOffsetsAt: (job: string, checkpointId: number) => orNothing(reads.sourceOffsetsAt(job, checkpointId), {}),
    /** Source rows at or below the checkpoint's offset of their partition (0 while a table is missing). */
    recordsCoveredBy: (job: string, source: string, checkpointId: number) => orNothing(reads.recordsCoveredBy(job, source, checkpointId), 0),
  };
}
export type StreamJobStore = ReturnType<typeof createStreamJobStore>;
