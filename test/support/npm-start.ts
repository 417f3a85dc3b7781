// `npm start` as a user runs it (npm, package.json's script, scripts/start.ts → embedded/stack.ts), against the shared test
// Temporal server, PostgreSQL, Kafka broker and Docker engine (TEMPORAL_ADDRESS, DATABASE_URL,
// SCALEGATE_KAFKA_BROKERS and DOCKER_HOST set, as a user with their own servers would;
// SCALEGATE_KAFKA=off / SCALEGATE_CONTAINERS=off when the run has none), on ports and a task queue
// of its own; its workers load the workflow bundle npm start keeps for this source tree (the run's
// shared servers bundled it: embedded/workflow-bundle-cache.ts).
import { Client, Connection } from '@temporalio/client';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { freePort, spawnService, type ServiceProcess } from '../../embedded/processes';
import { withPool } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createTestDatabase, testAgentDatabaseUrl } from '../../harness/database';
import { testEnv } from '../../harness/env';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { GiveUp, waitFor } from '../../harness/wait-for';

export const EMBEDDED_AGENTS = ['agent-a', 'agent-b', 'agent-c'];

export interface NpmStart {
  process: ServiceProcess;
  /** every line it printed so far */
  lines: string[];
  home: string;
  apiUrl: string;
  apiPort: number;
  agentPorts: number[];
  taskQueue: string;
  tokens: { operator: string; agent: string; viewer: string };
  /** resolves when "[scalegate] ready" was printed (rejects if it exits first) */
  ready: Promise<void>;
  /** SIGTERM; answers the exit code */
  stop(): Promise<number | null>;
  /** stop, then terminate the loops its worker left on the shared server, free the ports */
  cleanUp(): Promise<void>;
}

export async function startNpmStart(options: {
  name: string;
  env?: Record<string, string>;
  onLine?: (line: string) => void;
}): Promise<NpmStart> {
  const env = testEnv();
  const { databaseUrl } = await createTestDatabase(options.name);
  // the agents connect as the data-plane role, as a deployment on its own server has them do
  const agentDatabaseUrl = await withPool(databaseUrl, 1, async (db) => {
    await migrate(db);
    return testAgentDatabaseUrl(db, databaseUrl);
  });
  const home = fs.mkdtempSync(path.join(env.tmpDir, `${options.name}-`));
  const apiPort = await freePort();
  const ports: PortRange = await reservePortRange(3);
  const taskQueue = `scalegate-${options.name}-${crypto.randomBytes(4).toString('hex')}`;
  const tokens = {
    operator: `op-${crypto.randomBytes(16).toString('hex')}`, agent: `ag-${crypto.randomBytes(16).toString('hex')}`, viewer: `vw-${crypto.randomBytes(16).toString('hex')}`,
  };
  const lines: string[] = [];
  let sawReady = false;
  const child = spawnService({
    // npm in a process group of its own, as from a terminal: process.kill(-pid) signals npm, the
    // stack and every child it did not move out, as a Ctrl-C does
    name: options.name, entry: 'scripts/start.ts', npmScript: 'start', processGroup: true,
    env: {
      PATH: process.env.PATH, HOME: process.env.HOME,
      // where Java and the cached Kafka jars are, for a start that runs a broker of its own
      ...Object.fromEntries(['JAVA_HOME', 'SCALEGATE_CACHE_DIR', 'XDG_CACHE_HOME'].filter((name) => process.env[name]).map((name) => [name, process.env[name]])),
      ...(env.kafkaBrokers ? { SCALEGATE_KAFKA_BROKERS: env.kafkaBrokers } : { SCALEGATE_KAFKA: 'off' }),
      ...(env.containers ? { DOCKER_HOST: env.containers.dockerHost } : { SCALEGATE_CONTAINERS: 'off' }),
      SCALEGATE_HOME: home, TEMPORAL_ADDRESS: env.temporalAddress, DATABASE_URL: databaseUrl, SCALEGATE_AGENT_DATABASE_URL: agentDatabaseUrl, SCALEGATE_TASK_QUEUE: taskQueue,
      SCALEGATE_API_PORT: String(apiPort), SCALEGATE_AGENT_BASE_PORT: String(ports.start), SCALEGATE_LEASE_TTL_MS: '3000',
      SCALEGATE_OPERATOR_TOKEN: tokens.operator, SCALEGATE_AGENT_TOKEN: tokens.agent, SCALEGATE_VIEWER_TOKEN: tokens.viewer, SCALEGATE_LOG_LEVEL: 'warn',
      ...options.env,
    },
    output: (_, line) => {
      lines.push(line);
      if (line.startsWith('[scalegate] ready')) sawReady = true;
      options.onLine?.(line);
    },
  });
  const ready = waitFor('"ready" from npm start', async () => {
    if (child.child.exitCode !== null) throw new GiveUp(`npm start exited with ${child.child.exitCode}:\n${lines.slice(-30).join('\n')}`);
    return sawReady;
  }, { timeoutMs: 200_000, intervalMs: 100, context: () => lines.slice(-30).join('\n') }).then(() => undefined);
  let stopped: Promise<number | null> | null = null;
  const stop = () => {
    stopped ??= (async () => {
      if (child.child.exitCode !== null) return child.child.exitCode;
      child.kill('SIGTERM');
      return child.exited;
    })();
    return stopped;
  };
  return {
    process: child, lines, home, apiUrl: `http://127.0.0.1:${apiPort}`, apiPort, agentPorts: [0, 1, 2].map((i) => ports.start + i), taskQueue, tokens, ready, stop,
    async cleanUp() {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stop(), new Promise((resolve) => { timer = setTimeout(resolve, 20_000); })]);
      clearTimeout(timer);
      // npm's own SIGKILL would leave the stack behind it running: the whole group's, as a last resort
      if (child.child.exitCode === null) {
        try {
          process.kill(-child.child.pid!, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
        await child.exited;
      }
      const connection = await Connection.connect({ address: env.temporalAddress });
      const client = new Client({ connection });
      // the loops the worker started on its task queue outlive it on the shared server
      for (const id of [`reconcile:${taskQueue}`, `lease-sweeper:${taskQueue}`]) await client.workflow.getHandle(id).terminate('test over').catch(() => {});
      await connection.close();
      ports.release();
    },
  };
}
