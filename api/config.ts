// The API's environment, parsed once at boot.
import { z } from 'zod';
import { checkRoleTokens, MIN_TOKEN_LENGTH } from '../http/auth';
import { LIMITS } from '../protocol';

const port = z.coerce.number().int().min(1).max(65535);

export const ApiConfigSchema = z.object({
  /** where the HTTP API listens */
  SCALEGATE_API_HOST: z.string().default('127.0.0.1'),
  SCALEGATE_API_PORT: port.default(8080),
  /** where clients reach the API (the OpenAPI document's server); default: the listen address */
  SCALEGATE_API_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** PostgreSQL connection URL (the embedded server's when started by `npm start`) */
  DATABASE_URL: z.string().min(1),
  /**
   * when set, the API (after its migrations) lets the agents' database role (scalegate_agent) log
   * in with this password: a deployment whose agents connect as that role (docs/security.md)
   */
  SCALEGATE_AGENT_DATABASE_PASSWORD: z.string().min(MIN_TOKEN_LENGTH).optional(),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  SCALEGATE_TASK_QUEUE: z.string().default('scalegate'),
  /** the Temporal Web UI, for links in responses */
  SCALEGATE_UI_URL: z.string().default('http://127.0.0.1:8233'),
  /** one bearer token per role; required (npm start generates them when unset) */
  SCALEGATE_OPERATOR_TOKEN: z.string().min(MIN_TOKEN_LENGTH),
  SCALEGATE_AGENT_TOKEN: z.string().min(MIN_TOKEN_LENGTH),
  SCALEGATE_VIEWER_TOKEN: z.string().min(MIN_TOKEN_LENGTH),
  /** the most replicas one request may ask for (at most the protocol's own bound) */
  SCALEGATE_MAX_REPLICAS: z.coerce.number().int().min(1).max(LIMITS.replicas).default(LIMITS.replicas),
  /** runtime lease; agents heartbeat every third of it */
  SCALEGATE_LEASE_TTL_MS: z.coerce.number().int().min(300).default(45_000),
  /** how long a request may wait on PostgreSQL or Temporal before it is answered 503 */
  SCALEGATE_REQUEST_DEADLINE_MS: z.coerce.number().int().min(500).max(300_000).default(10_000),
  SCALEGATE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** Kafka brokers ("host:port,..."): a workload reading a topic is checked against the broker's partition count */
  SCALEGATE_KAFKA_BROKERS: z.string().max(4096).optional(),
  /**
   * The image registries (host[:port], comma-separated) a container workload may name, beside those on
   * loopback (the embedded one); an image from any other is refused when the workload is defined
   */
  SCALEGATE_IMAGE_REGISTRIES: z
    .string()
    .max(4096)
    .default('')
    .transform((list) => list.split(',').map((entry) => entry.trim()).filter(Boolean)),
});
export type ApiConfig = z.infer<typeof ApiConfigSchema>;

export function parseApiConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const parsed = ApiConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid API configuration: ${problems}`);
  }
  checkRoleTokens({ operator: parsed.data.SCALEGATE_OPERATOR_TOKEN, agent: parsed.data.SCALEGATE_AGENT_TOKEN, viewer: parsed.data.SCALEGATE_VIEWER_TOKEN });
  return parsed.data;
}

/** The URL clients reach the API at: SCALEGATE_API_URL, else the listen address (loopback for a wildcard one). */
export function apiUrlOf(config: Pick<ApiConfig, 'SCALEGATE_API_URL' | 'SCALEGATE_API_HOST' | 'SCALEGATE_API_PORT'>): string {
  if (config.SCALEGATE_API_URL) return config.SCALEGATE_API_URL.replace(/\/+$/, '');
  const host = config.SCALEGATE_API_HOST;
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${config.SCALEGATE_API_PORT}`;
}
