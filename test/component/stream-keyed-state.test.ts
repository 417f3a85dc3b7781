// A component test (one real part: the stream driver's job state on PostgreSQL, no agent): a keyed
// aggregate's counts are checkpointed incrementally and restored key by key, so neither a
// checkpoint nor a restore costs more as the state grows (bench/rescale.ts measures it; before,
// every checkpoint wrote each aggregate's whole counts and every new subtask of a hot rescale read
// every aggregate's whole snapshot). What is checked here is what the restore point must still mean:
// a key's count at checkpoint C is its newest row at or before C of a completed checkpoint.
import type { Pool } from 'pg';
import { createJobState, KEYED_COUNTS_AT_SQL, type ChangedCounts, type CompletedCheckpoint, type JobState } from '../../agent/drivers/stream/job-state';
import { KeyedCounts } from '../../agent/drivers/stream/operator-state';
import { keyGroupOf } from '../../domain/stream';
import { STREAM_CHECKPOINTS_TABLE, STREAM_KEYED_STATE_TABLE, STREAM_SNAPSHOTS_TABLE } from '../../protocol/stream-tables';
import { createPool } from '../../store/db';
import { createTestDatabase } from '../../harness/database';

const JOB = 'counts';
const MAX_PARALLELISM = 128;
const STATE_KEYS = 10_000;
const tables = { source: 'counts_in', sink: 'counts_out' };

let db: Pool;
let state: JobState;

beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('ks');
  db = createPool(databaseUrl, { max: 4 });
  state = createJobState(db, JOB);
  await state.ensureTables(tables.source, tables.sink);
});
afterAll(async () => {
  await db?.end();
});

interface Taken {
  id: number;
  generation: number;
  changed: ChangedCounts;
}

/** One aggregate subtask (2) of `generation` takes the next checkpoint: it snapshots what it changed. */
async function snapshot(counts: KeyedCounts, generation: number): Promise<Taken> {
  const id = (await state.trigger(generation))!;
  const changed = counts.takeChanged();
  await state.snapshotKeyedCounts({ checkpoint: id, generation, subtask: 2, operator: 'agg', changed });
  return { id, generation, changed };
}
/** The sink subtask (3) pre-commits what the aggregate sent it (the counts it changed), which completes the checkpoint. */
async function complete({ id, generation, changed }: Taken): Promise<CompletedCheckpoint> {
  const outcome = await state.precommitAndMaybeComplete({ checkpoint: id, generation, subtask: 3, operator: 'out', sink: tables.sink, sinkSubtasks: 1, totalSubtasks: 2, ...changed });
  expect(outcome).toBe('completed');
  return { id, generation };
}
/** Loads `keys` into a restored aggregate's counts, as the aggregate does for a batch's first records. */
async function loadInto(counts: KeyedCounts, restorePoint: CompletedCheckpoint, keys: string[]): Promise<void> {
  const unloaded = counts.unloaded(keys);
  counts.load(unloaded, await state.keyedCountsAt(restorePoint, unloaded));
}
interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

const rowsAt = async (checkpoint: number) =>
  (await db.query<{ n: number }>(`select count(*)::int as n from ${STREAM_KEYED_STATE_TABLE} where job = $1 and checkpoint = $2`, [JOB, checkpoint])).rows[0].n;
const rowsOf = async (key: string) =>
  (await db.query<{ checkpoint: string }>(`select checkpoint from ${STREAM_KEYED_STATE_TABLE} where job = $1 and key = $2 order by checkpoint`, [JOB, key])).rows.map((r) => Number(r.checkpoint));

describe('keyed state, checkpointed incrementally and restored key by key', () => {
  let first: CompletedCheckpoint;
  let second: CompletedCheckpoint;

  it('a checkpoint writes the keys counted since the previous one, not the whole state', async () => {
    await state.joinGeneration(1);
    const counts = new KeyedCounts(false);
    for (let i = 0; i < STATE_KEYS; i++) counts.increment(`key-${i}`);
    first = await complete(await snapshot(counts, 1));
    expect(await rowsAt(first.id)).toBe(STATE_KEYS);

    counts.increment('key-1');
    counts.increment('key-1');
    counts.increment('key-2');
    const taken = await snapshot(counts, 1);
    // Two keys changed: two rows, whatever the state holds; the snapshot mark says so too.
    expect(await rowsAt(taken.id)).toBe(2);
    const mark = await db.query(`select state from ${STREAM_SNAPSHOTS_TABLE} where job = $1 and checkpoint = $2 and kind = 'keyed-aggregate'`, [JOB, taken.id]);
    expect(mark.rows).toEqual([{ state: { changedKeys: 2 } }]);
    second = await complete(taken);
    // Completing it superseded those keys' older rows; every other key keeps its row of the first.
    expect(await rowsOf('key-1')).toEqual([second.id]);
    expect(await rowsOf('key-3')).toEqual([first.id]);
    expect(await rowsAt(first.id)).toBe(STATE_KEYS - 2);

    // A checkpoint where nothing changed writes only its mark.
    expect(await rowsAt((await snapshot(counts, 1)).id)).toBe(0);
  });

  it('a restored aggregate loads only the keys it meets, each at its count at the restore point', async () => {
    const counts = new KeyedCounts(true);
    expect(counts.unloaded(['key-1', 'key-3', 'key-3', 'never-counted'])).toEqual(['key-1', 'key-3', 'never-counted']);
    // Counting on a count not loaded yet would lose the restored one.
    expect(() => counts.increment('key-1')).toThrow(/before its restored count was loaded/);
    await loadInto(counts, second, ['key-1', 'key-3', 'never-counted']);
    expect(counts.size).toBe(3);
    expect(counts.unloaded(['key-1', 'key-3', 'never-counted'])).toEqual([]);
    expect([counts.increment('key-1'), counts.increment('key-3'), counts.increment('never-counted')]).toEqual([4, 2, 1]);
    expect(counts.takeChanged()).toEqual({ keys: ['key-1', 'key-3', 'never-counted'], counts: [4, 2, 1] });
    expect(counts.takeChanged()).toEqual({ keys: [], counts: [] });
  });

  it('restores no count of a checkpoint that did not complete, of a superseded generation, or after the restore point', async () => {
    // Generation 1 snapshots key-1 = 50 at a checkpoint it never completes; generation 2 takes over.
    const lost = new KeyedCounts(false);
    for (let i = 0; i < 50; i++) lost.increment('key-1');
    const never = await snapshot(lost, 1);
    await state.joinGeneration(2);
    const counts = new KeyedCounts(true);
    await loadInto(counts, second, ['key-1', 'key-2']);
    counts.increment('key-1');
    const next = await snapshot(counts, 2);
    expect(next.id).toBeGreaterThan(never.id);

    // Restored from the second checkpoint while the next is in flight: its counts, nothing later.
    expect(await state.keyedCountsAt(second, ['key-1', 'key-2'])).toEqual(new Map([['key-1', 3], ['key-2', 2]]));
    const third = await complete(next);
    expect(await state.keyedCountsAt(third, ['key-1', 'key-2', 'key-3'])).toEqual(new Map([['key-1', 4], ['key-2', 2], ['key-3', 1]]));
    // The never-completed row went with the rows the third checkpoint superseded.
    expect(await rowsOf('key-1')).toEqual([third.id]);
  });

  it('a lookup reads the rows of the keys it asks for, not the state, even before the table was ever analyzed', async () => {
    const job = 'planned';
    const [checkpoints, perCheckpoint] = [40, 2_500];
    // 100,000 keys written over 40 completed checkpoints, as a catch-up writes them; autovacuum has not analyzed it yet.
    await db.query(`insert into ${STREAM_CHECKPOINTS_TABLE} (job, id, generation, state, completed_at) select $1, i, 1, 'completed', now() from generate_series(1, $2::int) i`, [job, checkpoints]);
    await db.query(
      `insert into ${STREAM_KEYED_STATE_TABLE} (job, key, checkpoint, generation, count) select $1, 'key-' || i, 1 + i / $2::int, 1, 1 from generate_series(0, $2::int * $3::int - 1) i`,
      [job, perCheckpoint, checkpoints],
    );
    const keys = Array.from({ length: 60 }, (_, i) => `key-${i * 1_013}`);
    const { rows } = await db.query(`explain (analyze, format json) ${KEYED_COUNTS_AT_SQL}`, [job, keys, checkpoints]);
    const read = (node: PlanNode): number =>
      (node['Relation Name'] === STREAM_KEYED_STATE_TABLE ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] : 0)
      + (node.Plans ?? []).reduce((sum, child) => sum + read(child), 0);
    expect(read(rows[0]['QUERY PLAN'][0].Plan)).toBeLessThanOrEqual(keys.length);
    expect((await createJobState(db, job).keyedCountsAt({ id: checkpoints, generation: 1 }, keys)).size).toBe(keys.length);
  });

  it('a checkpoint taken before keyed state was incremental (whole counts in the snapshot) restores after the upgrade', async () => {
    const id = (await state.trigger(2))!;
    await db.query(
      `insert into ${STREAM_SNAPSHOTS_TABLE} (job, checkpoint, generation, subtask, operator, kind, state) values ($1, $2, 2, 2, 'agg', 'keyed-aggregate', $3)`,
      [JOB, id, JSON.stringify({ groups: { [keyGroupOf('legacy', MAX_PARALLELISM)]: { legacy: 7 } } })],
    );
    const legacy = await complete({ id, generation: 2, changed: { keys: ['legacy'], counts: [7] } });
    expect(await state.adoptWholeKeyedSnapshots(legacy)).toBe(1);
    expect(await state.adoptWholeKeyedSnapshots(legacy)).toBe(0);
    expect(await state.keyedCountsAt(legacy, ['legacy', 'key-5'])).toEqual(new Map([['legacy', 7], ['key-5', 1]]));
  });
});
