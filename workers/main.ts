// Orchestrator worker entry point.
import { NativeConnection } from '@temporalio/worker';
import { createPool } from '../store/db';
import { migrate } from '../store/migrate';
import { parseWorkerConfig } from './config';
import { createOrchestratorWorker } from './orchestrator';

async function main() {
  const config = parseWorkerConfig();
  const db = createPool(config.DATABASE_URL);
  await migrate(db);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const worker = await createOrchestratorWorker({
    connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.SCALEGATE_TASK_QUEUE, db, agentToken: config.SCALEGATE_AGENT_TOKEN,
    workflowBundle: config.SCALEGATE_WORKFLOW_BUNDLE ? { codePath: config.SCALEGATE_WORKFLOW_BUNDLE } : undefined,
  });
  // The SDK shuts the worker down gracefully on SIGINT/SIGTERM; run() resolves afterwards.
  await worker.run();
  await connection.close();
  await db.end();
}

main().catch((error) => {
  console.error(`scalegate worker failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`);
  process.exit(1);
});
