// The API's environment, parsed once at boot.
import { z } from 'zod';

const port = z.coerce.number().int().min(1).max(65535);

export const ApiConfigSchema = z.object({
  /** where the HTTP API listens */
  SCALEGATE_API_HOST: z.string().default('127.0.0.1'),
  SCALEGATE_API_PORT: port.default(8080),
  /** PostgreSQL connection URL (the embedded server's when started by `npm start`) */
  DATABASE_URL: z.string().min(1),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  SCALEGATE_TASK_QUEUE: z.string().default('scalegate'),
  /** the Temporal Web UI, for links in responses */
  SCALEGATE_UI_URL: z.string().default('http://127.0.0.1:8233'),
  /** one bearer token per role; required (npm start generates them when unset) */
  SCALEGATE_OPERATOR_TOKEN: z.string().min(8),
  SCALEGATE_AGENT_TOKEN: z.string().min(8),
  SCALEGATE_VIEWER_TOKEN: z.string().min(8),
  /** runtime lease; agents heartbeat every third of it */
  SCALEGATE_LEASE_TTL_MS: z.coerce.number().int().min(300).default(45_000),
  SCALEGATE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});
export type ApiConfig = z.infer<typeof ApiConfigSchema>;

export function parseApiConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const parsed = ApiConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid API configuration: ${problems}`);
  }
  return parsed.data;
}
