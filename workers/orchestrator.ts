// Builds the orchestrator worker (task queue "scalegate"). Shared by the entry point and the tests.
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import type { Pool } from 'pg';
import { createPostgresActivities } from '../activities/deps';

export async function createOrchestratorWorker(options: {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Pool;
  agentToken: string;
  /** a prebuilt bundle (tests build it once per run); otherwise the workflows are bundled here */
  workflowBundle?: WorkerOptions['workflowBundle'];
}): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: require.resolve('../workflows') }),
    activities: createPostgresActivities({ db: options.db, agentToken: options.agentToken }),
  });
}
