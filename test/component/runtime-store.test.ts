// The runtime store's narrow reads against real PostgreSQL: what a placement's readers ask of the
// fleet is answered for the runtimes they name, not by reading every runtime (a scale-out's evidence
// read the whole fleet twice: bench/fleet's worker profile at 1,000 runtimes).
import type { Pool } from 'pg';
import { createTestDatabase, observedPool } from '../../harness/database';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createRuntimeStore } from '../../store/runtimes';

let db: Pool;
const rows: number[] = [];
let runtimes: ReturnType<typeof createRuntimeStore>;

beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('rts');
  db = createPool(databaseUrl, { max: 2 });
  await migrate(db);
  runtimes = createRuntimeStore(observedPool(db, { rows: (count) => rows.push(count) }));
  for (const id of ['rt-a', 'rt-b', 'rt-c', 'rt-d']) await runtimes.register({ id, endpoint: `http://127.0.0.1:9/${id}`, labels: {}, slots: 4 }, 600_000);
  for (const id of ['rt-b', 'rt-d']) expect((await runtimes.declareLost(id, { by: 'test' })).outcome).toBe('declared');
});
afterAll(async () => {
  await db?.end();
});

it('lostAmong names the LOST runtimes among those asked, reading only those rows', async () => {
  rows.length = 0;
  expect([...await runtimes.lostAmong(['rt-a', 'rt-b', 'rt-c', 'rt-b'])].sort()).toEqual(['rt-b']);
  expect(rows).toEqual([1]); // one statement, one row: rt-d (LOST, not asked) and the READY ones are not read
  expect([...await runtimes.lostAmong(['rt-d', 'rt-gone'])]).toEqual(['rt-d']);
  rows.length = 0;
  expect(await runtimes.lostAmong([])).toEqual(new Set());
  expect(rows).toEqual([]); // nothing asked, no statement
  // the fleet as list() reads it agrees
  const lost = (await runtimes.list()).filter((r) => r.status === 'LOST').map((r) => r.id);
  expect(lost).toEqual(['rt-b', 'rt-d']);
});
