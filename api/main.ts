// API process entry point: configuration, store, Temporal, HTTP server, lease sweeper.
import { createPlanner } from '../activities/planning';
import { createPool } from '../store/db';
import { createLedgerStore } from '../store/ledger';
import { migrate } from '../store/migrate';
import { createPlanStore } from '../store/plans';
import { createRegistryStore } from '../store/registry';
import { createRuntimeStore } from '../store/runtimes';
import { parseApiConfig } from './config';
import type { ApiDeps } from './deps';
import { createMetrics } from './metrics';
import { buildServer } from './server';
import { createTemporalGateway } from './temporal';

async function main() {
  const config = parseApiConfig();
  const db = createPool(config.DATABASE_URL, { max: 20, connectTimeoutMs: 2_000, queryTimeoutMs: 5_000 });
  await migrate(db);
  const stores = { runtimes: createRuntimeStore(db), registry: createRegistryStore(db), plans: createPlanStore(db) };
  const deps: ApiDeps = {
    config,
    db,
    ...stores,
    ledger: createLedgerStore(db),
    planner: createPlanner(stores),
    temporal: createTemporalGateway(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE),
    metrics: createMetrics(),
  };
  const app = buildServer(deps);
  await app.listen({ host: config.SCALEGATE_API_HOST, port: config.SCALEGATE_API_PORT });

  // Leases are checked every third of their length, so a missed lease is seen within ttl/3.
  const sweeper = setInterval(() => {
    deps.runtimes.sweepExpired().then(
      (lost) => lost.forEach((id) => app.log.warn({ runtime: id }, 'lease expired: runtime LOST')),
      (error) => app.log.error({ err: error }, 'lease sweep failed'),
    );
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

main().catch((error) => {
  console.error(`scalegate api failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
