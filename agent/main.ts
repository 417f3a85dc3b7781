// Runtime agent entry point: one process per node. Serves the task API, registers, heartbeats.
import fs from 'node:fs';
import path from 'node:path';
import { parseAgentConfig } from './config';
import { buildDrivers } from './drivers';
import { TaskHost } from './host';
import { LeaseKeeper } from './lease';
import { buildAgentServer } from './server';

async function main() {
  const config = parseAgentConfig();
  fs.mkdirSync(config.stateDir, { recursive: true });
  const log = (event: string, fields: Record<string, unknown> = {}) =>
    console.log(JSON.stringify({ at: new Date().toISOString(), runtime: config.id, event, ...fields }));

  const host = new TaskHost(buildDrivers(config, log), path.join(config.stateDir, 'tasks.json'));
  const endpoint = config.endpoint ?? `http://${config.host}:${config.port}`;
  const lease = new LeaseKeeper(config, endpoint, {
    reports: () => host.list(),
    revoke: async (taskIds, reason) => {
      if (taskIds.length) log('revoking tasks', { taskIds, reason });
      await host.revoke(taskIds);
    },
    log,
  });
  const server = buildAgentServer({ id: config.id, token: config.token, host, fence: () => lease.currentFence, labels: config.labels });
  await server.listen({ host: config.host, port: config.port });
  log('listening', { endpoint, labels: config.labels, stateDir: config.stateDir });
  await lease.start();
  await host.restore(log);

  const shutdown = async (signal: string) => {
    log('stopping', { signal });
    lease.stop();
    await server.close();
    await host.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error) => {
  console.error(`scalegate agent failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
