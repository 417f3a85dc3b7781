// API process entry point: configuration, store, Temporal, HTTP server, and the API's liveness.
// The API sweeps no lease: the lease sweeper is a durable workflow (workflows/lease-sweeper.ts). The
// API records its liveness every leaseTtl/3 in PostgreSQL (with the lease it hands out), so the
// sweeper can tell its own outage from the fleet's, and reports the runtimes the sweeper or a
// recovery declared LOST (log line and scalegate_lease_expirations_total) from the events table.
import { createPlanner } from '../store/planner';
import { createPool } from '../store/db';
import { createLedgerStore } from '../store/ledger';
import { enableDataPlaneLogin } from '../store/data-plane-role';
import { migrate } from '../store/migrate';
import { DATA_PLANE_ROLE } from '../protocol/data-plane';
import { createPlanStore } from '../store/plans';
import { createOperationStartStore } from '../store/operation-starts';
import { createRegistryStore } from '../store/registry';
import { apiOutageAfterMs } from '../domain/recovery';
import { createRuntimeStore } from '../store/runtimes';
import { createStreamJobStore } from '../store/stream-jobs';
import { untilReachable } from '../lib/backoff';
import { isServerUnavailable } from '../lib/errors';
import { createLogger, createRedactor, secretsOf } from '../lib/log';
import { parseApiConfig } from './config';
import { kafkaMetadata } from '../lib/kafka';
import type { ApiDeps } from './deps';
import { createMetrics } from './metrics';
import { buildServer } from './server';
import { createTemporalGateway } from './temporal';

async function main() {
  const config = parseApiConfig();
  const db = createPool(config.DATABASE_URL, { max: 20, connectTimeoutMs: 2_000, queryTimeoutMs: 5_000 });
  // A PostgreSQL not answering yet (or frozen) is waited out, as the worker does; a failing migration is not.
  const startLog = createLogger({ level: config.SCALEGATE_LOG_LEVEL, redact: createRedactor(secretsOf(process.env)), scope: { process: 'api' } });
  await untilReachable('PostgreSQL', () => migrate(db), { retryable: isServerUnavailable, onWait: (message, error) => startLog.warn(message, { error }) });
  if (config.SCALEGATE_AGENT_DATABASE_PASSWORD && !(await enableDataPlaneLogin(db, config.SCALEGATE_AGENT_DATABASE_PASSWORD))) {
    throw new Error(`SCALEGATE_AGENT_DATABASE_PASSWORD is set, but the role ${DATA_PLANE_ROLE} does not exist: create it as docs/security.md shows`);
  }
  const metrics = createMetrics();
  const stores = { runtimes: createRuntimeStore(db), registry: createRegistryStore(db), plans: createPlanStore(db) };
  const deps: ApiDeps = {
    config,
    db,
    ...stores,
    ledger: createLedgerStore(db),
    operationStarts: createOperationStartStore(db),
    streamJobs: createStreamJobStore(db),
    planner: createPlanner(stores),
    temporal: createTemporalGateway(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE),
    metrics,
    ...(config.SCALEGATE_KAFKA_BROKERS ? { kafka: kafkaMetadata(config.SCALEGATE_KAFKA_BROKERS) } : {}),
  };
  const app = buildServer(deps);
  const leaseTtlMs = config.SCALEGATE_LEASE_TTL_MS;
  // Alive from before the first request: a restarted API is a control plane that was away.
  await deps.runtimes.recordLiveness('api', apiOutageAfterMs(leaseTtlMs), leaseTtlMs);
  let lastEventId = await deps.registry.lastEventId();
  await app.listen({ host: config.SCALEGATE_API_HOST, port: config.SCALEGATE_API_PORT });
  app.log.info({ host: config.SCALEGATE_API_HOST, port: config.SCALEGATE_API_PORT, taskQueue: config.SCALEGATE_TASK_QUEUE }, 'api listening');

  // Every third of the lease: record the API's liveness, then report what was declared LOST since.
  let ticking = false;
  const tick = async () => {
    if (ticking) return; // a slow database: one tick at a time (the gap shows as an outage, as it should)
    ticking = true;
    try {
      await deps.runtimes.recordLiveness('api', apiOutageAfterMs(leaseTtlMs), leaseTtlMs);
      const events = await deps.registry.eventsAfter(lastEventId, ['runtime.lost']);
      let expired = 0;
      for (const event of events) {
        lastEventId = event.id;
        const byLease = event.detail.by === 'lease-sweeper';
        if (byLease) expired += 1;
        app.log.warn({ runtime: event.subject, by: event.detail.by, fence: event.detail.fence }, byLease ? 'lease expired: runtime LOST' : 'runtime declared LOST');
      }
      metrics.countLeaseExpirations(expired);
    } catch (error) {
      app.log.error({ err: error }, 'liveness record failed');
    } finally {
      ticking = false;
    }
  };
  const liveness = setInterval(() => void tick(), Math.max(100, Math.floor(leaseTtlMs / 3)));

  const shutdown = async () => {
    clearInterval(liveness);
    await app.close();
    await deps.temporal.close();
    await db.end();
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((error) => {
  const redact = createRedactor(secretsOf(process.env));
  process.stderr.write(`${redact(`scalegate api failed to start: ${error instanceof Error ? error.message : String(error)}`)}\n`);
  process.exit(1);
});
