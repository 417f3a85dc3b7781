// A component test (one real part: the store on PostgreSQL): one workload's plan and its scale-out
// gate facts read the runtimes, the workload's own placement and the others' replicas counted per
// runtime by the database, never every placement and workload, and plan exactly what a plan on the
// full snapshot plans. bench/fleet.ts measured why: with 2,200 workloads a scale-out's two full reads
// spent most of the worker's CPU parsing rows, and 100 operations at once queued behind it.
import type { Pool } from 'pg';
import { evidenceActivities } from '../../activities/evidence';
import type { ActivityDeps } from '../../activities/ports';
import { buildPlan, usedSlotsByOthers } from '../../domain/plan';
import { capacityOf } from '../../domain/gates';
import { UNKNOWN_CONTRACT, type Workload } from '../../protocol';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createPlanner } from '../../store/planner';
import { createPlanStore } from '../../store/plans';
import { createRegistryStore, DuplicateTaskIdError } from '../../store/registry';
import { createRuntimeStore } from '../../store/runtimes';
import { createTestDatabase, observedPool } from '../../harness/database';

const RUNTIMES = 12;
const WORKLOADS = 300;

let db: Pool;
/** Rows the store's queries answered, counted. */
let rowsRead = 0;
let stores: { runtimes: ReturnType<typeof createRuntimeStore>; registry: ReturnType<typeof createRegistryStore>; plans: ReturnType<typeof createPlanStore> };

beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('planner');
  db = createPool(databaseUrl, { max: 4 });
  await migrate(db);
  const counted = observedPool(db, { rows: (count) => { rowsRead += count; } });
  stores = { runtimes: createRuntimeStore(counted), registry: createRegistryStore(counted), plans: createPlanStore(counted) };
  const runtimeStore = createRuntimeStore(db);
  for (let i = 0; i < RUNTIMES; i++) {
    await runtimeStore.register({ id: `rt-${i}`, endpoint: `http://10.0.0.${i + 1}:7400`, labels: { zone: i % 2 ? 'a' : 'b' }, slots: 200 }, 3_600_000);
  }
  // Placed workloads of every shape the counts must see: none, one, several replicas, two on one runtime.
  const names = Array.from({ length: WORKLOADS }, (_, i) => `wl-${String(i).padStart(3, '0')}`);
  const definition = { kind: 'service', replicas: 1, contract: UNKNOWN_CONTRACT, spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 } };
  const assignments = names.map((name, i) => JSON.stringify(Array.from({ length: i % 4 }, (_, index) => ({
    runtimeId: `rt-${(i * 7 + (index === 3 ? 0 : index)) % RUNTIMES}`, index, taskId: `${name}-${index}-g1`,
  }))));
  await db.query(`insert into workloads (name, kind, definition) select name, 'service', $2::jsonb from unnest($1::text[]) as name`, [names, JSON.stringify(definition)]);
  await db.query(
    `insert into placements (workload, fence, generation, assignments, updated_by)
     select workload, 1, 1, assignments, 'test' from unnest($1::text[], $2::jsonb[]) as t(workload, assignments)`,
    [names, assignments],
  );
});
afterAll(async () => {
  await db?.end();
});

const workloadOf = async (name: string): Promise<Workload> => (await stores.registry.getWorkload(name))!;

it('counts the other placements\' replicas per runtime as a read of every placement does', async () => {
  const placements = await stores.registry.listPlacements();
  for (const except of ['wl-003', 'wl-007', 'wl-000', 'no-such-workload']) {
    expect(await stores.registry.usedSlots({ except })).toEqual(usedSlotsByOthers(except, placements));
  }
  expect(Object.values(await stores.registry.usedSlots()).reduce((a, b) => a + b, 0)).toBe(placements.reduce((n, p) => n + p.assignments.length, 0));
});

it('plans one workload on the runtimes, its placement and the counts: the full snapshot\'s plan, a few rows read', async () => {
  const planner = createPlanner(stores, () => Date.now());
  for (const [name, replicas] of [['wl-003', 5], ['wl-000', 2], ['wl-006', 1]] as const) {
    const workload = await workloadOf(name);
    const full = await planner.snapshot();
    rowsRead = 0;
    const plan = await planner.plan(workload, replicas);
    // the runtimes, the workload's placement, one count per runtime, the stored plan
    expect(rowsRead).toBeLessThanOrEqual(3 * RUNTIMES + 2);
    const expected = buildPlan({ workload, replicas, ...full, nowMs: Date.now() });
    expect(plan.target).toEqual(expected.target);
    expect(plan.basis).toEqual(expected.basis);
  }
});

it('gathers a scale-out\'s gate facts from the same counts', async () => {
  const deps = { stores, agents: { probe: async () => ({ source: { ok: true }, destination: { ok: true } }) }, now: () => Date.now() } as unknown as ActivityDeps;
  const { gatherGateFacts } = evidenceActivities(deps);
  rowsRead = 0;
  const facts = await gatherGateFacts({ workload: 'wl-003', recipientRuntimeIds: [] });
  expect(rowsRead).toBeLessThanOrEqual(3 * RUNTIMES + 2);
  const used = usedSlotsByOthers('', await stores.registry.listPlacements());
  const own = (await stores.registry.getPlacement('wl-003'))!.assignments.map((a) => a.runtimeId);
  const eligible = Array.from({ length: RUNTIMES }, (_, i) => `rt-${i}`).sort().map((id) => ({
    id, freeSlots: 200 - (used[id] ?? 0), alreadyHostsWorkload: own.includes(id),
  }));
  expect(facts.eligible).toEqual(eligible);
  // what workflows ask for since: the same room, counted
  const counted = await gatherGateFacts({ workload: 'wl-003', recipientRuntimeIds: [], capacity: 'count' });
  expect(counted).toEqual({ capacity: capacityOf(eligible), probes: [] });
  expect(counted.capacity).toEqual({ runtimesWithRoom: RUNTIMES - own.length, freeSlots: eligible.reduce((sum, r) => sum + r.freeSlots, 0) });
  // a plan counts the same room on the fleet it read, so a scale-out's gates need not read it again
  const planned = await createPlanner(stores, () => Date.now()).planWithCapacity(await workloadOf('wl-003'), 5);
  expect(planned.capacity).toEqual(counted.capacity);
  rowsRead = 0;
  expect(await gatherGateFacts({ workload: 'wl-003', recipientRuntimeIds: [], capacity: 'known' })).toEqual({ probes: [] });
  expect(rowsRead).toBe(1); // the workload's definition: no runtime, no placement
});

it('refuses a placement write that names one task id twice, naming both replicas, and writes nothing', async () => {
  const before = await stores.registry.getPlacement('wl-003');
  const twice = [
    { runtimeId: 'rt-1', index: 0, taskId: 'wl-003-0-g1' },
    { runtimeId: 'rt-2', index: 1, taskId: 'wl-003-2-g1' },
    { runtimeId: 'rt-3', index: 2, taskId: 'wl-003-2-g1' },
  ];
  const write = stores.registry.writePlacement('wl-003', before!.fence, twice, { writer: 'test' });
  await expect(write).rejects.toBeInstanceOf(DuplicateTaskIdError);
  await expect(write).rejects.toThrow('task id wl-003-2-g1 is held by index 1 on rt-2 and index 2 on rt-3');
  expect(await stores.registry.getPlacement('wl-003')).toEqual(before);
});
