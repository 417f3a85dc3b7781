// What a stream subtask keeps in PostgreSQL (protocol/stream-tables.ts): joining its generation,
// the directory of listening addresses, checkpoint triggers, snapshots, restore, and the
// two-phase-commit sink's pre-commit and commit. Records never pass through here.
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { inTransaction } from '../../../lib/pg';
import { quoteIdentifier } from '../../../protocol/consumer-tables';
import {
  STREAM_CHECKPOINTS_TABLE,
  STREAM_DDL_LOCK_KEY,
  STREAM_JOBS_TABLE,
  STREAM_KEYED_STATE_TABLE,
  STREAM_PRECOMMITS_TABLE,
  STREAM_SNAPSHOTS_TABLE,
  STREAM_SUBTASKS_TABLE,
  streamTablesDdl,
} from '../../../protocol/stream-tables';

export interface CompletedCheckpoint {
  id: number;
  generation: number;
}

export type SnapshotKind = 'source' | 'keyed-aggregate' | 'sink';

export interface SubtaskAddress {
  subtask: number;
  host: string;
  port: number;
}

/** The keys an aggregate counted since its previous snapshot, and their counts, index by index. */
export interface ChangedCounts {
  keys: string[];
  counts: number[];
}

/**
 * Keys' counts at a completed checkpoint ($1 job, $2 keys, $3 checkpoint id): one primary-key probe
 * per key (a lateral limit 1), whatever the table's statistics say; a join over the state instead
 * made a lookup of 60 keys read all 1M rows while the table was not analyzed yet.
 */
export const KEYED_COUNTS_AT_SQL = `
  select u.key, latest.count
    from unnest($2::text[]) as u(key)
   cross join lateral (
     select s.count from ${STREAM_KEYED_STATE_TABLE} s
       join ${STREAM_CHECKPOINTS_TABLE} c on c.job = s.job and c.id = s.checkpoint and c.generation = s.generation and c.state = 'completed'
      where s.job = $1 and s.key = u.key and s.checkpoint <= $3
      order by s.checkpoint desc limit 1) latest`;

/** The job moved to a newer generation: this subtask's work is superseded and it must stop. */
export class SupersededError extends Error {}

/** Checkpoint ids below the newest completed whose snapshots are kept. */
const SNAPSHOTS_RETAINED = 20;

export function createJobState(pool: Pool, job: string) {
  return {
    async ensureTables(source: string | null, sink: string): Promise<void> {
      await inTransaction(pool, async (client) => {
        await client.query('select pg_advisory_xact_lock($1)', [STREAM_DDL_LOCK_KEY]);
        for (const statement of streamTablesDdl(source, sink)) await client.query(statement);
      });
    },

    /**
     * Makes `generation` the job's current one (never lowering it) and answers its exchange secret.
     * From then on no subtask of an older generation can commit a checkpoint.
     */
    async joinGeneration(generation: number): Promise<string> {
      await pool.query(
        `insert into ${STREAM_JOBS_TABLE} as j (job, generation, exchange_secret) values ($1, $2, $3)
           on conflict (job) do update set generation = excluded.generation, exchange_secret = excluded.exchange_secret, updated_at = now()
           where j.generation < excluded.generation`,
        [job, generation, randomBytes(24).toString('base64url')],
      );
      const { rows } = await pool.query<{ generation: number; exchange_secret: string }>(`select generation, exchange_secret from ${STREAM_JOBS_TABLE} where job = $1`, [job]);
      const current = rows[0];
      if (current.generation > generation) throw new SupersededError(`job ${job} runs generation ${current.generation}; this subtask belongs to ${generation}`);
      return current.exchange_secret;
    },

    /**
     * Enters this subtask in its generation's directory. False when it was entered before: an
     * earlier incarnation ran in this generation, and a subtask cannot rejoin a running dataflow.
     */
    async enterDirectory(entry: { generation: number; subtask: number; operator: string; operatorIndex: number; runtimeId: string; taskId: string; incarnation: string; host: string | null; port: number | null }): Promise<boolean> {
      const { rowCount } = await pool.query(
        `insert into ${STREAM_SUBTASKS_TABLE} (job, generation, subtask, operator, operator_index, runtime_id, task_id, incarnation, host, port)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) on conflict do nothing`,
        [job, entry.generation, entry.subtask, entry.operator, entry.operatorIndex, entry.runtimeId, entry.taskId, entry.incarnation, entry.host, entry.port],
      );
      return rowCount === 1;
    },

    /** The listening addresses of some subtasks of a generation, as far as they are entered. */
    async addresses(generation: number, subtasks: number[]): Promise<SubtaskAddress[]> {
      const { rows } = await pool.query<SubtaskAddress>(
        `select subtask, host, port from ${STREAM_SUBTASKS_TABLE}
          where job = $1 and generation = $2 and subtask = any($3) and host is not null`,
        [job, generation, subtasks],
      );
      return rows;
    },

    async latestCompleted(): Promise<CompletedCheckpoint | null> {
      const { rows } = await pool.query<{ id: string; generation: number }>(
        `select id, generation from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and state = 'completed' order by id desc limit 1`,
        [job],
      );
      return rows.length ? { id: Number(rows[0].id), generation: rows[0].generation } : null;
    },

    /** The states the subtasks of one kind snapshotted at a completed checkpoint. */
    async snapshotStates<T>(checkpoint: CompletedCheckpoint, kind: SnapshotKind): Promise<T[]> {
      const { rows } = await pool.query<{ state: T }>(
        `select state from ${STREAM_SNAPSHOTS_TABLE} where job = $1 and checkpoint = $2 and generation = $3 and kind = $4`,
        [job, checkpoint.id, checkpoint.generation, kind],
      );
      return rows.map((r) => r.state);
    },

    /**
     * An aggregate's snapshot of a checkpoint, with its mark in the snapshots table, in one
     * transaction: the counts of the keys it counted since its previous snapshot (the others'
     * stand in earlier rows), so what a checkpoint writes does not grow with the state.
     */
    async snapshotKeyedCounts(input: { checkpoint: number; generation: number; subtask: number; operator: string; changed: ChangedCounts }): Promise<void> {
      const { keys, counts } = input.changed;
      await inTransaction(pool, async (client) => {
        if (keys.length) {
          await client.query(
            `insert into ${STREAM_KEYED_STATE_TABLE} (job, key, checkpoint, generation, count)
               select $1, u.key, $2, $3, u.count from unnest($4::text[], $5::bigint[]) as u(key, count)
             on conflict do nothing`,
            [job, input.checkpoint, input.generation, keys, counts],
          );
        }
        await client.query(
          `insert into ${STREAM_SNAPSHOTS_TABLE} (job, checkpoint, generation, subtask, operator, kind, state)
             values ($1, $2, $3, $4, $5, 'keyed-aggregate', $6) on conflict do nothing`,
          [job, input.checkpoint, input.generation, input.subtask, input.operator, JSON.stringify({ changedKeys: keys.length })],
        );
      });
    },

    /**
     * Some keys' counts at a completed checkpoint: each key's newest row at or before it, of a
     * checkpoint that completed in the generation that wrote it. A key with none counted nothing.
     */
    async keyedCountsAt(checkpoint: CompletedCheckpoint, keys: readonly string[]): Promise<Map<string, number>> {
      const { rows } = await pool.query<{ key: string; count: string }>(KEYED_COUNTS_AT_SQL, [job, keys, checkpoint.id]);
      return new Map(rows.map((r) => [r.key, Number(r.count)]));
    },

    /**
     * A checkpoint snapshotted before keyed state was incremental holds each aggregate's whole
     * counts in its snapshot (`groups`): copied once into the keyed state, as rows of that
     * checkpoint, so a job restores across the upgrade. A no-op for any later checkpoint.
     */
    async adoptWholeKeyedSnapshots(checkpoint: CompletedCheckpoint): Promise<number> {
      const { rowCount } = await pool.query(
        `insert into ${STREAM_KEYED_STATE_TABLE} (job, key, checkpoint, generation, count)
           select s.job, k.key, s.checkpoint, s.generation, k.value::bigint
             from ${STREAM_SNAPSHOTS_TABLE} s
            cross join lateral jsonb_each(s.state -> 'groups') g
            cross join lateral jsonb_each_text(g.value) k
            where s.job = $1 and s.checkpoint = $2 and s.generation = $3 and s.kind = 'keyed-aggregate' and s.state ? 'groups'
         on conflict do nothing`,
        [job, checkpoint.id, checkpoint.generation],
      );
      return rowCount ?? 0;
    },

    /** Sinks of a new generation: pre-commits of older generations will never commit (after the restore point). */
    async abortOlderPrecommits(generation: number): Promise<number> {
      const { rowCount } = await pool.query(`delete from ${STREAM_PRECOMMITS_TABLE} where job = $1 and generation < $2`, [job, generation]);
      return rowCount ?? 0;
    },

    /** The coordinator: the next checkpoint id, in the current generation only. */
    /**
     * The coordinator: the next checkpoint id, in the current generation only. `explicitId` (a hot
     * rescale's cutover barrier C, assigned by the control plane) must be exactly the next id.
     */
    async trigger(generation: number, explicitId?: number): Promise<number | null> {
      const { rows } = await pool.query<{ id: string }>(
        `insert into ${STREAM_CHECKPOINTS_TABLE} (job, id, generation, state)
           select $1, n.id, $2, 'triggered'
             from (select coalesce(max(id), 0) + 1 as id from ${STREAM_CHECKPOINTS_TABLE} where job = $1) n
            where exists (select 1 from ${STREAM_JOBS_TABLE} where job = $1 and generation = $2)
              and ($3::bigint is null or n.id = $3)
         returning id`,
        [job, generation, explicitId ?? null],
      );
      return rows.length ? Number(rows[0].id) : null;
    },

    async isCompleted(checkpoint: number): Promise<boolean> {
      const { rows } = await pool.query(`select 1 from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and id = $2 and state = 'completed'`, [job, checkpoint]);
      return rows.length > 0;
    },

    /** Sources: checkpoints of this generation triggered after `after`, oldest first. */
    async triggeredAfter(generation: number, after: number): Promise<number[]> {
      const { rows } = await pool.query<{ id: string }>(
        `select id from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and generation = $2 and id > $3 order by id`,
        [job, generation, after],
      );
      return rows.map((r) => Number(r.id));
    },

    /** A subtask's state at a checkpoint, written before it forwards the barrier (idempotent). */
    async snapshot(input: { checkpoint: number; generation: number; subtask: number; operator: string; kind: SnapshotKind; state: unknown }): Promise<void> {
      await pool.query(
        `insert into ${STREAM_SNAPSHOTS_TABLE} (job, checkpoint, generation, subtask, operator, kind, state)
           values ($1, $2, $3, $4, $5, $6, $7) on conflict do nothing`,
        [job, input.checkpoint, input.generation, input.subtask, input.operator, input.kind, JSON.stringify(input.state)],
      );
    },

    /**
     * The two-phase-commit sink at an aligned barrier: pre-commits this sink subtask's output for
     * the checkpoint and, when every sink subtask has pre-committed and every subtask of the
     * generation has snapshotted, commits the checkpoint: the sink table takes every pre-commit and
     * the checkpoint is marked completed, in this one transaction. The job's row is locked first,
     * so a generation that was superseded meanwhile commits nothing.
     */
    async precommitAndMaybeComplete(input: {
      checkpoint: number;
      generation: number;
      subtask: number;
      operator: string;
      sink: string;
      sinkSubtasks: number;
      totalSubtasks: number;
      keys: string[];
      counts: number[];
    }): Promise<'completed' | 'pre-committed'> {
      return inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ generation: number }>(`select generation from ${STREAM_JOBS_TABLE} where job = $1 for update`, [job]);
        if (rows[0]?.generation !== input.generation) throw new SupersededError(`job ${job} runs generation ${rows[0]?.generation}; checkpoint ${input.checkpoint} of generation ${input.generation} cannot commit`);
        await client.query(
          `insert into ${STREAM_SNAPSHOTS_TABLE} (job, checkpoint, generation, subtask, operator, kind, state)
             values ($1, $2, $3, $4, $5, 'sink', '{}') on conflict do nothing`,
          [job, input.checkpoint, input.generation, input.subtask, input.operator],
        );
        await client.query(
          `insert into ${STREAM_PRECOMMITS_TABLE} (job, checkpoint, generation, subtask, keys, counts)
             values ($1, $2, $3, $4, $5, $6) on conflict do nothing`,
          [job, input.checkpoint, input.generation, input.subtask, input.keys, input.counts],
        );
        const counted = await client.query<{ precommits: string; snapshots: string }>(
          `select (select count(*) from ${STREAM_PRECOMMITS_TABLE} where job = $1 and checkpoint = $2 and generation = $3) as precommits,
                  (select count(*) from ${STREAM_SNAPSHOTS_TABLE} where job = $1 and checkpoint = $2 and generation = $3) as snapshots`,
          [job, input.checkpoint, input.generation],
        );
        const { precommits, snapshots } = counted.rows[0];
        if (Number(precommits) < input.sinkSubtasks || Number(snapshots) < input.totalSubtasks) return 'pre-committed';
        await client.query(
          `insert into ${quoteIdentifier(input.sink)} (key, count, checkpoint)
             select u.key, u.count, $2 from ${STREAM_PRECOMMITS_TABLE} p, unnest(p.keys, p.counts) as u(key, count)
              where p.job = $1 and p.checkpoint = $2 and p.generation = $3
           on conflict (key) do update set count = excluded.count, checkpoint = excluded.checkpoint`,
          [job, input.checkpoint, input.generation],
        );
        await client.query(`update ${STREAM_CHECKPOINTS_TABLE} set state = 'completed', completed_at = now() where job = $1 and id = $2`, [job, input.checkpoint]);
        // Restores read the newest completed checkpoint, so its keys' older rows are superseded. Its
        // keys are its pre-commits' (every count an aggregate changed went to a sink): one
        // primary-key probe each, never a pass over the state.
        await client.query(
          `delete from ${STREAM_KEYED_STATE_TABLE} old
            using (select distinct u.key from ${STREAM_PRECOMMITS_TABLE} p, unnest(p.keys) as u(key)
                    where p.job = $1 and p.checkpoint = $2 and p.generation = $3) changed
            where old.job = $1 and old.key = changed.key and old.checkpoint < $2`,
          [job, input.checkpoint, input.generation],
        );
        await client.query(`delete from ${STREAM_PRECOMMITS_TABLE} where job = $1 and checkpoint <= $2`, [job, input.checkpoint]);
        // Only the newest completed checkpoint is restored from; a few older ones stay for audits (what a restore rewound to).
        await client.query(`delete from ${STREAM_SNAPSHOTS_TABLE} where job = $1 and checkpoint < $2`, [job, input.checkpoint - SNAPSHOTS_RETAINED]);
        return 'completed';
      });
    },
  };
}

export type JobState = ReturnType<typeof createJobState>;
