// The embedded default behind `npm start`: Temporal dev server + Web UI, PostgreSQL, a Kafka broker
// (when Java 17 is here; embedded/kafka.ts), a Docker engine and an image registry for the agents'
// container workloads (when Docker is here; embedded/container-engine.ts), the API, the orchestrator
// worker and three agents labelled zone=a/b/c, then the URLs and tokens; with --demo
// (or SCALEGATE_DEMO=1) also the demo workloads, their load generators and a tier (embedded/demo.ts). The API,
// worker and agents are supervised: one that crashes is restarted with backoff, same id and state
// folder, and the rest keeps running. Ctrl-C or SIGTERM stops all of it, children first, leaving
// no process and no port behind.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { z } from 'zod';
import { createPool } from '../store/db';
import { newAgentDatabaseUrl } from '../store/data-plane-role';
import { migrate } from '../store/migrate';
import { checkRoleTokens } from '../http/auth';
import { BUSYBOX_HTTPD, BUSYBOX_HTTPD_SAID, BUSYBOX_WEB, BUSYBOX_WEB_V2, containersChoice, ensureBusyboxImage, startContainers, type RunningContainers } from './container-engine';
import { kafkaInstalled, kafkaUnavailable, startKafkaIfAvailable } from './kafka';
import { startEmbeddedPostgres } from './postgres';
import { portIsFree, spawnService, waitForHttp } from './processes';
import { waitUntilReady } from './readiness';
import { removeStackFile, writeStackFile } from './stack-file';
import { supervise, type Supervised } from './supervisor';
import { startTemporalDevServer, waitForTemporal } from './temporal-server';
import { installedTemporalCli } from './temporal-cli';
import { cachedWorkflowBundle } from './workflow-bundle-cache';
import { DEMO_FEEDS, DEMO_TIER, demoBoxNextFile, demoTour, installDemo } from './demo';

const port = z.coerce.number().int().min(1).max(65535);
const StartConfigSchema = z.object({
  SCALEGATE_HOME: z.string().default('.scalegate'),
  SCALEGATE_API_PORT: port.default(8080),
  /** set to use an external Temporal server instead of starting the dev server */
  TEMPORAL_ADDRESS: z.string().optional(),
  SCALEGATE_TEMPORAL_PORT: port.default(7233),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  SCALEGATE_TASK_QUEUE: z.string().min(1).default('scalegate'),
  SCALEGATE_UI_PORT: port.default(8233),
  /** set to use an external PostgreSQL instead of the embedded one */
  DATABASE_URL: z.string().optional(),
  /** what the agents connect with, for a DATABASE_URL of your own (docs/security.md); the embedded PostgreSQL needs none */
  SCALEGATE_AGENT_DATABASE_URL: z.string().optional(),
  SCALEGATE_PG_PORT: port.default(54329),
  /** the embedded PostgreSQL's durability; `off` trades crash safety for speed and is never the default */
  SCALEGATE_PG_FSYNC: z.enum(['on', 'off']).default('on'),
  /** first agent port; the three agents take this and the next two */
  SCALEGATE_AGENT_BASE_PORT: port.default(7401),
  SCALEGATE_LEASE_TTL_MS: z.coerce.number().int().min(300).default(45_000),
  /** tasks each embedded agent takes (stream subtasks share a runtime up to this) */
  SCALEGATE_AGENT_SLOTS: z.coerce.number().int().min(1).max(1024).default(8),
  /** orchestrator workers on the task queue (the control plane scaled out: the loops still run once) */
  SCALEGATE_WORKERS: z.coerce.number().int().min(1).max(16).default(1),
  /** one token per role; generated (and kept in the state folder) when unset */
  SCALEGATE_OPERATOR_TOKEN: z.string().optional(),
  SCALEGATE_AGENT_TOKEN: z.string().optional(),
  SCALEGATE_VIEWER_TOKEN: z.string().optional(),
  /** `off`: no Kafka broker (and no SCALEGATE_KAFKA_BROKERS for the processes) */
  SCALEGATE_KAFKA: z.enum(['on', 'off']).default('on'),
  SCALEGATE_KAFKA_PORT: port.default(9092),
  /** set (host:port[,host:port]) to use your own Kafka instead of starting the embedded broker */
  SCALEGATE_KAFKA_BROKERS: z.string().trim().optional().transform((brokers) => brokers || undefined),
  /** `off`: no Docker engine and no image registry (the agents then refuse container workloads) */
  SCALEGATE_CONTAINERS: z.enum(['on', 'off']).default('on'),
  /** the embedded image registry's port on 127.0.0.1 */
  SCALEGATE_REGISTRY_PORT: port.default(5000),
  /** set (unix:///path) to use your own Docker engine: the agents get it, and no engine or registry is started */
  SCALEGATE_DOCKER_HOST: z.string().trim().optional().transform((host) => host || undefined),
  DOCKER_HOST: z.string().trim().optional().transform((host) => host || undefined),
  /** `1`: define the demo (embedded/demo.ts) once the stack is up; `npm start -- --demo` sets it */
  SCALEGATE_DEMO: z.enum(['0', '1']).default('0'),
});

const say = (line: string) => console.log(`[scalegate] ${line}`);

/**
 * Tokens from env, else the ones generated on an earlier start (kept in the state folder), else
 * new. The file is mode 600 after every start, whatever it was before; tokens that are too short
 * or shared by two roles are refused.
 */
function resolveTokens(home: string, env: z.infer<typeof StartConfigSchema>) {
  const file = path.join(home, 'tokens.json');
  let stored: Record<string, string> = {};
  try {
    stored = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    // first start
  }
  const make = () => crypto.randomBytes(24).toString('base64url');
  const tokens = {
    operator: env.SCALEGATE_OPERATOR_TOKEN ?? stored.operator ?? make(),
    agent: env.SCALEGATE_AGENT_TOKEN ?? stored.agent ?? make(),
    viewer: env.SCALEGATE_VIEWER_TOKEN ?? stored.viewer ?? make(),
  };
  checkRoleTokens(tokens);
  fs.writeFileSync(file, JSON.stringify(tokens, null, 2), { mode: 0o600 });
  fs.chmodSync(file, 0o600); // writeFileSync keeps the mode of a file that already existed
  return tokens;
}

/** Replaced by startEmbeddedStack() once there is something to stop. */
let shutdown = async (_reason: string, code: number): Promise<void> => process.exit(code);

export async function startEmbeddedStack(argv: readonly string[] = []): Promise<void> {
  const config = StartConfigSchema.parse(process.env);
  const demo = argv.includes('--demo') || config.SCALEGATE_DEMO === '1';
  const home = path.resolve(config.SCALEGATE_HOME);
  const logs = path.join(home, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const tokens = resolveTokens(home, config);
  const stops: (() => Promise<void>)[] = [];
  /** servers still starting (in parallel with the others): a stop waits for them, then stops them too */
  const starting: Promise<unknown>[] = [];
  const services: Supervised[] = [];
  let stopping = false;

  shutdown = async (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    say(`stopping (${reason})`);
    removeStackFile(home); // the CLI stops pointing at a stack that is going away
    // agents first (they drain their tasks), then worker and API, then the servers
    for (const group of [services.filter((s) => s.name.startsWith('agent')), services.filter((s) => !s.name.startsWith('agent'))]) {
      await Promise.all(group.map((s) => s.stop()));
    }
    await Promise.allSettled(starting);
    for (const stop of stops.reverse()) await stop().catch(() => {});
    say('stopped');
    process.exit(code);
  };
  // Kafka: off when asked, yours when SCALEGATE_KAFKA_BROKERS names it, else the embedded broker if Java 17 is here.
  const kafkaOff = config.SCALEGATE_KAFKA === 'off' ? 'SCALEGATE_KAFKA=off' : config.SCALEGATE_KAFKA_BROKERS ? null : kafkaUnavailable();
  const embeddedKafka = !kafkaOff && !config.SCALEGATE_KAFKA_BROKERS;
  const busy = [];
  for (const p of [config.SCALEGATE_API_PORT, config.SCALEGATE_AGENT_BASE_PORT, config.SCALEGATE_AGENT_BASE_PORT + 1, config.SCALEGATE_AGENT_BASE_PORT + 2, ...(embeddedKafka ? [config.SCALEGATE_KAFKA_PORT] : [])]) {
    if (!(await portIsFree(p))) busy.push(p);
  }
  if (busy.length) throw new Error(`ports already in use: ${busy.join(', ')} (is another scalegate running?)`);

  // The broker starts beside Temporal and PostgreSQL (a JVM takes a few seconds; the first start also fetches its jars).
  const kafkaStart: Promise<{ brokers?: string; off?: string }> = embeddedKafka
    ? startKafkaIfAvailable({ port: config.SCALEGATE_KAFKA_PORT, dataDir: path.join(home, 'kafka'), logFile: path.join(logs, 'kafka.log'), log: say })
      .then(({ kafka, off }) => {
        if (!kafka) return { off };
        stops.push(kafka.stop);
        return { brokers: kafka.brokers };
      })
    : Promise.resolve(kafkaOff ? { off: kafkaOff } : { brokers: config.SCALEGATE_KAFKA_BROKERS });
  let kafkaSettled = false;
  // awaited below, or by a stop if Temporal or PostgreSQL fail first
  kafkaStart.then(() => { kafkaSettled = true; }, () => { kafkaSettled = true; });
  starting.push(kafkaStart);

  // Containers: off when asked, yours when DOCKER_HOST names an engine, else an engine and a registry
  // of the stack's own (in <home>/containers), started beside Temporal and PostgreSQL.
  const containersStart = startContainersIfAvailable(containersChoice(config), { dir: path.join(home, 'containers'), registryPort: config.SCALEGATE_REGISTRY_PORT, log: say }).then((started) => {
    if (started.running) stops.push(started.running.stop);
    return started;
  });
  starting.push(containersStart);
  // The busybox image, pushed to the registry unless it holds it already (awaited before the banner).
  const imageReady: Promise<{ tagged: string; pinned: string; next?: string } | { error: string } | null> = containersStart.then(async ({ running }) => {
    if (!running) return null;
    const { engine, registry } = running;
    const ensure = async (image: typeof BUSYBOX_WEB | typeof BUSYBOX_WEB_V2) => {
      const { pinned, built } = await ensureBusyboxImage({ engine, registry, ...image, workDir: path.join(home, 'containers') });
      const tagged = `${registry.address}/${image.repository}:${image.tag}`;
      say(built ? `image ${tagged} built and pushed (${pinned})` : `image ${tagged} is in the registry already (${pinned})`);
      return { tagged, pinned };
    };
    const { tagged, pinned } = await ensure(BUSYBOX_WEB);
    // the demo's next version of demo-box, which its tour rolls out
    return { tagged, pinned, ...(demo ? { next: (await ensure(BUSYBOX_WEB_V2)).tagged } : {}) };
  }).catch((error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }));
  starting.push(imageReady);
  // The workflows, bundled once for every worker beside the servers' start, and kept for the next
  // start of the same source (embedded/workflow-bundle-cache.ts); SCALEGATE_WORKFLOW_BUNDLE names one of yours.
  const workflowBundle = process.env.SCALEGATE_WORKFLOW_BUNDLE ? Promise.resolve(process.env.SCALEGATE_WORKFLOW_BUNDLE) : cachedWorkflowBundle({ log: say });
  // Handled here, thrown where it is awaited: a bundle that fails while the servers still start
  // must end the start through its stop (the servers stopped), not as an unhandled rejection that
  // exits with Temporal and PostgreSQL left running.
  workflowBundle.catch(() => {});
  starting.push(workflowBundle);

  let temporalAddress = config.TEMPORAL_ADDRESS;
  let uiUrl = `http://127.0.0.1:${config.SCALEGATE_UI_PORT}`;
  if (temporalAddress) {
    await waitForTemporal(temporalAddress, () => true, 30_000);
    say(`using Temporal at ${temporalAddress}`);
  } else {
    const temporal = await startTemporalDevServer({
      port: config.SCALEGATE_TEMPORAL_PORT,
      uiPort: config.SCALEGATE_UI_PORT,
      dbFile: path.join(home, 'temporal.db'),
      logFile: path.join(logs, 'temporal.log'),
      log: say,
    });
    stops.push(temporal.stop);
    temporalAddress = temporal.address;
    uiUrl = temporal.uiUrl ?? uiUrl;
  }

  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const postgres = await startEmbeddedPostgres({ dataDir: path.join(home, 'postgres'), port: config.SCALEGATE_PG_PORT, fsync: config.SCALEGATE_PG_FSYNC === 'on', log: say });
    stops.push(postgres.stop);
    databaseUrl = postgres.url;
  }
  const pool = createPool(databaseUrl, { max: 2 });
  await migrate(pool);
  // The agents connect as the data-plane role (protocol/data-plane.ts): the embedded PostgreSQL is
  // this stack's own, so its role gets a password new at every start; on a server of your own,
  // a role's password is yours to set (SCALEGATE_AGENT_DATABASE_URL).
  const controlPlaneRole = (why: string) => say(`warning: the agents connect with the control plane's database role: ${why} (docs/security.md)`);
  let agentDatabaseUrl = config.SCALEGATE_AGENT_DATABASE_URL ?? databaseUrl;
  if (!config.DATABASE_URL) agentDatabaseUrl = await newAgentDatabaseUrl(pool, databaseUrl, controlPlaneRole);
  else if (!config.SCALEGATE_AGENT_DATABASE_URL) controlPlaneRole('DATABASE_URL is set and SCALEGATE_AGENT_DATABASE_URL is not');
  await pool.end();
  // The processes learn the broker's address at spawn. The embedded broker's is known before it
  // answers (they treat a broker not up yet as an outage), unless its jars are still being fetched:
  // that may fail and leave Kafka off, so then they wait for it.
  const kafkaBrokers = embeddedKafka && kafkaInstalled() ? `127.0.0.1:${config.SCALEGATE_KAFKA_PORT}` : (await kafkaStart).brokers;

  const apiUrl = `http://127.0.0.1:${config.SCALEGATE_API_PORT}`;
  const common: NodeJS.ProcessEnv = {
    ...process.env,
    SCALEGATE_HOME: home,
    TEMPORAL_ADDRESS: temporalAddress,
    SCALEGATE_UI_URL: uiUrl,
    SCALEGATE_API_PORT: String(config.SCALEGATE_API_PORT),
    SCALEGATE_API_URL: apiUrl,
    SCALEGATE_LEASE_TTL_MS: String(config.SCALEGATE_LEASE_TTL_MS),
    SCALEGATE_KAFKA_BROKERS: kafkaBrokers,
  };
  if (!kafkaBrokers) delete common.SCALEGATE_KAFKA_BROKERS;
  // Least privilege: each process gets only the secrets it uses. The API checks every role's
  // token; the worker needs none (it calls agents with their own credentials); an agent holds only
  // the registration token, and the data-plane role's database URL for its drivers.
  for (const name of ['SCALEGATE_OPERATOR_TOKEN', 'SCALEGATE_AGENT_TOKEN', 'SCALEGATE_VIEWER_TOKEN', 'DATABASE_URL']) delete common[name];
  const envOf: Record<'api' | 'worker' | 'agent' | 'loadgen', NodeJS.ProcessEnv> = {
    loadgen: { ...common, DATABASE_URL: databaseUrl },
    api: { ...common, DATABASE_URL: databaseUrl, SCALEGATE_OPERATOR_TOKEN: tokens.operator, SCALEGATE_AGENT_TOKEN: tokens.agent, SCALEGATE_VIEWER_TOKEN: tokens.viewer },
    worker: { ...common, DATABASE_URL: databaseUrl, SCALEGATE_WORKFLOW_BUNDLE: await workflowBundle },
    agent: { ...common, DATABASE_URL: agentDatabaseUrl, SCALEGATE_AGENT_TOKEN: tokens.agent },
  };
  const output = (name: string, line: string) => console.log(`[${name}] ${line}`);
  const launch = (name: string, entry: string, args: string[] = []) => {
    const env = envOf[name === 'api' ? 'api' : name.startsWith('worker') ? 'worker' : name.startsWith('loadgen') ? 'loadgen' : 'agent'];
    const service = supervise({
      name, log: say,
      start: () => spawnService({ name, entry, args, env, output, logFile: path.join(logs, `${name}.log`) }),
    });
    services.push(service);
    return service;
  };

  launch('api', 'api/main.ts');
  const workers = Array.from({ length: config.SCALEGATE_WORKERS }, (_, i) => launch(config.SCALEGATE_WORKERS > 1 ? `worker-${i + 1}` : 'worker', 'workers/main.ts'));
  await waitForHttp(`${apiUrl}/healthz`, 60_000);
  // The agents learn the engine at spawn: they wait for it (it usually answered long before).
  const containers = await containersStart;
  delete envOf.agent.DOCKER_HOST;
  if (containers.dockerHost) envOf.agent.SCALEGATE_DOCKER_HOST = containers.dockerHost;
  else delete envOf.agent.SCALEGATE_DOCKER_HOST;
  const agents = ['a', 'b', 'c'].map((zone, i) => ({ id: `agent-${zone}`, zone, port: config.SCALEGATE_AGENT_BASE_PORT + i }));
  for (const { id, zone, port: agentPort } of agents) {
    // 8 slots each: room for the demo's stream job to hold its old and new subtasks during a hot rescale.
    launch(id, 'agent/main.ts', ['--id', id, '--port', String(agentPort), '--labels', `zone=${zone}`, '--slots', String(config.SCALEGATE_AGENT_SLOTS),
      '--state-dir', path.join(home, 'agents', id), '--api', apiUrl]);
  }
  // Ready means the API answers, the worker polls its task queue and every agent is READY.
  const temporal = await Connection.connect({ address: temporalAddress });
  try {
    await waitUntilReady({
      apiUrl, viewerToken: tokens.viewer, temporal, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.SCALEGATE_TASK_QUEUE,
      workerPids: () => workers.map((w) => w.current().child.pid), agents: agents.map((a) => ({ id: a.id, url: `http://127.0.0.1:${a.port}` })),
    }, { timeoutMs: 180_000, log: say });
  } finally {
    await temporal.close();
  }
  // Ready includes the broker answering a metadata request (a broker that failed stops the start).
  if (!kafkaSettled) say(`waiting for the Kafka broker (${kafkaBrokers})`);
  const { brokers: kafkaAnswers, off: kafkaOffReason } = await kafkaStart;
  const kafkaLine = kafkaAnswers
    ? `${kafkaAnswers}${embeddedKafka ? `   (broker data in ${path.join(home, 'kafka')})` : '   (yours: SCALEGATE_KAFKA_BROKERS; none started)'}`
    : `off (${kafkaOffReason})`;
  const image = await imageReady;
  const containerLines = bannerContainerLines(containers, image, { apiUrl, operatorToken: tokens.operator });
  let tour: string[] = [];
  if (demo) {
    const boxes = image && !('error' in image) && image.next ? { image: image.tagged, nextImage: image.next, nextFile: demoBoxNextFile(home) } : undefined;
    const defined = await installDemo(apiUrl, tokens.operator, boxes);
    for (const feed of DEMO_FEEDS) {
      launch(feed.name, 'scripts/loadgen.ts', ['--source', feed.source, '--partitions', String(feed.partitions), '--rate', String(feed.ratePerSec)]);
    }
    say(`demo defined: ${defined.join(', ')}, tier ${DEMO_TIER}; fed by ${DEMO_FEEDS.map((f) => f.name).join(', ')}`);
    tour = ['', ...demoTour(apiUrl, boxes ?? { off: containers.off ?? (image && 'error' in image ? `no image: ${image.error}` : 'the engine is yours (DOCKER_HOST): no registry of the stack\'s own to build the demo\'s images in') })];
  }

  // What `npx scalegate` reads to reach this stack (the API, and Temporal for `scalegate temporal ...`).
  writeStackFile(home, { apiUrl, uiUrl, temporalAddress, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.SCALEGATE_TASK_QUEUE, kafkaBrokers: kafkaBrokers ?? null });
  console.log(
    [
      '',
      'scalegate is running',
      `  API            ${apiUrl}   (OpenAPI: ${apiUrl}/openapi.json)`,
      `  Temporal       ${temporalAddress}   (namespace ${config.TEMPORAL_NAMESPACE}, task queue ${config.SCALEGATE_TASK_QUEUE})`,
      `  Web UI         ${uiUrl}`,
      ...temporalCliLines(temporalAddress, config.TEMPORAL_NAMESPACE),
      `  PostgreSQL     ${databaseUrl}`,
      `  kafka: ${kafkaLine}`,
      ...containerLines.status,
      `  agents         agent-a/b/c on 127.0.0.1:${config.SCALEGATE_AGENT_BASE_PORT}-${config.SCALEGATE_AGENT_BASE_PORT + 2} (zone=a/b/c, ${config.SCALEGATE_AGENT_SLOTS} slots each)`,
      `  tokens         operator=${tokens.operator}`,
      `                 viewer=${tokens.viewer}`,
      `                 agent=${tokens.agent}`,
      `  state          ${home} (logs in ${logs}; tokens in ${path.join(home, 'tokens.json')})`,
      '',
      // the README's commands read these (its curl lines and the CLI: $SCALEGATE_API_URL; loadgen: $PG)
      `  shell          ${shellExports({ apiUrl, home, databaseUrl })}`,
      `  try: curl -s -H "Authorization: Bearer ${tokens.viewer}" ${apiUrl}/v1/state`,
      ...containerLines.tryIt,
      ...tour,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  say(`ready: the API, ${config.SCALEGATE_WORKERS > 1 ? `${config.SCALEGATE_WORKERS} workers` : 'the worker'} (polling task queue ${config.SCALEGATE_TASK_QUEUE}) and ${agents.map((a) => a.id).join(', ')} (READY)`);
}

interface ContainersStarted {
  /** what the agents get as SCALEGATE_DOCKER_HOST; undefined when containers are off */
  dockerHost?: string;
  /** the engine and registry this stack started */
  running?: RunningContainers;
  /** why containers are off */
  off?: string;
}

/**
 * The choice carried out: off, the user's engine (nothing started), or an engine and a registry of
 * our own. A registry port in use, or an engine that fails to start, turns containers off with the
 * reason: everything else still starts.
 */
async function startContainersIfAvailable(
  choice: ReturnType<typeof containersChoice>, options: { dir: string; registryPort: number; log: (line: string) => void },
): Promise<ContainersStarted> {
  if ('off' in choice) return { off: choice.off };
  if ('yours' in choice) return { dockerHost: choice.yours };
  if (!(await portIsFree(options.registryPort))) return { off: `port ${options.registryPort} is in use (SCALEGATE_REGISTRY_PORT moves the image registry)` };
  try {
    // Its own process group: a Ctrl-C reaches the stack, whose stop removes the containers and the
    // workload network before it stops the engine (stops below).
    const running = await startContainers({ dir: options.dir, registryPort: options.registryPort, ownProcessGroup: true, log: options.log });
    return { dockerHost: running.engine.address, running };
  } catch (error) {
    return { off: `the Docker engine or registry did not start: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** The banner's containers line (engine and registry, or why they are off) and how to run a container service. */
function bannerContainerLines(
  containers: ContainersStarted, image: { tagged: string; pinned: string } | { error: string } | null, api: { apiUrl: string; operatorToken: string },
): { status: string[]; tryIt: string[] } {
  if (containers.off) return { status: [`  containers: off (${containers.off})`], tryIt: [] };
  if (!containers.running) return { status: [`  containers: engine ${containers.dockerHost}   (yours: DOCKER_HOST; no engine or registry started)`], tryIt: [] };
  const { engine, registry } = containers.running;
  const status = [`  containers: engine ${engine.address}   registry ${registry.address}   (data in ${path.dirname(path.dirname(engine.socketPath))})`];
  if (!image || 'error' in image) return { status: [...status, `  image          not built: ${image?.error ?? 'no registry'}`], tryIt: [] };
  const body = JSON.stringify({
    kind: 'service', replicas: 1,
    contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
    spec: { image: image.tagged, command: BUSYBOX_HTTPD, readiness: { http: '/index.html' }, limits: { cpus: 0.25, memoryMiB: 32 } },
  });
  return {
    status: [...status, `  image          ${image.tagged}   (busybox; \`${BUSYBOX_HTTPD_SAID}\` serves /index.html; pinned: ${image.pinned})`],
    tryIt: [
      `  a container service: curl -s -X PUT -H "Authorization: Bearer ${api.operatorToken}" -H 'content-type: application/json' ${api.apiUrl}/v1/workloads/web \\`,
      `                         -d '${body}'`,
    ],
  };
}

/**
 * The banner's `export` line: what the README's commands read, with this stack's ports (the
 * defaults 8080 and 54329 only when no SCALEGATE_API_PORT / SCALEGATE_PG_PORT moved them). `PG` is
 * no setting of scalegate's (DATABASE_URL would make the next npm start use it as your own server).
 */
export function shellExports(stack: { apiUrl: string; home: string; databaseUrl: string }): string {
  return `export SCALEGATE_API_URL=${stack.apiUrl} SCALEGATE_HOME=${stack.home} PG='${stack.databaseUrl}'`;
}

/**
 * How to reach the Temporal CLI from a shell: through the scalegate CLI, or on PATH with this
 * stack's address (a plain `temporal` dials 127.0.0.1:7233, namespace default). TEMPORAL_ADDRESS
 * goes on the command, not into an export: exported, the next npm start would take it for a
 * Temporal server of your own.
 */
export function temporalCliLines(address: string, namespace: string, cli = installedTemporalCli()): string[] {
  if (!cli) return [];
  const lines = ['  temporal CLI   npx scalegate temporal workflow list   (this stack\'s Temporal; any temporal command works)'];
  const target = `TEMPORAL_ADDRESS=${address}${namespace === 'default' ? '' : ` TEMPORAL_NAMESPACE=${namespace}`}`;
  if (cli.source !== 'PATH') lines.push(`                 or put it on PATH: export PATH="${path.dirname(cli.path)}:$PATH"`);
  lines.push(`                 plain temporal: ${target} temporal workflow list`);
  return lines;
}

/** Runs the embedded stack until SIGINT/SIGTERM; a failed start stops whatever did start. */
export function runEmbeddedStack(): void {
  // `on`, not `once`: a second Ctrl-C (or SIGTERM) while the agents drain must not take the default
  // action and kill this process halfway, leaving Temporal, PostgreSQL, Kafka and the agents behind
  // with nobody to stop them. Under npm start a Ctrl-C arrives twice: the group's and npm's forward.
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signals++ > 0) say(`${signal} again: still stopping (the agents drain their tasks first); nothing is left behind`);
    void shutdown(signal, 0);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  startEmbeddedStack(process.argv.slice(2)).catch((error) => {
    console.error(`[scalegate] failed to start: ${error instanceof Error ? error.message : String(error)}`);
    void shutdown('start failed', 1);
  });
}
