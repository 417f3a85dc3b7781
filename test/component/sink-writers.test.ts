// Two live owners as the sink sees them (issue 35 item 4, store/sink-audit.ts sinkWriterInterleavings):
// on a real PostgreSQL, a consumer's sink rows and ownership log written by hand. A partition whose
// writers follow its acquisitions passes, even when ownership comes back to an earlier task by a new
// acquisition; a writer whose rows return after another's, without acquiring again, is found.
import { Pool } from 'pg';
import { BOOKKEEPING_DDL, OWNERSHIP_LOG_TABLE, sinkTableDdl } from '../../protocol/consumer-tables';
import { sinkWriterInterleavings } from '../../store/sink-audit';
import { createTestDatabase } from '../../harness/database';

let db: Pool;

beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('sinkw');
  db = new Pool({ connectionString: databaseUrl, max: 2 });
  for (const statement of [sinkTableDdl('w_out'), ...BOOKKEEPING_DDL]) await db.query(statement);
});
afterAll(async () => {
  await db?.end();
});

/** Sink rows of `partition` at `offsets`, written by `task`. */
const wrote = (partition: number, task: string, offsets: number[]) =>
  db.query(`insert into w_out (partition, "offset", key, payload, task_id, incarnation) select $1, o, 'k', '{}', $2, $2 || '-i' from unnest($3::bigint[]) o`, [partition, task, offsets]);
const acquired = (partition: number, task: string, fence: number) =>
  db.query(`insert into ${OWNERSHIP_LOG_TABLE} (workload, partition, task_id, incarnation, fence, event) values ('w', $1, $2, $2 || '-i', $3, 'acquire')`, [partition, task, fence]);

test('writers that follow their acquisitions pass; a return without one is two live owners', async () => {
  // partition 0: a → b → a again, each by an acquisition (a scale-out, then a scale-in whose survivor keeps its id)
  await acquired(0, 'a', 1);
  await wrote(0, 'a', [0, 1, 2]);
  await acquired(0, 'b', 2);
  await wrote(0, 'b', [3, 4]);
  await acquired(0, 'a', 3);
  await wrote(0, 'a', [5]);
  // partition 1: a, then b takes over, then a writes again without acquiring (its fence unchecked)
  await acquired(1, 'a', 1);
  await wrote(1, 'a', [0, 1]);
  await acquired(1, 'b', 2);
  await wrote(1, 'b', [2, 3]);
  await wrote(1, 'a', [4]);
  await wrote(1, 'b', [5]);
  expect(await sinkWriterInterleavings(db, { workload: 'w', sink: 'w_out' })).toEqual([
    { workload: 'w', partition: 1, task: 'a', fromOffset: 4, after: 'b' },
  ]);
});
