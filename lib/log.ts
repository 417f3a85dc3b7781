// Structured logs for the control-plane processes: one JSON object per line, scoped by workload,
// workflow and runtime, and scrubbed of secrets. Every line, whoever built it (our logger, the
// Temporal SDK's, Fastify's pino), passes through one redactor just before it is written, so a
// token that slips into an error message is still never printed. No project imports.

export const REDACTED = '[redacted]';

/** Field names whose values are secrets whatever they hold. */
const SECRET_KEYS = /^(authorization|token|credential|password|secret|.*_token)$/i;

export type Redactor = (text: string) => string;

/**
 * Replaces every occurrence of the given secrets (as written and as JSON-escaped), any
 * `Bearer <token>`, and the password of any URL, by `[redacted]`. Secrets shorter than 8
 * characters are ignored (they would blank out ordinary words).
 */
export function createRedactor(secrets: readonly (string | undefined | null)[]): Redactor {
  const forms = [...new Set(secrets.filter((s): s is string => typeof s === 'string' && s.length >= 8).flatMap((s) => [s, JSON.stringify(s).slice(1, -1)]))]
    .sort((a, b) => b.length - a.length);
  return (text: string) => {
    let out = text;
    for (const form of forms) if (out.includes(form)) out = out.split(form).join(REDACTED);
    return out
      .replace(/(Bearer\s+)(?!\[redacted\])[^\s"'\\,}]+/gi, `$1${REDACTED}`)
      .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@"]+:)[^@\s/"]+@/gi, `$1${REDACTED}@`);
  };
}

/**
 * The secrets of a process environment: the role tokens. (A database password is redacted where
 * it is printed, inside its URL, by the redactor's URL rule: as a bare string it may be a common
 * word that would blank out ordinary text.)
 */
export function secretsOf(env: NodeJS.ProcessEnv): string[] {
  return [env.SCALEGATE_OPERATOR_TOKEN, env.SCALEGATE_AGENT_TOKEN, env.SCALEGATE_VIEWER_TOKEN, env.SCALEGATE_AGENT_DATABASE_PASSWORD].filter((s): s is string => !!s);
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const SEVERITY: Record<LogLevel | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** a logger whose lines all carry `scope` (e.g. `{ workload: 'web' }`) */
  child(scope: Record<string, unknown>): Logger;
}

/** JSON.stringify that drops secret-named fields, turns errors into `{name, message, stack}` and survives cycles. */
export function safeJson(value: unknown): string {
  const seen = new WeakSet<object>();
  try {
    return JSON.stringify(value, (key, v) => {
      if (key && SECRET_KEYS.test(key) && v !== null && v !== undefined && v !== '') return REDACTED;
      if (typeof v === 'bigint') return v.toString();
      if (v instanceof Error) return { name: v.name, message: v.message, stack: v.stack, ...(v.cause ? { cause: v.cause } : {}) };
      if (v && typeof v === 'object') {
        if (seen.has(v)) return '[circular]';
        seen.add(v);
      }
      return v;
    });
  } catch (error) {
    return JSON.stringify({ unloggable: error instanceof Error ? error.message : String(error) });
  }
}

export function createLogger(options: {
  level?: LogLevel | 'silent';
  redact: Redactor;
  scope?: Record<string, unknown>;
  /** where a finished line goes (default: stdout) */
  write?: (line: string) => void;
}): Logger {
  const threshold = SEVERITY[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const make = (scope: Record<string, unknown>): Logger => {
    const emit = (level: LogLevel) => (msg: string, fields: Record<string, unknown> = {}) => {
      if (SEVERITY[level] < threshold) return;
      write(options.redact(safeJson({ at: new Date().toISOString(), level, msg, ...scope, ...fields })));
    };
    return {
      debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error'),
      child: (more) => make({ ...scope, ...more }),
    };
  };
  return make(options.scope ?? {});
}

/** The workload a workflow id names: `scale:<w>`, `replan:<w>` (ids of other kinds name no workload). */
export function workloadOfWorkflowId(workflowId: string | undefined): string | undefined {
  const match = /^(scale|replan):(.+)$/.exec(workflowId ?? '');
  return match ? match[2] : undefined;
}
