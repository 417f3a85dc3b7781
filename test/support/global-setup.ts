// Starts one Temporal dev server, one PostgreSQL and one Kafka broker for the whole run (in
// parallel), and bundles the workflows once, so each test file only spawns its own API, worker and
// agent processes.
import { startSharedServers } from '../../harness/shared-servers';

export default async function setup(): Promise<void> {
  const servers = await startSharedServers({ prefix: 'scalegate-test', kafka: true, containers: true, log: (line) => process.stderr.write(`[global-setup] ${line}\n`) });
  (globalThis as Record<string, unknown>).__scalegateStop = servers.stop;
}
