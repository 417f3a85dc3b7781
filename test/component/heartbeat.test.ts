// A component test (one real part: the API's store on PostgreSQL; the API in process, Temporal
// faked): a heartbeat costs one round trip for its credential and one statement for the renewal and
// its revocations, whatever the fleet and the number of placements (bench/fleet.ts measures it at
// 10,000 runtimes).
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import { parseApiConfig } from '../../api/config';
import type { ApiDeps } from '../../api/deps';
import { createMetrics } from '../../api/metrics';
import { buildServer } from '../../api/server';
import type { TemporalGateway } from '../../api/temporal';
import { StateSchema, WorkloadDefinitionSchema } from '../../protocol';
import { createPool } from '../../store/db';
import { createLedgerStore } from '../../store/ledger';
import { migrate } from '../../store/migrate';
import { createOperationStartStore } from '../../store/operation-starts';
import { createPlanner } from '../../store/planner';
import { createPlanStore } from '../../store/plans';
import { createRegistryStore } from '../../store/registry';
import { createRuntimeStore, HEARTBEAT_STATEMENT } from '../../store/runtimes';
import { createStreamJobStore } from '../../store/stream-jobs';
import { createTestDatabase, observedPool } from '../../harness/database';

const tokens = { operator: 'op-'.padEnd(30, 'o'), agent: 'ag-'.padEnd(30, 'a'), viewer: 'vw-'.padEnd(30, 'v') };
const noTemporal: TemporalGateway = {
  client: async () => {
    throw new Error('no Temporal in this test');
  },
  reachable: async () => false,
  close: async () => {},
};

let db: Pool;
/** Statements the API sent, counted. */
let statements = 0;
let app: ReturnType<typeof buildServer>;
let apiUrl: string;

beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('hb');
  db = createPool(databaseUrl, { max: 4 });
  await migrate(db);
  // The API's pool, counting every query it is asked for.
  const counted = observedPool(db, { query: () => statements++ });
  const config = parseApiConfig({
    DATABASE_URL: databaseUrl, SCALEGATE_OPERATOR_TOKEN: tokens.operator, SCALEGATE_AGENT_TOKEN: tokens.agent, SCALEGATE_VIEWER_TOKEN: tokens.viewer,
    SCALEGATE_LOG_LEVEL: 'silent',
  });
  const stores = { runtimes: createRuntimeStore(counted), registry: createRegistryStore(counted), plans: createPlanStore(counted) };
  const deps: ApiDeps = {
    config, db: counted, ...stores, ledger: createLedgerStore(counted), streamJobs: createStreamJobStore(counted), planner: createPlanner(stores),
    operationStarts: createOperationStartStore(counted), temporal: noTemporal, metrics: createMetrics({ processMetrics: false }),
  };
  app = buildServer(deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app?.close();
  await db?.end();
});

const post = async (path: string, token: string, body: unknown) => {
  const response = await fetch(`${apiUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as any };
};
const report = (taskId: string) => ({ taskId, workload: 'web', incarnation: `inc-${taskId}`, state: 'ready', counts: {}, errors: 0 });

describe('POST /v1/runtimes/:id/heartbeat', () => {
  let credential: string;
  let fence: number;

  beforeAll(async () => {
    const registered = await post('/v1/runtimes', tokens.agent, { id: 'rt-a', endpoint: 'http://127.0.0.1:9', labels: { zone: 'a' }, slots: 4 });
    expect(registered.status).toBe(201);
    ({ credential, fence } = registered.body);
    const registry = createRegistryStore(db);
    await registry.putWorkload('web', WorkloadDefinitionSchema.parse({ kind: 'service', replicas: 2, spec: { command: ['true'] } }));
    await registry.writePlacement('web', 0, [{ runtimeId: 'rt-a', index: 0, taskId: 'web-0' }, { runtimeId: 'rt-b', index: 1, taskId: 'web-1' }]);
  });

  it('renews the lease and revokes the reported tasks placed elsewhere in two round trips: the credential, then one statement', async () => {
    statements = 0;
    const renewed = await post('/v1/runtimes/rt-a/heartbeat', credential, { fence, tasks: [report('web-0'), report('web-1'), report('old-7')] });
    expect(renewed).toMatchObject({ status: 200, body: { fence, status: 'READY', revoked: ['web-1', 'old-7'] } });
    expect(statements).toBe(2);
  });

  it('answers a stale fence with the same revocations, nothing renewed', async () => {
    const { rows: [before] } = await db.query('select lease_expires_at from runtimes where id = $1', ['rt-a']);
    statements = 0;
    const stale = await post('/v1/runtimes/rt-a/heartbeat', credential, { fence: fence + 1, tasks: [report('web-0'), report('web-1')] });
    expect(stale).toMatchObject({ status: 409, body: { error: 'stale-fence', currentFence: fence, status: 'READY', revoked: ['web-1'] } });
    expect(statements).toBe(2);
    const { rows: [after] } = await db.query('select lease_expires_at from runtimes where id = $1', ['rt-a']);
    expect(after.lease_expires_at).toEqual(before.lease_expires_at);
  });

  it('records a task reported crash-looping once, still in one statement, and GET /v1/state shows its restarts and the decision', async () => {
    const crashEvents = async () => (await db.query(`select subject, detail from events where type = 'task.crash-looping' order by id`)).rows;
    const looping = {
      ...report('web-0'), state: 'restarting', counts: { restarts: 5 }, crashLooping: true,
      lastExit: { code: 7, signal: null, at: '2026-12-03T00:00:00.000Z' }, nextRestartAt: '2026-12-03T00:00:16.000Z',
    };
    // Restarted, not (yet) crash-looping: counted, no event.
    await post('/v1/runtimes/rt-a/heartbeat', credential, { fence, tasks: [{ ...report('web-0'), counts: { restarts: 2 } }] });
    expect(await crashEvents()).toEqual([]);
    statements = 0;
    expect((await post('/v1/runtimes/rt-a/heartbeat', credential, { fence, tasks: [looping] })).status).toBe(200);
    expect(statements).toBe(2);
    // Reported again: the control plane was told already.
    await post('/v1/runtimes/rt-a/heartbeat', credential, { fence, tasks: [{ ...looping, counts: { restarts: 6 } }] });
    expect(await crashEvents()).toEqual([{
      subject: 'web-0',
      detail: { runtimeId: 'rt-a', workload: 'web', restarts: 5, lastExit: looping.lastExit, nextRestartAt: looping.nextRestartAt, decidedBy: 'crash-loops:web' },
    }]);

    const state = await fetch(`${apiUrl}/v1/state`, { headers: { authorization: `Bearer ${tokens.viewer}` } });
    expect(state.status).toBe(200);
    const body = (await state.json()) as any;
    const web = body.workloads.find((w: { name: string }) => w.name === 'web');
    expect(web).toMatchObject({ status: 'degraded', ready: 0 });
    // each replica's revision: what it runs, as its placement write recorded it (rollouts, DESIGN.md §3)
    const REVISION = expect.stringMatching(/^r-[0-9a-f]{12}$/);
    expect(web.tasks).toEqual([
      { taskId: 'web-0', runtimeId: 'rt-a', index: 0, state: 'restarting', restarts: 6, crashLooping: true, lastExit: looping.lastExit, nextRestartAt: looping.nextRestartAt, revision: REVISION },
      // rt-b never reported: nothing is known of its task
      { taskId: 'web-1', runtimeId: 'rt-b', index: 1, state: null, restarts: null, crashLooping: false, lastExit: null, nextRestartAt: null, revision: REVISION },
    ]);
    expect(body.crashLooping).toEqual([expect.objectContaining({
      workload: 'web', taskId: 'web-0', runtimeId: 'rt-a', restarts: 6, decision: null,
      reason: expect.stringMatching(/^crash-looping: task web-0 on rt-a restarted 6 time\(s\), last exit code 7; awaiting the decision of crash-loops:web, running with its backoff/),
    })]);
    expect(body.runtimeEvents).toContainEqual(expect.objectContaining({ type: 'task.crash-looping', subject: 'web-0' }));
    // and the metrics count them, one series per workload
    const metrics = await (await fetch(`${apiUrl}/metrics`)).text();
    expect(metrics).toMatch(/^scalegate_task_restarts\{workload="web"\} 6$/m);
    expect(metrics).toMatch(/^scalegate_tasks_crash_looping\{workload="web"\} 1$/m);

    // Healthy again: the workload reads placed, nothing is listed.
    await post('/v1/runtimes/rt-a/heartbeat', credential, { fence, tasks: [{ ...report('web-0'), counts: { restarts: 6 } }] });
    const healthy = (await (await fetch(`${apiUrl}/v1/state`, { headers: { authorization: `Bearer ${tokens.viewer}` } })).json()) as any;
    expect(healthy.crashLooping).toEqual([]);
    expect(healthy.workloads.find((w: { name: string }) => w.name === 'web')).toMatchObject({ status: 'placed', ready: 1 });
  });

  it('answers GET /v1/state before the reconcile loop\'s first pass as its schema says: the CLI reads it', async () => {
    // No worker here, so no pass yet: `npx scalegate state` just after `npm start` failed on
    // reconcile.skipped = null where the schema said boolean (the clean-clone check caught it).
    const answer = await fetch(`${apiUrl}/v1/state`, { headers: { authorization: `Bearer ${tokens.viewer}` } });
    const body = (await answer.json()) as { reconcile: unknown };
    expect(body.reconcile).toEqual({ at: null, skipped: null, passes: 0, skips: 0 });
    const read = StateSchema.safeParse(body);
    expect(read.success ? 'readable' : read.error.issues).toBe('readable');
  });

  it('finds the tasks placed on its runtime through an index, not by reading every placement', async () => {
    // Enough placements that reading them all would be the wrong plan: 10,000 workloads of 3
    // replicas on 10,000 runtimes (bench/fleet.ts' shape), written at once, as a restore or a large
    // reconcile writes them. With the GIN index's pending list on (fastupdate, PostgreSQL's default)
    // such a write left every entry in the list: each heartbeat read the whole list, and the
    // planner, counting its pages, read every placement instead (12 ms a heartbeat; 6,009 leases
    // lapsed in bench/fleet's window). Migration 013 turns the pending list off.
    const names = Array.from({ length: 10_000 }, (_, i) => `svc-${i}`);
    await db.query(
      `insert into workloads (name, kind, definition) select name, 'service', '{}'::jsonb from unnest($1::text[]) as name`,
      [names],
    );
    await db.query(
      `insert into placements (workload, fence, assignments)
       select name, 1, (select jsonb_agg(jsonb_build_object('runtimeId', 'rt-' || ((ord * 3 + k) % 10000), 'index', k, 'taskId', name || '-' || k)) from generate_series(0, 2) k)
         from unnest($1::text[]) with ordinality as t(name, ord)`,
      [names],
    );
    await db.query('analyze placements');
    const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${HEARTBEAT_STATEMENT}`, ['rt-a', fence, 45_000, '[]']);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain('placements_assignments_idx');
    expect(plan).not.toMatch(/Seq Scan on placements/);
  });
});
