// Agent settings from flags (--id a --port 7401 --labels zone=a,disk=ssd ...) or env, parsed once.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { MIN_TOKEN_LENGTH } from '../http/auth';
import { LabelsSchema, RuntimeId } from '../protocol';
import { DEFAULT_ERROR_WINDOW_MS } from './drivers/error-count';
import { DEFAULT_RESTART_POLICY } from '../domain/supervision';

export const AgentConfigSchema = z.object({
  id: RuntimeId,
  /**
   * The address this node binds: its HTTP server, its tasks' ports and its stream data listeners
   * (`--bind`, SCALEGATE_AGENT_BIND; `--host`/SCALEGATE_AGENT_HOST are older names for it). A node is
   * a host (DESIGN.md §7): loopback only by default.
   */
  host: z.string().min(1).max(255).default('127.0.0.1'),
  /**
   * The address others reach this node at (`--advertise`, SCALEGATE_AGENT_ADVERTISE): its endpoint's
   * host, and where peers reach its tasks and data listeners. Default: the bind address (loopback
   * when that is a wildcard such as 0.0.0.0).
   */
  advertise: z.string().min(1).max(255).optional(),
  port: z.coerce.number().int().min(1).max(65535),
  /** the URL the control plane uses to reach this agent (default http://<advertised address>:<port>) */
  endpoint: z.string().url().optional(),
  labels: LabelsSchema,
  slots: z.coerce.number().int().min(1).default(4),
  /** state folder: the runtime's credential, recorded tasks, port pairs, fences, task scratch space */
  stateDir: z.string().min(1),
  apiUrl: z.string().url(),
  /** the shared agent token: it only registers this runtime; the runtime's own credential does the rest */
  token: z.string().min(MIN_TOKEN_LENGTH),
  /** the port range process tasks draw from; kept below Linux's ephemeral range (32768+) */
  portRangeStart: z.coerce.number().int().min(1024).default(20000),
  portRangeEnd: z.coerce.number().int().max(32767).default(29999),
  /** how long a released port pair waits before another task may be given it */
  portQuarantineMs: z.coerce.number().int().min(0).default(30_000),
  databaseUrl: z.string().optional(),
  /** the Kafka brokers Kafka sources are read from (SCALEGATE_KAFKA_BROKERS, "host:port,...") */
  kafkaBrokers: z.string().max(4096).optional(),
  /** the container engine's API socket (SCALEGATE_DOCKER_HOST, else DOCKER_HOST: unix:///path); without one, container workloads are refused here */
  dockerSocket: z.string().min(1).max(4096).optional(),
  /** how far back a task's errors count as its current error rate (the scale-out baseline gate) */
  errorWindowMs: z.coerce.number().int().min(1_000).max(86_400_000).default(DEFAULT_ERROR_WINDOW_MS),
  /** supervision of process tasks (domain/supervision.ts): the first restart's delay, doubling up to the ceiling */
  restartBackoffMs: z.coerce.number().int().min(1).max(3_600_000).default(DEFAULT_RESTART_POLICY.baseMs),
  restartBackoffMaxMs: z.coerce.number().int().min(1).max(86_400_000).default(DEFAULT_RESTART_POLICY.maxMs),
  /** a run ready this long is healthy: the backoff starts over and a crash loop ends */
  restartHealthyAfterMs: z.coerce.number().int().min(0).max(86_400_000).default(DEFAULT_RESTART_POLICY.healthyAfterMs),
  /** this many restarts within the window make a task crash-looping (not ready; its heartbeat says so) */
  crashLoopRestarts: z.coerce.number().int().min(1).max(1_000).default(DEFAULT_RESTART_POLICY.crashLoopRestarts),
  crashLoopWindowMs: z.coerce.number().int().min(1_000).max(86_400_000).default(DEFAULT_RESTART_POLICY.crashLoopWindowMs),
  /**
   * A deliberately broken build, for proving that the chaos checker can fail (issue 20); never set
   * outside a test. `drain-skips-commit`: a consumer drain flushes one last batch to the sink but
   * skips its offset commit, so the survivors read those records again. `owner-fence-unchecked`
   * (issue 35): a consumer batch commits without checking that the offsets row still names its task
   * and fence, so a partitioned owner whose partitions recovery moved keeps writing beside the new one.
   */
  testBreak: z.enum(['drain-skips-commit', 'owner-fence-unchecked']).optional(),
});
export type AgentConfig = z.infer<typeof AgentConfigSchema>;

const WILDCARDS = new Set(['0.0.0.0', '::', '']);

/** The address others reach this node at: `advertise`, else the bind address, else (a wildcard bind) loopback. */
export function advertisedHost(config: Pick<AgentConfig, 'host' | 'advertise'>): string {
  if (config.advertise) return config.advertise;
  if (WILDCARDS.has(config.host)) return config.host === '::' ? '::1' : '127.0.0.1';
  return config.host;
}

/** A host as a URL writes it (IPv6 in brackets). */
export const urlHost = (host: string): string => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host);

/** The URL the control plane reaches this agent at: `endpoint`, else http://<advertised address>:<port>. */
export function agentEndpoint(config: Pick<AgentConfig, 'host' | 'advertise' | 'endpoint' | 'port'>): string {
  return config.endpoint ?? `http://${urlHost(advertisedHost(config))}:${config.port}`;
}

/** The socket path of a `unix:///path` engine address (only unix sockets are supported); undefined when unset. */
export function socketPathOf(address: string | undefined): string | undefined {
  if (!address) return undefined;
  if (!address.startsWith('unix://')) throw new Error(`the container engine is reached on a unix socket (unix:///path), got ${address}`);
  return address.slice('unix://'.length);
}

export function parseLabels(text: string | undefined): Record<string, string> {
  if (!text) return {};
  return Object.fromEntries(
    text.split(',').filter(Boolean).map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0) throw new Error(`label "${pair}" is not key=value`);
      return [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
    }),
  );
}

export function parseAgentConfig(argv = process.argv.slice(2), env = process.env): AgentConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      id: { type: 'string' }, host: { type: 'string' }, bind: { type: 'string' }, advertise: { type: 'string' }, port: { type: 'string' }, endpoint: { type: 'string' },
      labels: { type: 'string' }, slots: { type: 'string' }, 'state-dir': { type: 'string' }, api: { type: 'string' },
      'port-range': { type: 'string' },
    },
  });
  const id = values.id ?? env.SCALEGATE_AGENT_ID;
  const [rangeStart, rangeEnd] = (values['port-range'] ?? env.SCALEGATE_AGENT_PORT_RANGE ?? '').split('-');
  const parsed = AgentConfigSchema.safeParse({
    id,
    host: values.bind ?? values.host ?? (env.SCALEGATE_AGENT_BIND || undefined) ?? (env.SCALEGATE_AGENT_HOST || undefined),
    advertise: values.advertise ?? (env.SCALEGATE_AGENT_ADVERTISE || undefined),
    port: values.port ?? env.SCALEGATE_AGENT_PORT,
    endpoint: values.endpoint ?? env.SCALEGATE_AGENT_ENDPOINT,
    labels: parseLabels(values.labels ?? env.SCALEGATE_AGENT_LABELS),
    slots: values.slots ?? env.SCALEGATE_AGENT_SLOTS,
    stateDir: values['state-dir'] ?? env.SCALEGATE_AGENT_STATE_DIR ?? path.join(env.SCALEGATE_HOME ?? '.scalegate', 'agents', String(id)),
    apiUrl: values.api ?? env.SCALEGATE_API_URL ?? 'http://127.0.0.1:8080',
    token: env.SCALEGATE_AGENT_TOKEN,
    portRangeStart: rangeStart || undefined,
    portRangeEnd: rangeEnd || undefined,
    portQuarantineMs: env.SCALEGATE_AGENT_PORT_QUARANTINE_MS,
    databaseUrl: env.DATABASE_URL,
    kafkaBrokers: env.SCALEGATE_KAFKA_BROKERS || undefined,
    dockerSocket: socketPathOf(env.SCALEGATE_DOCKER_HOST || env.DOCKER_HOST),
    errorWindowMs: env.SCALEGATE_ERROR_WINDOW_MS,
    restartBackoffMs: env.SCALEGATE_RESTART_BACKOFF_MS,
    restartBackoffMaxMs: env.SCALEGATE_RESTART_BACKOFF_MAX_MS,
    restartHealthyAfterMs: env.SCALEGATE_RESTART_HEALTHY_MS,
    crashLoopRestarts: env.SCALEGATE_CRASH_LOOP_RESTARTS,
    crashLoopWindowMs: env.SCALEGATE_CRASH_LOOP_WINDOW_MS,
    testBreak: env.SCALEGATE_TEST_BREAK || undefined,
  });
  if (!parsed.success) {
    throw new Error(`invalid agent configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
