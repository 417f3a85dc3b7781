// Starts one Temporal dev server, one PostgreSQL and one Kafka broker for the whole run (in
// parallel), and bundles the workflows once, so each test file only spawns its own API, worker and
// agent processes. Under `npm test` (scripts/test.ts) two jest runs share the servers it started:
// SCALEGATE_TEST_ENV_FILE names them, and this run starts none (nor stops them).
import fs from 'node:fs';
import { TEST_ENV_VAR } from '../../harness/env';
import { startSharedServers } from '../../harness/shared-servers';

export default async function setup(): Promise<void> {
  const given = process.env[TEST_ENV_VAR];
  if (given) {
    if (!fs.existsSync(given)) throw new Error(`${TEST_ENV_VAR} names ${given}, which does not exist: unset it, and jest starts the shared servers itself`);
    return;
  }
  const servers = await startSharedServers({ prefix: 'scalegate-test', kafka: true, containers: true, log: (line) => process.stderr.write(`[global-setup] ${line}\n`) });
  (globalThis as Record<string, unknown>).__scalegateStop = servers.stop;
}
