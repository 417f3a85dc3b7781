// API process entry point: configuration, store, Temporal, HTTP server, lease sweeper.
import { createPlanner } from '../activities/planning';
import { createPool } from '../store/db';
import { createLedgerStore } from '../store/ledger';
import { migrate } from '../store/migrate';
import { createPlanStore } from '../store/plans';
import { createRegistryStore } from '../store/registry';
import { createRuntimeStore, type RuntimeStore } from '../store/runtimes';
import { createRedactor, secretsOf } from '../lib/log';
import { parseApiConfig } from './config';
import type { ApiDeps } from './deps';
import { createMetrics, type Metrics } from './metrics';
import { buildServer } from './server';
import { createTemporalGateway } from './temporal';

async function main() {
  const config = parseApiConfig();
  const db = createPool(config.DATABASE_URL, { max: 20, connectTimeoutMs: 2_000, queryTimeoutMs: 5_000 });
  await migrate(db);
  const metrics = createMetrics();
  // Every sweep that declares runtimes LOST (the sweeper's and GET /v1/state's) is counted and logged.
  let onExpired = (_lost: string[]) => {};
  const stores = { runtimes: countLeaseExpirations(createRuntimeStore(db), metrics, (lost) => onExpired(lost)), registry: createRegistryStore(db), plans: createPlanStore(db) };
  const deps: ApiDeps = {
    config,
    db,
    ...stores,
    ledger: createLedgerStore(db),
    planner: createPlanner(stores),
    temporal: createTemporalGateway(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE),
    metrics,
  };
  const app = buildServer(deps);
  onExpired = (lost) => lost.forEach((id) => app.log.warn({ runtime: id }, 'lease expired: runtime LOST'));
  await app.listen({ host: config.SCALEGATE_API_HOST, port: config.SCALEGATE_API_PORT });
  app.log.info({ host: config.SCALEGATE_API_HOST, port: config.SCALEGATE_API_PORT, taskQueue: config.SCALEGATE_TASK_QUEUE }, 'api listening');

  // Leases are checked every third of their length, so a missed lease is seen within ttl/3.
  const sweeper = setInterval(() => {
    deps.runtimes.sweepExpired().catch((error) => app.log.error({ err: error }, 'lease sweep failed'));
  }, Math.max(100, Math.floor(config.SCALEGATE_LEASE_TTL_MS / 3)));

  const shutdown = async () => {
    clearInterval(sweeper);
    await app.close();
    await deps.temporal.close();
    await db.end();
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

/** Sweeps that declare runtimes LOST count in scalegate_lease_expirations_total and are told to `onExpired`. */
function countLeaseExpirations(store: RuntimeStore, metrics: Metrics, onExpired: (lost: string[]) => void): RuntimeStore {
  return {
    ...store,
    sweepExpired: async () => {
      const lost = await store.sweepExpired();
      metrics.countLeaseExpirations(lost.length);
      if (lost.length) onExpired(lost);
      return lost;
    },
  };
}

main().catch((error) => {
  const redact = createRedactor(secretsOf(process.env));
  process.stderr.write(`${redact(`scalegate api failed to start: ${error instanceof Error ? error.message : String(error)}`)}\n`);
  process.exit(1);
});
