// A polling activity that the workflow cancelled stops polling (activities/ports.ts pause): the
// converge wait, the ledger wait and the checkpoint wait end with a CancelledFailure as soon as the
// cancellation reaches them, instead of polling on to their deadline (which also kept a stopping
// worker alive until it was killed). Real PostgreSQL; the agent named is one nobody answers for.
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Pool } from 'pg';
import { createActivities } from '../../activities';
import { createActivityDeps } from '../../activities/deps';
import { createPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createTestDatabase } from '../../harness/database';

jest.setTimeout(30_000);

let db: Pool;
beforeAll(async () => {
  db = createPool((await createTestDatabase('cancel')).databaseUrl, { max: 4 });
  await migrate(db);
});
afterAll(async () => {
  await db?.end();
});

/** Runs `call` as an activity, cancels it at its first heartbeat, and answers how it ended. */
async function cancelledAtFirstHeartbeat(call: (env: MockActivityEnvironment) => Promise<unknown>): Promise<unknown> {
  const env = new MockActivityEnvironment({ activityId: 'wait', workflowExecution: { workflowId: 'cancel-test', runId: 'run-1' } });
  env.once('heartbeat', () => env.cancel());
  return call(env).then((answer) => ({ answered: answer }), (error: unknown) => error);
}

it('a converge wait, a ledger wait and a checkpoint wait end CancelledFailure when cancelled, long before their deadlines', async () => {
  const deps = createActivityDeps({ db });
  const activities = createActivities(deps);
  await deps.stores.runtimes.register({ id: 'rt-silent', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 4 }, 60_000);
  // deadlines far beyond the test's own timeout: an ending other than the cancellation fails the test
  const minutes = 10 * 60_000;
  const converge = await cancelledAtFirstHeartbeat((env) => env.run(activities.awaitTasksReady, { tasks: [{ runtimeId: 'rt-silent', taskId: 'never-ready' }], timeoutMs: minutes }));
  expect(converge).toBeInstanceOf(CancelledFailure);
  const ledger = await cancelledAtFirstHeartbeat((env) => env.run(activities.awaitLedgerRow, { workload: 'nothing', kind: 'replan', sinceIso: new Date().toISOString(), timeoutMs: minutes }));
  expect(ledger).toBeInstanceOf(CancelledFailure);
  const checkpoint = await cancelledAtFirstHeartbeat((env) => env.run(activities.awaitCheckpoint, { job: 'no-job', checkpoint: 1, timeoutMs: minutes }));
  expect(checkpoint).toBeInstanceOf(CancelledFailure);
});
