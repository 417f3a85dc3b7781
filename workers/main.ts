// Orchestrator worker entry point.
import { Client, Connection, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { createPool } from '../store/db';
import { reconcile } from '../workflows/reconcile';
import { migrate } from '../store/migrate';
import { parseWorkerConfig } from './config';
import { createOrchestratorWorker } from './orchestrator';

async function main() {
  const config = parseWorkerConfig();
  const db = createPool(config.DATABASE_URL, { connectTimeoutMs: 5_000, queryTimeoutMs: 60_000 });
  await migrate(db);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const worker = await createOrchestratorWorker({
    connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.SCALEGATE_TASK_QUEUE, db, agentToken: config.SCALEGATE_AGENT_TOKEN,
    workflowBundle: config.SCALEGATE_WORKFLOW_BUNDLE ? { codePath: config.SCALEGATE_WORKFLOW_BUNDLE } : undefined,
  });
  await ensureReconcileLoop(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.SCALEGATE_TASK_QUEUE, config.SCALEGATE_RECONCILE_INTERVAL_MS);
  // The SDK shuts the worker down gracefully on SIGINT/SIGTERM; run() resolves afterwards.
  await worker.run();
  await connection.close();
  await db.end();
}

/** The reconcile loop is one long-lived workflow per task queue (id `reconcile:<queue>`); starting it twice is a no-op. */
async function ensureReconcileLoop(address: string, namespace: string, taskQueue: string, intervalMs: number) {
  const connection = await Connection.connect({ address });
  try {
    await new Client({ connection, namespace }).workflow.start(reconcile, {
      taskQueue, workflowId: `reconcile:${taskQueue}`, args: [{ intervalMs }], staticSummary: 'reconcile loop',
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  } finally {
    await connection.close();
  }
}

main().catch((error) => {
  console.error(`scalegate worker failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`);
  process.exit(1);
});
