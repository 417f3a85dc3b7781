// The runtime store's narrow reads against real PostgreSQL: what a placement's readers ask of the
// fleet is answered for the runtimes they name, not by reading every runtime (a scale-out's evidence
// read the whole fleet twice: bench/fleet's worker profile at 1,000 runtimes).
import { Pool } from 'pg';
import { createTestDatabase, observedPool } from '../../harness/database';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createRuntimeStore } from '../../store/runtimes';

let db: Pool;
let databaseUrl: string;
const rows: number[] = [];
let runtimes: ReturnType<typeof createRuntimeStore>;

beforeAll(async () => {
  ({ databaseUrl } = await createTestDatabase('rts'));
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

it('fleet() gives each runtime\'s protocol fields as list() does', async () => {
  await db.query(`update runtimes set labels = case when id in ('rt-a', 'rt-c') then '{"zone": "a"}'::jsonb else '{"zone": "b", "gpu": "true"}'::jsonb end`);
  const fleet = await runtimes.fleet();
  const listed = (await runtimes.list()).map(({ id, endpoint, labels, slots, status, leaseExpiresAt, fence }) => ({ id, endpoint, labels, slots, status, leaseExpiresAt, fence }));
  expect(fleet).toEqual(listed);
  expect(fleet.map((r) => r.labels)).toEqual([{ zone: 'a' }, { zone: 'b', gpu: 'true' }, { zone: 'a' }, { zone: 'b', gpu: 'true' }]);
  // one parsed set shared by the runtimes that have it, frozen so that no reader can change it for the others
  expect(fleet[0].labels).toBe(fleet[2].labels);
  expect(Object.isFrozen(fleet[1].labels)).toBe(true);
});

it('fleet() gives each lease end as list() does, to the millisecond truncated, whatever the session time zone', async () => {
  const ends: Record<string, string> = {
    'rt-a': '2026-12-05 03:00:00.123999+00', // microseconds beyond the millisecond are dropped, not rounded
    'rt-b': '2026-12-31 23:59:59.9999995+00', // rounded by PostgreSQL itself to 00:00:00.000000 of the new year
    'rt-c': '2027-02-28 12:34:56+05:30', // another offset, whole seconds
  };
  for (const [id, end] of Object.entries(ends)) await db.query('update runtimes set lease_expires_at = $2 where id = $1', [id, end]);
  const expected = { 'rt-a': '2026-12-05T03:00:00.123Z', 'rt-b': '2027-01-01T00:00:00.000Z', 'rt-c': '2027-02-28T07:04:56.000Z' };
  const offset = new Pool({ connectionString: databaseUrl, max: 1, options: '-c TimeZone=America/St_Johns' });
  try {
    for (const store of [runtimes, createRuntimeStore(offset)]) {
      const fleet = Object.fromEntries((await store.fleet()).map((r) => [r.id, r.leaseExpiresAt]));
      const listed = Object.fromEntries((await store.list()).map((r) => [r.id, r.leaseExpiresAt]));
      expect(fleet).toEqual(listed);
      expect(fleet).toMatchObject(expected);
    }
  } finally {
    await offset.end();
  }
});
