// Orchestrator worker entry point: wait for PostgreSQL and Temporal, register the search attributes,
// start the reconcile loop, run the worker. Logs are JSON lines with tokens redacted (lib/log.ts).
import { Client, Connection, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { untilReachable } from '../lib/backoff';
import { isServerUnavailable } from '../lib/errors';
import { createRedactor, secretsOf, type Logger } from '../lib/log';
import { createPool } from '../store/db';
import { leaseSweeper } from '../workflows/lease-sweeper';
import { reconcile } from '../workflows/reconcile';
import { migrate } from '../store/migrate';
import { parseWorkerConfig } from './config';
import { createOrchestratorWorker, ensureSearchAttributes, installWorkerLogging } from './orchestrator';

const redact = createRedactor(secretsOf(process.env));
let log: Logger | null = null;

async function main() {
  const config = parseWorkerConfig();
  log = installWorkerLogging(config.SCALEGATE_LOG_LEVEL, redact);
  const db = createPool(config.DATABASE_URL, { connectTimeoutMs: 5_000, queryTimeoutMs: 60_000 });
  // Only a server not answering is waited out; a migration that fails is an error at once.
  const onWait = (message: string, error: string) => log?.warn(message, { error });
  await untilReachable('PostgreSQL', () => migrate(db), { retryable: isServerUnavailable, onWait });

  const client = await connectClient(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, onWait);
  try {
    // Before any workflow runs: a workflow upserting an unregistered attribute fails its task.
    await ensureSearchAttributes(client.connection.operatorService, config.TEMPORAL_NAMESPACE, { log });
    await ensureReconcileLoop(client, config.SCALEGATE_TASK_QUEUE, config.SCALEGATE_RECONCILE_INTERVAL_MS);
    await ensureLeaseSweeper(client, config.SCALEGATE_TASK_QUEUE);
  } finally {
    await client.connection.close();
  }

  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const worker = await createOrchestratorWorker({
    connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.SCALEGATE_TASK_QUEUE, db, kafkaBrokers: config.SCALEGATE_KAFKA_BROKERS, kubeconfig: config.SCALEGATE_KUBECONFIG,
    workflowBundle: config.SCALEGATE_WORKFLOW_BUNDLE ? { codePath: config.SCALEGATE_WORKFLOW_BUNDLE } : undefined,
  });
  log.info('worker started', { taskQueue: config.SCALEGATE_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE });
  // The SDK shuts the worker down gracefully on SIGINT/SIGTERM; run() resolves afterwards.
  await worker.run();
  await connection.close();
  await db.end();
}

/** A client once Temporal answers and knows the namespace (a server still creating it is not an error). */
function connectClient(address: string, namespace: string, onWait: (message: string, error: string) => void): Promise<Client> {
  return untilReachable(`Temporal at ${address} (namespace ${namespace})`, async () => {
    const connection = await Connection.connect({ address, connectTimeout: 2_000 });
    try {
      await connection.workflowService.describeNamespace({ namespace });
    } catch (error) {
      await connection.close();
      throw error;
    }
    return new Client({ connection, namespace });
  }, { onWait });
}

/** The reconcile loop is one long-lived workflow per task queue (id `reconcile:<queue>`); starting it twice is a no-op. */
async function ensureReconcileLoop(client: Client, taskQueue: string, intervalMs: number) {
  try {
    await client.workflow.start(reconcile, {
      taskQueue, workflowId: `reconcile:${taskQueue}`, args: [{ intervalMs }], staticSummary: 'reconcile loop',
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}

/** The lease sweeper is one long-lived workflow per task queue (id `lease-sweeper:<queue>`); starting it twice is a no-op. */
async function ensureLeaseSweeper(client: Client, taskQueue: string) {
  try {
    await client.workflow.start(leaseSweeper, { taskQueue, workflowId: `lease-sweeper:${taskQueue}`, args: [{}], staticSummary: 'lease sweeper' });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}

main().catch((error) => {
  const message = error instanceof Error ? error.stack ?? error.message : String(error);
  if (log) log.error('scalegate worker failed', { error: message });
  else process.stderr.write(`${redact(`scalegate worker failed: ${message}`)}\n`);
  process.exit(1);
});
