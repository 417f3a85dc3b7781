// A component test (one real part: the store on PostgreSQL; no Temporal, no agent is called).
// The reconcile pass's skip decision on a fresh database: it must notice the very first workload
// and the very first placement, and a workload whose PUT had taken its revision but not committed
// when a pass read the key.
import type { Pool } from 'pg';
import { createPostgresActivities } from '../../activities/deps';
import { UNKNOWN_CONTRACT } from '../../protocol';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createRegistryStore } from '../../store/registry';
import { createRuntimeStore } from '../../store/runtimes';
import { createTestDatabase } from '../../harness/database';

let db: Pool;

beforeAll(async () => {
  db = createPool((await createTestDatabase('r')).databaseUrl, { max: 3 });
  await migrate(db);
});
afterAll(async () => {
  await db?.end();
});

it('skips only when nothing it decides from moved, from the first workload and placement on', async () => {
  const activities = createPostgresActivities({ db });
  const registry = createRegistryStore(db);
  await createRuntimeStore(db).register({ id: 'rt-1', endpoint: 'http://127.0.0.1:9', labels: { zone: 'a' }, slots: 4 }, 60_000);

  expect((await activities.reconcilePass()).skipped).toBe(false);
  expect((await activities.reconcilePass()).skipped).toBe(true);

  await registry.putWorkload('first', { kind: 'service', replicas: 1, selector: {}, contract: UNKNOWN_CONTRACT, spec: { command: ['true'], env: {}, graceMs: 100 } });
  const afterPut = await activities.reconcilePass();
  expect(afterPut.skipped).toBe(false);
  expect(afterPut.planIds.map((p) => p.workload)).toEqual(['first']);

  await registry.writePlacement('first', 0, [{ runtimeId: 'rt-1', index: 0, taskId: 'first-0-g1' }]);
  expect((await activities.reconcilePass()).skipped).toBe(false); // the first placement write moved it
  expect((await activities.reconcilePass()).skipped).toBe(true);
});

it('plans a workload whose PUT had not committed when a pass read its inputs, once it has', async () => {
  const activities = createPostgresActivities({ db });
  await activities.reconcilePass();
  expect((await activities.reconcilePass()).skipped).toBe(true);
  // A PUT under way: its row takes its revision (nextval) and is not committed yet.
  const writer = await db.connect();
  try {
    await writer.query('begin');
    const definition = { kind: 'service', replicas: 1, selector: {}, contract: UNKNOWN_CONTRACT, spec: { command: ['true'], env: {}, graceMs: 100 } };
    await writer.query('insert into workloads (name, kind, definition) values ($1, $2, $3)', ['late', 'service', JSON.stringify(definition)]);
    const during = await activities.reconcilePass();
    expect(during.planIds.map((p) => p.workload)).not.toContain('late'); // not visible yet
    await writer.query('commit');
  } finally {
    writer.release();
  }
  const after = await activities.reconcilePass();
  expect(after.skipped).toBe(false);
  expect(after.planIds.map((p) => p.workload)).toContain('late');
});

it('a pass whose apply found its workload busy is not recorded as seen: the next pass plans it again', async () => {
  const activities = createPostgresActivities({ db });
  const registry = createRegistryStore(db);
  await registry.putWorkload('held', { kind: 'service', replicas: 1, selector: {}, contract: UNKNOWN_CONTRACT, spec: { command: ['true'], env: {}, graceMs: 100 } });
  const found = await activities.reconcilePass({ deferMarker: true });
  expect(found.planIds.map((p) => p.workload)).toContain('held');
  // The loop could not start its apply: `scale:held` was running (a rollout, a scale).
  await activities.recordReconcilePass({ inputsKey: found.inputsKey, busy: ['held'] });
  const again = await activities.reconcilePass({ deferMarker: true });
  expect(again.skipped).toBe(false);
  expect(again.planIds.map((p) => p.workload)).toContain('held');
  // Its apply started this time: the pass is recorded as seen, and the next one skips.
  await activities.recordReconcilePass({ inputsKey: again.inputsKey, busy: [] });
  expect((await activities.reconcilePass({ deferMarker: true })).skipped).toBe(true);
});
