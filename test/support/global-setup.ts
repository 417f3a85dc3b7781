// Starts one Temporal dev server and one PostgreSQL for the whole run, and bundles the workflows
// once, so each test file only spawns its own API, worker and agent processes.
import { startSharedServers } from './shared-servers';

export default async function setup(): Promise<void> {
  const servers = await startSharedServers({ prefix: 'scalegate-test', log: (line) => process.stderr.write(`[global-setup] ${line}\n`) });
  (globalThis as Record<string, unknown>).__scalegateStop = servers.stop;
}
