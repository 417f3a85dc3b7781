// A component test (one real part: the store on PostgreSQL; no agent runs, Temporal is faked).
// The stream tables are written by hand as the stream driver would (protocol/stream-tables.ts), and
// read back through store/stream-jobs.ts, both stream sink audits, GET /v1/jobs/:job and
// `scalegate jobs`.
import { WorkflowNotFoundError } from '@temporalio/client';
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Pool } from 'pg';
import { createPlanner } from '../../store/planner';
import { parseApiConfig } from '../../api/config';
import type { ApiDeps } from '../../api/deps';
import { createMetrics } from '../../api/metrics';
import { buildServer } from '../../api/server';
import type { TemporalGateway } from '../../api/temporal';
import { run } from '../../cli/main';
import { WorkloadDefinitionSchema, type TaskReport } from '../../protocol';
import { STREAM_CHECKPOINTS_TABLE, STREAM_JOBS_TABLE, STREAM_SNAPSHOTS_TABLE, streamTablesDdl } from '../../protocol/stream-tables';
import { StreamJobViewSchema } from '../../protocol/stream';
import { createPool } from '../../store/db';
import { createLedgerStore } from '../../store/ledger';
import { migrate } from '../../store/migrate';
import { createPlanStore } from '../../store/plans';
import { createOperationStartStore } from '../../store/operation-starts';
import { createRegistryStore } from '../../store/registry';
import { createRuntimeStore } from '../../store/runtimes';
import { auditStreamCheckpoint, auditStreamSink, STREAM_MISMATCHES_SHOWN } from '../../store/sink-audit';
import { createStreamJobStore } from '../../store/stream-jobs';
import { createTestDatabase } from '../../harness/database';

const JOB = 'clicks';
const tables = { source: 'clicks_in', sink: 'clicks_out' };
const PARTITIONS = 4;
const OFFSETS_PER_PARTITION = 10;
const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
/** The key of a source row: spread so every key lands in several partitions. */
const keyOf = (partition: number, offset: number) => KEYS[(partition * OFFSETS_PER_PARTITION + offset) % KEYS.length];

let db: Pool;
let databaseUrl: string;

beforeAll(async () => {
  databaseUrl = (await createTestDatabase('ss')).databaseUrl;
  db = createPool(databaseUrl, { max: 4 });
  await migrate(db);
});
afterAll(async () => {
  await db?.end();
});

const checkpoint = (id: number, generation: number, state: 'triggered' | 'completed') =>
  db.query(
    `insert into ${STREAM_CHECKPOINTS_TABLE} (job, id, generation, state, completed_at) values ($1, $2, $3, $4, case when $4 = 'completed' then now() end)
     on conflict (job, id) do update set state = excluded.state, completed_at = excluded.completed_at`,
    [JOB, id, generation, state],
  );
const snapshot = (checkpointId: number, generation: number, subtask: number, kind: string, state: unknown) =>
  db.query(
    `insert into ${STREAM_SNAPSHOTS_TABLE} (job, checkpoint, generation, subtask, operator, kind, state) values ($1, $2, $3, $4, $5, $5, $6)`,
    [JOB, checkpointId, generation, subtask, kind, JSON.stringify(state)],
  );
const setGeneration = (generation: number) =>
  db.query(
    `insert into ${STREAM_JOBS_TABLE} (job, generation, exchange_secret) values ($1, $2, 'secret')
     on conflict (job) do update set generation = excluded.generation`,
    [JOB, generation],
  );
/** Replaces the sink with per-key counts, each row written by `checkpointId`. */
async function setSink(counts: Record<string, number>, checkpointId: number): Promise<void> {
  await db.query(`delete from ${tables.sink}`);
  for (const [key, count] of Object.entries(counts)) {
    await db.query(`insert into ${tables.sink} (key, count, checkpoint) values ($1, $2, $3)`, [key, count, checkpointId]);
  }
}
/** Per-key counts of the source rows at or below `offsets` (partition → last offset). */
function countsUpTo(offsets: Record<string, number>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (let partition = 0; partition < PARTITIONS; partition++) {
    for (let offset = 0; offset <= (offsets[partition] ?? -1); offset++) {
      const key = keyOf(partition, offset);
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }
  return counts;
}
const ALL_OFFSETS = Object.fromEntries(Array.from({ length: PARTITIONS }, (_, p) => [String(p), OFFSETS_PER_PARTITION - 1]));
/** What checkpoint 3 (generation 2) covers: partitions 0..1 from subtask 0, 2..3 from subtask 1 (2 read nothing yet). */
const C3_OFFSETS = { 0: 4, 1: 2, 2: -1, 3: 9 };

describe('store/stream-jobs and the stream audits', () => {
  const store = () => createStreamJobStore(db);

  it('answers "nothing yet" before the job made its tables', async () => {
    expect(await store().lastCompletedCheckpoint(JOB)).toBeNull();
    expect(await store().checkpointInFlight(JOB)).toBeNull();
    expect(await store().currentGeneration(JOB)).toBeNull();
    expect(await store().sourceOffsetsAt(JOB, 1)).toEqual({});
    expect(await store().recordsCoveredBy(JOB, tables.source, 1)).toBe(0);
  });

  it('reads generations, checkpoints and source offsets as the driver writes them', async () => {
    for (const statement of streamTablesDdl(tables.source, tables.sink)) await db.query(statement);
    for (let partition = 0; partition < PARTITIONS; partition++) {
      for (let offset = 0; offset < OFFSETS_PER_PARTITION; offset++) {
        await db.query(`insert into ${tables.source} (partition, "offset", key) values ($1, $2, $3)`, [partition, offset, keyOf(partition, offset)]);
      }
    }
    // Generation 1 completes checkpoint 1, triggers 2, and is replaced by generation 2 before 2 completes.
    await setGeneration(1);
    await checkpoint(1, 1, 'completed');
    await snapshot(1, 1, 0, 'source', { offsets: { 0: 1, 1: 1, 2: 1, 3: 1 } });
    await checkpoint(2, 1, 'triggered');
    expect(await store().checkpointInFlight(JOB)).toMatchObject({ id: 2, generation: 1, completedAt: null });
    await setGeneration(2);
    expect(await store().currentGeneration(JOB)).toBe(2);
    // Checkpoint 2 can never complete now (commits are fenced by the generation): not in flight.
    expect(await store().checkpointInFlight(JOB)).toBeNull();

    await checkpoint(3, 2, 'triggered');
    expect(await store().checkpointInFlight(JOB)).toMatchObject({ id: 3, generation: 2 });
    await snapshot(3, 2, 0, 'source', { offsets: { 0: 4, 1: 2 } });
    await snapshot(3, 2, 1, 'source', { offsets: { 2: -1, 3: 9 } });
    await snapshot(3, 2, 2, 'keyed-aggregate', { groups: { 5: { k1: 3 } } });
    await snapshot(3, 2, 4, 'sink', {});
    // A superseded generation's snapshot of the same id is not part of checkpoint 3.
    await snapshot(3, 1, 0, 'source', { offsets: { 0: 9, 1: 9, 2: 9, 3: 9 } });
    await checkpoint(3, 2, 'completed');
    await checkpoint(4, 2, 'triggered');

    const last = await store().lastCompletedCheckpoint(JOB);
    expect(last).toMatchObject({ id: 3, generation: 2 });
    expect(Date.parse(last!.completedAt!)).toBeGreaterThanOrEqual(Date.parse(last!.triggeredAt));
    expect(await store().checkpointInFlight(JOB)).toMatchObject({ id: 4, generation: 2, completedAt: null });
    expect(await store().sourceOffsetsAt(JOB, 3)).toEqual({ 0: 4, 1: 2, 2: -1, 3: 9 });
    expect(await store().sourceOffsetsAt(JOB, 1)).toEqual({ 0: 1, 1: 1, 2: 1, 3: 1 });
    expect(await store().sourceOffsetsAt(JOB, 4)).toEqual({}); // no snapshot yet
    expect(await store().recordsCoveredBy(JOB, tables.source, 3)).toBe(5 + 3 + 0 + 10);
    expect(await store().recordsCoveredBy(JOB, tables.source, 1)).toBe(4 * 2);
    expect(await store().recordsCoveredBy(JOB, 'no_such_table', 3)).toBe(0);
  });

  it('proves the sink shows exactly the last completed checkpoint, and counts rows above it', async () => {
    await setSink(countsUpTo(C3_OFFSETS), 3);
    const audit = await auditStreamCheckpoint(db, { job: JOB, ...tables });
    expect(audit).toMatchObject({
      job: JOB, checkpoint: { id: 3, generation: 2 }, checkpointInFlight: { id: 4 },
      sourceRows: PARTITIONS * OFFSETS_PER_PARTITION, coveredSourceRows: 18, sinkTotal: 18, rowsAboveCheckpoint: 0, consistent: true,
    });

    // A count from checkpoint 4, which has not completed: exactly what must never be seen.
    await db.query(`update ${tables.sink} set count = count + 1, checkpoint = 4 where key = 'k1'`);
    expect(await auditStreamCheckpoint(db, { job: JOB, ...tables })).toMatchObject({ sinkTotal: 19, rowsAboveCheckpoint: 1, consistent: false });
  });

  it('reports no checkpoint, and every sink row above it, for a job without one', async () => {
    expect(await auditStreamCheckpoint(db, { job: 'other', ...tables })).toMatchObject({
      checkpoint: null, checkpointInFlight: null, coveredSourceRows: 0, rowsAboveCheckpoint: KEYS.length, consistent: false,
    });
  });

  it('checks every key against its source rows and finds each kind of mismatch', async () => {
    const exact = countsUpTo(ALL_OFFSETS);
    await setSink(exact, 5);
    expect(await auditStreamSink(db, tables)).toEqual({
      sourceRows: 40, sinkTotal: 40, keys: KEYS.length, mismatched: [], mismatchedKeys: 0, extraKeys: 0, exact: true,
    });

    const { k2: _missing, ...withoutK2 } = exact;
    await setSink({ ...withoutK2, k1: exact.k1 + 1, stray: 3 }, 5);
    expect(await auditStreamSink(db, tables)).toEqual({
      sourceRows: 40, sinkTotal: 40 + 1 - exact.k2 + 3, keys: KEYS.length,
      mismatched: [{ key: 'k1', source: exact.k1, sink: exact.k1 + 1 }, { key: 'k2', source: exact.k2, sink: 0 }],
      mismatchedKeys: 2, extraKeys: 1, exact: false,
    });

    // A sink that only holds an earlier checkpoint is not exact either.
    await setSink(countsUpTo(C3_OFFSETS), 3);
    expect((await auditStreamSink(db, tables)).exact).toBe(false);
  });

  it('lists at most the first mismatches, by key, and counts them all', async () => {
    const source = 'many_in';
    const sink = 'many_out';
    for (const statement of streamTablesDdl(source, sink).slice(0, 2)) await db.query(statement);
    await db.query(`insert into ${source} (partition, "offset", key) select 0, i, 'key-' || lpad(i::text, 3, '0') from generate_series(0, 29) i`);
    const audit = await auditStreamSink(db, { source, sink });
    expect(audit).toMatchObject({ sourceRows: 30, sinkTotal: 0, keys: 30, mismatchedKeys: 30, extraKeys: 0, exact: false });
    expect(audit.mismatched).toHaveLength(STREAM_MISMATCHES_SHOWN);
    expect(audit.mismatched[0]).toEqual({ key: 'key-000', source: 1, sink: 0 });
    expect(audit.mismatched.map((m) => m.key)).toEqual([...audit.mismatched.map((m) => m.key)].sort());
  });

  it('is what scripts/verify-sink.ts --stream prints, exiting 1 unless exact', async () => {
    const verify = (...args: string[]) =>
      new Promise<{ code: number | null; answer: any }>((resolve, reject) => {
        execFile(path.join('node_modules', '.bin', 'tsx'), ['scripts/verify-sink.ts', '--stream', '--db', databaseUrl, '--source', tables.source, '--sink', tables.sink, ...args],
          (error, stdout) => (stdout ? resolve({ code: error ? Number(error.code) : 0, answer: JSON.parse(stdout) }) : reject(error)));
      });
    await setSink(countsUpTo(ALL_OFFSETS), 3);
    expect(await verify()).toEqual({ code: 0, answer: await auditStreamSink(db, tables) });
    const withJob = await verify('--job', JOB);
    expect(withJob).toMatchObject({ code: 1, answer: { exact: true, checkpoint: { checkpoint: { id: 3 }, consistent: false } } });
    await db.query(`update ${tables.sink} set count = count + 1 where key = 'k3'`);
    expect(await verify()).toMatchObject({ code: 1, answer: { exact: false, mismatched: [{ key: 'k3' }] } });
  });

  it('refuses to audit a table that does not exist', async () => {
    await expect(auditStreamSink(db, { source: 'nowhere', sink: tables.sink })).rejects.toThrow(/nowhere/);
  });
});

describe('GET /v1/jobs/:job and scalegate jobs', () => {
  const tokens = { operator: 'op-'.padEnd(30, 'o'), agent: 'ag-'.padEnd(30, 'a'), viewer: 'vw-'.padEnd(30, 'v') };
  /** What Temporal answers: per workflow id a running operation's type and phase; `down` when unreachable, `frozen` when it never answers. */
  let temporal: Record<string, { type: string; phase: string }> | 'down' | 'frozen' = {};

  const fakeTemporal: TemporalGateway = {
    async client() {
      if (temporal === 'down') throw new Error('14 UNAVAILABLE: connection refused');
      if (temporal === 'frozen') return new Promise<never>(() => {});
      const running = temporal;
      const describe = async (workflowId: string) => {
        const found = running[workflowId];
        if (!found) throw new WorkflowNotFoundError('not found', workflowId, undefined);
        return { workflowId, type: found.type, status: { name: 'RUNNING' }, typedSearchAttributes: { get: () => found.phase } };
      };
      return { workflow: { getHandle: (workflowId: string) => ({ describe: () => describe(workflowId) }) } } as never;
    },
    reachable: async () => temporal !== 'down',
    close: async () => {},
  };

  let app: ReturnType<typeof buildServer>;
  let apiUrl: string;

  beforeAll(async () => {
    const config = parseApiConfig({
      DATABASE_URL: databaseUrl, SCALEGATE_OPERATOR_TOKEN: tokens.operator, SCALEGATE_AGENT_TOKEN: tokens.agent, SCALEGATE_VIEWER_TOKEN: tokens.viewer,
      SCALEGATE_LOG_LEVEL: 'silent',
    });
    const stores = { runtimes: createRuntimeStore(db), registry: createRegistryStore(db), plans: createPlanStore(db) };
    const deps: ApiDeps = {
      config, db, ...stores, ledger: createLedgerStore(db), streamJobs: createStreamJobStore(db), planner: createPlanner(stores),
      operationStarts: createOperationStartStore(db), temporal: fakeTemporal, metrics: createMetrics({ processMetrics: false }),
    };
    app = buildServer(deps);
    await app.listen({ host: '127.0.0.1', port: 0 });
    apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    // The job of the audits above, at 2 / 2 / 1, placed over two runtimes that reported some subtasks.
    const registry = createRegistryStore(db);
    const definition = WorkloadDefinitionSchema.parse({
      kind: 'stream',
      spec: {
        source: tables.source, sink: tables.sink, partitions: PARTITIONS, checkpointIntervalMs: 1000, maxParallelism: 16,
        operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
      },
    });
    await registry.putWorkload(JOB, definition);
    const assignments = [0, 1, 2, 3, 4].map((index) => ({ runtimeId: index % 2 ? 'rt-b' : 'rt-a', index, taskId: `${JOB}-${index}-g2` }));
    await registry.writePlacement(JOB, 0, [...assignments].reverse(), { generation: 2 });
    await registry.putWorkload('web', WorkloadDefinitionSchema.parse({ kind: 'service', replicas: 1, spec: { command: ['true'] } }));

    const runtimes = createRuntimeStore(db);
    const report = (index: number, counts: Record<string, number>, extra: Partial<TaskReport> = {}): TaskReport => ({
      taskId: `${JOB}-${index}-g2`, workload: JOB, incarnation: `inc-${index}-0123456789`, state: 'ready', counts, errors: 0, ...extra,
    });
    for (const id of ['rt-a', 'rt-b']) {
      const { fence } = await runtimes.register({ id, endpoint: 'http://127.0.0.1:9', labels: {}, slots: 4 }, 60_000);
      const reports = id === 'rt-a'
        ? [report(0, { recordsIn: 20, recordsOut: 20, recordsRead: 25, lastCheckpoint: 3 }, { backlog: 2, latencyMs: { p50: 1, p95: 4 } }), report(4, { recordsIn: 40, recordsOut: 7, lastCheckpoint: 3 })]
        : [report(1, { recordsIn: 20, recordsOut: 20, recordsRead: 20, lastCheckpoint: 3 })]; // 3 has not reported
      await runtimes.heartbeat(id, fence, reports, 60_000);
    }
  });
  afterAll(async () => {
    await app?.close();
  });

  const get = async (path: string, token: string | null = tokens.viewer) => {
    const response = await fetch(`${apiUrl}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
    return { status: response.status, body: (await response.json()) as any };
  };

  it('shows operators, subtasks joined with their reports, checkpoints and the running operation', async () => {
    temporal = { 'rescale:clicks': { type: 'rescaleOperator', phase: 'Draining' } };
    const { status, body } = await get(`/v1/jobs/${JOB}`);
    expect(status).toBe(200);
    const view = StreamJobViewSchema.parse(body);
    expect(view).toMatchObject({
      job: JOB, generation: 2,
      operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
      lastCompletedCheckpoint: { id: 3, generation: 2 }, checkpointInFlight: { id: 4, generation: 2 },
      runningOperation: { workflowId: 'rescale:clicks', kind: 'rescaleOperator', phase: 'Draining' },
    });
    expect(view.subtasks.map((s) => [s.operator, s.index, s.subtask, s.runtimeId])).toEqual([
      ['src', 0, 0, 'rt-a'], ['src', 1, 1, 'rt-b'], ['agg', 0, 2, 'rt-a'], ['agg', 1, 3, 'rt-b'], ['out', 0, 4, 'rt-a'],
    ]);
    expect(view.subtasks[0]).toEqual({
      operator: 'src', index: 0, subtask: 0, runtimeId: 'rt-a', taskId: 'clicks-0-g2', incarnation: 'inc-0-0123456789', state: 'ready',
      recordsIn: 20, recordsOut: 20, recordsRead: 25, lastCheckpoint: 3, backlog: 2, latencyMs: { p50: 1, p95: 4 },
      // the counters are as old as rt-a's last heartbeat
      reportedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(view.subtasks[3].reportedAt).toBeNull(); // no report yet
    expect(view.subtasks[4]).toMatchObject({ recordsIn: 40, recordsOut: 7, recordsRead: null, lastCheckpoint: 3, backlog: null });
    expect(view.subtasks[3]).toMatchObject({ incarnation: null, state: null, recordsIn: null, recordsRead: null }); // no report yet
  });

  it('prefers a rescale to a replan, and shows none when nothing runs', async () => {
    temporal = { 'replan:clicks': { type: 'stopTheWorldReplan', phase: 'Redeploying' } };
    expect((await get(`/v1/jobs/${JOB}`)).body.runningOperation).toEqual({ workflowId: 'replan:clicks', kind: 'stopTheWorldReplan', phase: 'Redeploying' });
    temporal = { 'replan:clicks': { type: 'stopTheWorldReplan', phase: 'Redeploying' }, 'rescale:clicks': { type: 'rescaleOperator', phase: 'Preparing' } };
    expect((await get(`/v1/jobs/${JOB}`)).body.runningOperation.workflowId).toBe('rescale:clicks');
    temporal = {};
    expect((await get(`/v1/jobs/${JOB}`)).body.runningOperation).toBeNull();
  });

  it('answers without the running operation when Temporal is down or does not answer', async () => {
    temporal = 'down';
    expect(await get(`/v1/jobs/${JOB}`)).toMatchObject({ status: 200, body: { job: JOB, runningOperation: null } });
    temporal = 'frozen';
    const started = Date.now();
    expect(await get(`/v1/jobs/${JOB}`)).toMatchObject({ status: 200, body: { job: JOB, runningOperation: null } });
    expect(Date.now() - started).toBeLessThan(5_000);
    temporal = {};
  });

  it('refuses what is not a stream job, and callers without a token', async () => {
    expect(await get('/v1/jobs/nothing')).toMatchObject({ status: 404, body: { error: 'not-found' } });
    expect(await get('/v1/jobs/web')).toMatchObject({ status: 422, body: { error: 'unsupported-kind', kind: 'service' } });
    expect(await get('/v1/jobs/Not_A_Name')).toMatchObject({ status: 422, body: { error: 'validation-failed' } });
    expect((await get(`/v1/jobs/${JOB}`, null)).status).toBe(401);
  });

  it('is in the OpenAPI document', async () => {
    const { body } = await get('/openapi.json', null);
    expect(body.paths['/v1/jobs/{job}'].get).toMatchObject({ 'x-scalegate-role': 'viewer', parameters: [{ name: 'job', in: 'path', required: true }] });
  });

  describe('scalegate jobs', () => {
    const cli = async (...args: string[]) => {
      const lines: string[] = [];
      const saved = process.env.SCALEGATE_VIEWER_TOKEN;
      process.env.SCALEGATE_VIEWER_TOKEN = tokens.viewer;
      try {
        await run([...args, '--api', apiUrl], (text) => lines.push(text));
      } finally {
        if (saved === undefined) delete process.env.SCALEGATE_VIEWER_TOKEN;
        else process.env.SCALEGATE_VIEWER_TOKEN = saved;
      }
      return lines.join('\n');
    };

    it('prints the operators, one row per subtask, the checkpoints and the operation', async () => {
      temporal = { 'rescale:clicks': { type: 'rescaleOperator', phase: 'Draining' } };
      const text = await cli('jobs', JOB);
      expect(text).toMatch(/^operators: +src \(source, 2\) → agg \(keyed-aggregate, 2\) → out \(sink, 1\)$/m);
      // Past events read as past: "completed in 0s" was a clock difference below a second.
      expect(text).toMatch(/^last checkpoint: +3 \(generation 2, completed (\d+s ago|now)\)$/m);
      expect(text).toMatch(/^in flight: +4 \(generation 2, triggered (\d+s ago|now)\)$/m);
      // How old the counters are: the oldest agent report.
      expect(text).toMatch(/^counters: +as of (\d+s ago|now) \(the oldest agent report; each agent reports with its heartbeat\)$/m);
      expect(text).toMatch(/^operation: +rescale:clicks rescaleOperator \(Draining\)$/m);
      const rows = text.slice(text.indexOf('SUBTASKS')).split('\n').slice(1);
      expect(rows[0].split(/ +/)).toEqual(['OPERATOR', 'INDEX', 'RUNTIME', 'INCARNATION', 'STATE', 'IN', 'OUT', 'READ', 'CHECKPOINT', 'REPORTED']);
      expect(rows[1]).toMatch(/^src +0 +rt-a +inc-0-01 +ready +20 +20 +25 +3 +(\d+s ago|now)$/);
      expect(rows[4].split(/ +/)).toEqual(['agg', '1', 'rt-b', '-', '-', '-', '-', '-', '-', '-']);
      expect(rows).toHaveLength(6);
    });

    it('prints the API answer with --json', async () => {
      temporal = {};
      const answer = JSON.parse(await cli('jobs', JOB, '--json'));
      expect(StreamJobViewSchema.parse(answer)).toMatchObject({ job: JOB, runningOperation: null });
    });
  });
});
