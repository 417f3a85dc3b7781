// Requests mean one thing, where it is written (issue 33 item 4; real PostgreSQL): a workload's
// kind is judged by the statement that writes it, so a PUT racing past the API's check still
// cannot turn a live service into a consumer; and an Idempotency-Key's first request, its body's
// digest included, is the one every later request with the key is compared with.
import type { Pool } from 'pg';
import { UNKNOWN_CONTRACT, type WorkloadDefinition } from '../../protocol';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createOperationStartStore } from '../../store/operation-starts';
import { createRegistryStore, KindChangeError } from '../../store/registry';
import { createTestDatabase } from '../../harness/database';

let db: Pool;
beforeAll(async () => {
  const { databaseUrl } = await createTestDatabase('requests');
  db = createPool(databaseUrl, { max: 2 });
  await migrate(db);
});
afterAll(async () => {
  await db?.end();
});

const service = { kind: 'service', replicas: 1, contract: UNKNOWN_CONTRACT, spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 } } as unknown as WorkloadDefinition;
const consumer = { kind: 'consumer', replicas: 1, contract: UNKNOWN_CONTRACT, spec: { partitions: 2, source: 'in_t', sink: 'out_t' } } as unknown as WorkloadDefinition;

it('refuses a live workload\'s kind change in the writing statement and writes nothing; a retired one may change', async () => {
  const registry = createRegistryStore(db);
  const defined = await registry.putWorkload('shape', service);
  const refusal = await registry.putWorkload('shape', consumer).then(() => null, (error: Error) => error);
  expect(refusal).toBeInstanceOf(KindChangeError);
  expect((refusal as KindChangeError).toBody()).toMatchObject({ error: 'kind-change', workload: 'shape', kind: 'service', requested: 'consumer' });
  const { rows } = await db.query('select kind, revision, definition from workloads where name = $1', ['shape']);
  expect({ kind: rows[0].kind, revision: Number(rows[0].revision), spec: rows[0].definition.spec }).toEqual({ kind: 'service', revision: defined.revision, spec: service.spec });
  // The same kind is replaced as before; once retired, it may come back as another kind.
  expect((await registry.putWorkload('shape', { ...service, replicas: 2 } as WorkloadDefinition)).replicas).toBe(2);
  await registry.retireWorkload('shape');
  expect(await registry.putWorkload('shape', consumer)).toMatchObject({ kind: 'consumer', retired: false });
});

it('keeps the first request of a key, with its body\'s digest; a start recorded before migration 011 reads as unbound to a body', async () => {
  const starts = createOperationStartStore(db);
  const first = { workflowId: 'scale:web', runId: 'run-1', kind: 'scaleOut', uiUrl: 'http://ui/1', request: 'POST /v1/workloads/web/scale', bodySha256: 'a'.repeat(64) };
  expect(await starts.record('key-1', first)).toEqual(first);
  // A racing second start of the key does not replace the first.
  expect(await starts.record('key-1', { ...first, runId: 'run-2', bodySha256: 'b'.repeat(64) })).toEqual(first);
  await db.query(`insert into operation_starts (idempotency_key, request, workflow_id, run_id, kind, ui_url) values ('old-key', 'POST /v1/workloads/web/scale', 'scale:web', 'run-0', 'scaleOut', 'http://ui/0')`);
  expect(await starts.get('old-key')).toMatchObject({ runId: 'run-0', bodySha256: null });
});
