// A scalegate stack for one test file: its own database on the shared PostgreSQL, its own task
// queue on the shared Temporal server, and real API, worker and agent processes.
import { Client, Connection } from '@temporalio/client';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Pool } from 'pg';
import { createPool } from '../store/db';
import { migrate } from '../store/migrate';
import { ServiceProcess, spawnService, waitForHttp } from '../embedded/processes';
import { startBalancer, type Balancer } from './balancer';
import { createTestDatabase, testAgentDatabaseUrl } from './database';
import { testEnv } from './env';
import { PORT_BLOCK_SIZE, reservePortRange, type PortRange } from './ports';
import { GiveUp, waitFor as pollUntil, type WaitForOptions } from './wait-for';

export interface AgentSpec {
  id: string;
  labels?: Record<string, string>;
  slots?: number;
  /** extra environment for this agent only (e.g. a DATABASE_URL it cannot reach) */
  env?: NodeJS.ProcessEnv;
  /** the control plane this agent registers with (default: the stack's API) */
  apiUrl?: string;
  /** false: return once its HTTP server answers, without waiting for it to register (default true) */
  waitReady?: boolean;
  /** the node's address: the agent binds (and advertises) it (default 127.0.0.1; harness/hosts.ts gives each node its own) */
  bind?: string;
  /** a command that execs the agent (e.g. `ip netns exec <ns>`: inside its host's network namespace) */
  wrap?: readonly string[];
}

export interface RunningAgent {
  id: string;
  port: number;
  url: string;
  stateDir: string;
  process: ServiceProcess;
}

export type Role = 'operator' | 'agent' | 'viewer';

export interface Stack {
  apiUrl: string;
  /** the state folder every process of the stack has as SCALEGATE_HOME */
  home: string;
  databaseUrl: string;
  /** what the stack's agents connect with: the data-plane role (protocol/data-plane.ts), not databaseUrl's */
  agentDatabaseUrl: string;
  db: Pool;
  taskQueue: string;
  tokens: Record<Role, string>;
  temporal: Client;
  agents: Record<string, RunningAgent>;
  /** the last worker started (workers: every one) */
  worker: ServiceProcess | null;
  workers: ServiceProcess[];
  /** the API processes (more than one: behind `balancer`, whose URL is apiUrl) */
  apis: ServiceProcess[];
  balancer: Balancer | null;
  logs: string[];
  /** An authenticated JSON call to the API: with a role's token, or with `token` (any bearer, e.g. a runtime's credential). */
  api(method: string, urlPath: string, options?: { body?: unknown; role?: Role | null; rawBody?: string; token?: string }): Promise<{ status: number; body: any }>;
  /**
   * A call to an agent's own API, presenting what the control plane presents: that runtime's
   * credential (read from the database at each call). `options.token` presents any other bearer
   * instead (null: none).
   */
  agentApi(id: string, method: string, urlPath: string, body?: unknown, options?: { token?: string | null }): Promise<{ status: number; body: any }>;
  /** The credential the control plane holds for runtime `id` (what it presents to that agent). */
  credentialOf(id: string): Promise<string>;
  /** Every registered runtime's current credential, by runtime id. */
  runtimeCredentials(): Promise<Record<string, string>>;
  /** Every process this stack started (API, worker, agents, including stopped ones). */
  processes(): ServiceProcess[];
  startAgent(spec: AgentSpec): Promise<RunningAgent>;
  startWorker(): Promise<ServiceProcess>;
  /** (Re)starts API process `index` on its own port (after a kill), and waits for it to answer. */
  startApi(index: number): Promise<ServiceProcess>;
  /** harness/wait-for.ts with a 60 s default and, on a timeout, the last lines of the processes' logs */
  waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, options?: WaitForOptions | number): Promise<T>;
  stop(): Promise<void>;
}

/** `url` (a PostgreSQL URL) with its host:port replaced by `address`. */
function withAddress(url: string, address: string): string {
  const parsed = new URL(url);
  parsed.host = address;
  return parsed.toString();
}

export async function startStack(options: {
  agents?: AgentSpec[]; leaseTtlMs?: number; worker?: boolean; env?: NodeJS.ProcessEnv;
  /** a PostgreSQL of the file's own (one it freezes) instead of the shared one */
  postgresAdminUrl?: string;
  /** a Temporal server of the file's own (one it pauses) instead of the shared one */
  temporalAddress?: string;
  /** API processes behind a load balancer (default 1, no balancer) */
  apis?: number;
  /** worker processes (default 1; 0 is `worker: false`) */
  workers?: number;
  /** where the API listens and is reached (default 127.0.0.1; a multi-host stack gives its bridge's address) */
  apiHost?: string;
  /** "host:port" at which the agents reach PostgreSQL instead of the server's own (a relay on a multi-host stack's bridge) */
  agentDatabaseAddress?: string;
  /**
   * "host:port" at which the API and workers reach PostgreSQL and Temporal instead of the servers'
   * own (relays a chaos run blackholes: the control plane cut from a store while the nodes run on)
   */
  controlPlaneRoutes?: { postgres?: string; temporal?: string };
} = {}): Promise<Stack> {
  const env = { ...testEnv(), ...(options.temporalAddress ? { temporalAddress: options.temporalAddress } : {}) };
  const { name, databaseUrl } = await createTestDatabase('t', options.postgresAdminUrl);
  const db = createPool(databaseUrl, { max: 5 });
  await migrate(db);
  const directAgentDatabaseUrl = await testAgentDatabaseUrl(db, databaseUrl);
  const agentDatabaseUrl = options.agentDatabaseAddress ? withAddress(directAgentDatabaseUrl, options.agentDatabaseAddress) : directAgentDatabaseUrl;
  const apiHost = options.apiHost ?? '127.0.0.1';

  const home = fs.mkdtempSync(path.join(env.tmpDir, 'stack-'));
  const tokens: Record<Role, string> = {
    operator: `op-${crypto.randomBytes(12).toString('hex')}`,
    agent: `ag-${crypto.randomBytes(12).toString('hex')}`,
    viewer: `vw-${crypto.randomBytes(12).toString('hex')}`,
  };
  // The APIs listen in a reserved port block: a port picked free (bound to 0, then closed) can be
  // taken by another test file's process before the API binds it, and that one's /healthz would
  // pass for ours (an API failing EADDRINUSE, its agents registering elsewhere).
  const apiRange = await reservePortRange(Math.max(1, options.apis ?? 1));
  const apiPorts = Array.from({ length: Math.max(1, options.apis ?? 1) }, (_, i) => apiRange.start + i);
  // More than one API: a load balancer in front, as a deployment has; everyone talks to it.
  const balancer = apiPorts.length > 1 ? await startBalancer(apiPorts.map((port) => `http://${apiHost}:${port}`), { host: apiHost }) : null;
  const apiPort = apiPorts[0];
  const apiUrl = balancer?.url ?? `http://${apiHost}:${apiPort}`;
  const taskQueue = `scalegate-${name}`;
  const logs: string[] = [];
  const output = (service: string, line: string) => {
    logs.push(`[${service}] ${line}`);
    if (logs.length > 5000) logs.shift();
    if (process.env.SCALEGATE_TEST_VERBOSE) console.log(`[${service}] ${line}`);
  };
  const childEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    SCALEGATE_HOME: home,
    DATABASE_URL: options.controlPlaneRoutes?.postgres ? withAddress(databaseUrl, options.controlPlaneRoutes.postgres) : databaseUrl,
    TEMPORAL_ADDRESS: options.controlPlaneRoutes?.temporal ?? env.temporalAddress,
    SCALEGATE_TASK_QUEUE: taskQueue,
    SCALEGATE_API_PORT: String(apiPort),
    SCALEGATE_API_HOST: apiHost,
    SCALEGATE_API_URL: apiUrl,
    SCALEGATE_LEASE_TTL_MS: String(options.leaseTtlMs ?? 3000),
    SCALEGATE_WORKFLOW_BUNDLE: env.workflowBundlePath,
    SCALEGATE_LOG_LEVEL: 'warn',
    SCALEGATE_RECONCILE_INTERVAL_MS: '500',
    // the shared broker, for workloads that read a Kafka topic (control plane and agents alike)
    ...(env.kafkaBrokers ? { SCALEGATE_KAFKA_BROKERS: env.kafkaBrokers } : {}),
    // the shared Docker engine, for container workloads
    ...(env.containers ? { SCALEGATE_DOCKER_HOST: env.containers.dockerHost } : {}),
    ...options.env,
  };
  const processes: ServiceProcess[] = [];
  // Each process gets only the secrets it uses, as under npm start (embedded/stack.ts).
  const secretsOf = (service: string): NodeJS.ProcessEnv =>
    service.startsWith('api')
      ? { SCALEGATE_OPERATOR_TOKEN: tokens.operator, SCALEGATE_AGENT_TOKEN: tokens.agent, SCALEGATE_VIEWER_TOKEN: tokens.viewer }
      : service.startsWith('agent') ? { SCALEGATE_AGENT_TOKEN: tokens.agent } : {};
  const launch = (service: string, entry: string, args: string[] = [], extraEnv: NodeJS.ProcessEnv = {}, wrap?: readonly string[]) => {
    const p = spawnService({ name: service, entry, script: env.entryScripts[entry], args, env: { ...childEnv, ...secretsOf(service), ...extraEnv }, output, wrap });
    processes.push(p);
    return p;
  };

  const apis: ServiceProcess[] = [];
  const startApi = async (index: number) => {
    const api = launch(apiPorts.length > 1 ? `api-${index}` : 'api', 'api/main.ts', [], { SCALEGATE_API_PORT: String(apiPorts[index]) });
    apis[index] = api;
    await waitForHttp(`http://${apiHost}:${apiPorts[index]}/healthz`, 60_000, () => api.child.exitCode === null);
    return api;
  };
  try {
    for (let i = 0; i < apiPorts.length; i++) await startApi(i);
  } catch (error) {
    // Nothing of a stack that did not start is left running (a balancer's health checks among it).
    await Promise.all(processes.map((p) => p.stop(5000)));
    await balancer?.close();
    await db.end();
    apiRange.release();
    throw error;
  }

  const connection = await Connection.connect({ address: env.temporalAddress });
  const temporal = new Client({ connection });
  const agents: Record<string, RunningAgent> = {};

  const call = async (url: string, method: string, token: string | null, body?: unknown, rawBody?: string) => {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined || rawBody !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(url, { method, headers, body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)) });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON (e.g. /metrics)
    }
    return { status: response.status, body: parsed as any };
  };

  const credentialOf = async (id: string): Promise<string> => {
    const { rows } = await db.query<{ credential: string | null }>('select credential from runtimes where id = $1', [id]);
    if (!rows[0]?.credential) throw new Error(`runtime ${id} has no credential (not registered)`);
    return rows[0].credential;
  };

  const waitFor = async <T>(what: string, probe: () => Promise<T | null | undefined | false>, options: WaitForOptions | number = {}): Promise<T> =>
    (await pollUntil(what, probe, {
      timeoutMs: 60_000,
      intervalMs: 200,
      context: () => logs.slice(-40).join('\n'),
      ...(typeof options === 'number' ? { timeoutMs: options } : options),
    })) as T;

  /**
   * One reserved port block per agent id, kept across restarts of that id and given back on stop:
   * its first port is the agent's own, the rest its tasks'. A port bound to 0 and closed lies among
   * the ephemeral ports, where any process's outgoing connection can take it before the agent binds
   * it (hardening.test: EADDRINUSE for an agent); a reserved block lies below them.
   */
  const portRanges: Record<string, PortRange> = {};

  /** Spawns an agent; answers it and the wait for it to come up (as `spec.waitReady` says), not yet begun. */
  const launchAgent = async (spec: AgentSpec): Promise<{ agent: RunningAgent; up: () => Promise<void> }> => {
    const block = (portRanges[spec.id] ??= await reservePortRange());
    const port = block.start;
    const stateDir = path.join(home, 'agents', spec.id);
    const labels = Object.entries(spec.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
    const args = ['--id', spec.id, '--port', String(port), '--state-dir', stateDir, '--api', spec.apiUrl ?? apiUrl, '--slots', String(spec.slots ?? 4)];
    if (labels) args.push('--labels', labels);
    if (spec.bind) args.push('--bind', spec.bind);
    // Its process tasks draw ports from the rest of the block (harness/ports.ts).
    args.push('--port-range', block.slice(1, PORT_BLOCK_SIZE - 1).label);
    const agentProcess = launch(`agent:${spec.id}`, 'agent/main.ts', args, { DATABASE_URL: agentDatabaseUrl, ...spec.env }, spec.wrap);
    const agent = { id: spec.id, port, url: `http://${spec.bind ?? '127.0.0.1'}:${port}`, stateDir, process: agentProcess };
    agents[spec.id] = agent;
    const exited = () => {
      if (agentProcess.child.exitCode !== null) throw new GiveUp(`agent ${spec.id} exited\n${logs.slice(-20).join('\n')}`);
    };
    if (spec.waitReady === false) {
      return {
        agent,
        up: () => waitFor(`agent ${spec.id} answering`, async () => {
          exited();
          return (await call(`${agent.url}/v1/health`, 'GET', null).catch(() => null)) !== null;
        }).then(() => undefined),
      };
    }
    // READY under the fence this very process registered with (an earlier incarnation's row may still say READY).
    // The agent answers (503 until then) only once it registered or resumed, and only to its runtime's credential.
    return {
      agent,
      up: () => waitFor(`agent ${spec.id} READY`, async () => {
        exited();
        const { rows } = await db.query(`select status, fence, credential from runtimes where id = $1`, [spec.id]);
        if (!rows[0]?.credential) return false;
        const health = await call(`${agent.url}/v1/health`, 'GET', rows[0].credential).catch(() => null);
        if (!health || health.status !== 200 || !health.body.fence) return false;
        return rows[0].status === 'READY' && Number(rows[0].fence) === health.body.fence;
        // asked every 50 ms, not every 200 (one row and one health call): an agent is READY within
        // about a second (p50 0.78 s over a run of the suite, 119 starts), a quarter of it overshoot
      }, { intervalMs: 50 }).then(() => undefined),
    };
  };

  const stack: Stack = {
    apiUrl, home, databaseUrl, agentDatabaseUrl, db, taskQueue, tokens, temporal, agents, worker: null, workers: [], apis, balancer, logs, startApi,
    api: (method, urlPath, o = {}) =>
      call(`${apiUrl}${urlPath}`, method, o.token !== undefined ? o.token : o.role === null ? null : tokens[o.role ?? 'operator'], o.body, o.rawBody),
    agentApi: async (id, method, urlPath, body, o = {}) =>
      call(`${agents[id].url}${urlPath}`, method, o.token !== undefined ? o.token : await credentialOf(id), body),
    credentialOf,
    runtimeCredentials: async () => {
      const { rows } = await db.query<{ id: string; credential: string }>('select id, credential from runtimes where credential is not null order by id');
      return Object.fromEntries(rows.map((r) => [r.id, r.credential]));
    },
    processes: () => [...processes],
    waitFor,
    async startAgent(spec) {
      const { agent, up } = await launchAgent(spec);
      await up();
      return agent;
    },
    async startWorker() {
      const worker = launch((options.workers ?? 1) > 1 ? `worker-${stack.workers.length}` : 'worker', 'workers/main.ts');
      stack.worker = worker;
      stack.workers.push(worker);
      return worker;
    },
    async stop() {
      await temporal.workflow.getHandle(`reconcile:${taskQueue}`).terminate('test stack stopped').catch(() => {});
      // A profiled process writes its CPU profile as it exits, which can take longer than a shutdown.
      await Promise.all(processes.map((p) => p.stop(process.env.SCALEGATE_CPU_PROFILE_DIR ? 60_000 : 5000)));
      await balancer?.close();
      await connection.close();
      await db.end();
      for (const range of Object.values(portRanges)) range.release();
      apiRange.release();
    },
  };

  const workerCount = options.worker === false ? 0 : options.workers ?? 1;
  try {
    for (let i = 0; i < workerCount; i++) await stack.startWorker();
    // The stack's agents come up side by side: spawned in the order given (stack.agents lists them
    // so), then waited for together, each for its own READY (a stack of three is up about 1.5 s
    // sooner than one agent after the other). Every wait ends before a failure is thrown, so the
    // stop below finds no wait still polling.
    const launched = [];
    for (const spec of options.agents ?? []) launched.push(await launchAgent(spec));
    const failed = (await Promise.allSettled(launched.map(({ up }) => up()))).find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (error) {
    await stack.stop();
    throw error;
  }
  return stack;
}
