// One builder declares every route: zod schemas for params/query/body and for its answer, the role
// it needs, and a handler that only sees validated input. The same declarations produce
// /openapi.json (http/openapi.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { describeIssues } from '../protocol/issues';
import { Access, authorize, authorizeRuntime, bearerFromBasic, isRoleAccess, Role, RoleTokens, type Caller, type RuntimeCredentials } from './auth';
import { withinDeadline } from './deadline';
import { ApiError } from './errors';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface Reply<T = unknown> {
  status: number;
  body: T;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** the role of the token that authenticated the call (null for `none`, and for a runtime credential) */
  role: Role | null;
  /**
   * The runtime whose credential authenticated the call (`runtime` and `agent-or-runtime` routes),
   * with that credential for a compare-and-set in SQL. Never log it.
   */
  runtime: { id: string; credential: string } | null;
  request: FastifyRequest;
}

/** How a `runtime` / `agent-or-runtime` route learns which runtime is calling and what it must present. */
export interface RuntimeAccess extends RuntimeCredentials {
  /** the runtime the call names, from the raw (not yet validated) request; default: the `:id` path parameter */
  idOf?(raw: { params: unknown; body: unknown }): unknown;
}

/** The statuses a route answers with its own body (not the Error shape): successes, and /readyz's 503. */
export type AnswerStatus = 200 | 201 | 202 | 503;
/**
 * Error statuses a handler answers beyond those the builder knows a route can produce: 401/403
 * from its access, 400/415/422 from its inputs, 400/409 from an operation start, 503 from its
 * dependencies (http/openapi.ts `errorStatusesOf`).
 */
export type HandlerErrorStatus = 404 | 409 | 422 | 503;

/** What a route answers, for the OpenAPI document; the handler's bodies are type-checked against `schema`. */
export interface ResponseSpec<S extends z.ZodType = z.ZodType> {
  /** a protocol/ schema; one with a `title` in its metadata becomes a named component */
  schema: S;
  /** each status answered with this body, and what it means, e.g. `{ 201: 'defined', 200: 'replaced' }` */
  status: Partial<Record<AnswerStatus, string>>;
  /** default application/json */
  contentType?: string;
}

export interface RouteSpec<P = unknown, Q = unknown, B = unknown, S extends z.ZodType = z.ZodType> {
  method: Method;
  /** Fastify syntax: /v1/runtimes/:id */
  path: string;
  access: Access;
  /** required for access `runtime` and `agent-or-runtime` */
  runtime?: RuntimeAccess;
  summary: string;
  /** the OpenAPI operationId: a stable camelCase verb phrase (scaleWorkload, getOperation) */
  operationId?: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** what a validation message calls the body (default "body"): "invalid workload: replicas: ..." */
  bodyName?: string;
  response?: ResponseSpec<S>;
  errors?: HandlerErrorStatus[];
  /**
   * A page people open in a browser, which cannot send a bearer header from a link: HTTP Basic
   * is accepted too, with the role's token as the password (any user name), and a 401 asks the
   * browser for it (WWW-Authenticate). The token never goes into a URL.
   */
  browser?: boolean;
  /** overrides the server's request deadline (e.g. a route that waits for a workflow's update) */
  deadlineMs?: number;
  /**
   * The route starts an operation: a valid request whose Idempotency-Key already started one is
   * answered that operation (202) before the handler runs (DESIGN.md §4 "Unambiguous starts").
   */
  startsOperation?: boolean;
  /**
   * Answers bodies of the declared response schema (S is inferred from the schema only, never from
   * what the handler returns). A handler without parameters is typed before S is known, and its
   * literal fields widen ('ok' to string): give it one, `async (_ctx) => ...`.
   */
  handler(ctx: RouteContext<P, Q, B>): Promise<Reply<z.output<S>>>;
}

export const ok = <T>(body: T, status = 200): Reply<T> => ({ status, body });

export function defineRoute<P = undefined, Q = undefined, B = undefined, S extends z.ZodType = z.ZodType>(spec: RouteSpec<P, Q, B, S>): RouteSpec {
  return spec as unknown as RouteSpec;
}

/**
 * The path to the first string (value or key) holding a NUL character, or null. PostgreSQL takes
 * no NUL in text or jsonb, so such input is refused up front for every route, not as a 500 later.
 */
export function nulPath(value: unknown): string | null {
  const stack: { value: unknown; path: string }[] = [{ value, path: '' }];
  while (stack.length) {
    const { value: current, path } = stack.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) return path || '(input)';
    } else if (current && typeof current === 'object') {
      for (const [key, child] of Object.entries(current)) {
        if (key.includes('\u0000')) return `${path}.(a key)`;
        stack.push({ value: child, path: path ? `${path}.${key}` : key });
      }
    }
  }
  return null;
}

function parseWith<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string, name = where): T {
  if (!schema) return undefined as T;
  const nul = nulPath(value);
  if (nul !== null) {
    throw new ApiError('validation-failed', `invalid ${where}: ${nul}: NUL characters are not accepted`, { issues: [{ path: `${where}.${nul}`, message: 'contains a NUL character' }] });
  }
  const result = schema.safeParse(value ?? (where === 'body' ? undefined : {}));
  if (!result.success) {
    throw new ApiError('validation-failed', `invalid ${name}: ${describeIssues(result.error)}`, {
      issues: result.error.issues.map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message })),
    });
  }
  return result.data;
}

const BASIC_CHALLENGE = 'Basic realm="scalegate (user: any name, password: your viewer or operator token)", charset="UTF-8"';

const pathId = (raw: { params: unknown }): unknown => (raw.params as { id?: unknown } | undefined)?.id;

/** Who is calling, checked before any input is validated. */
async function authenticate(route: RouteSpec, tokens: RoleTokens, request: FastifyRequest): Promise<Caller> {
  const { access } = route;
  if (access === 'none' || access === 'operator-or-agent' || isRoleAccess(access)) {
    const authorization = route.browser ? bearerFromBasic(request.headers.authorization) : request.headers.authorization;
    return { role: authorize(tokens, access, authorization), runtime: null };
  }
  if (!route.runtime) throw new Error(`route ${route.method} ${route.path} has access ${access} but declares no runtime credentials`);
  const runtimeId = (route.runtime.idOf ?? pathId)({ params: request.params, body: request.body });
  return authorizeRuntime(tokens, access, request.headers.authorization, runtimeId, route.runtime);
}

/**
 * @param options.deadlineMs how long a request (its authentication included: a runtime's credential
 *   is looked up) may take before the caller is answered 503 `dependency-unavailable` (the backstop
 *   for a dependency that hangs instead of failing)
 */
export function registerRoutes(
  app: FastifyInstance, routes: RouteSpec[], tokens: RoleTokens,
  options: { deadlineMs?: number; earlierStart?: (request: FastifyRequest) => Promise<unknown | null> } = {},
): void {
  for (const route of routes) {
    if ((route.access === 'runtime' || route.access === 'agent-or-runtime') && !route.runtime) {
      throw new Error(`route ${route.method} ${route.path} has access ${route.access} but declares no runtime credentials`);
    }
    app.route({
      method: route.method,
      url: route.path,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        const handle = async (): Promise<Reply> => {
          const { role, runtime } = await authenticate(route, tokens, request);
          // A request the document refuses is refused, a retry with a used Idempotency-Key too
          // (it answered 202 with the first operation, even with no body at all).
          const params = parseWith(route.params, request.params, 'params');
          const query = parseWith(route.query, request.query, 'query');
          if (route.body && request.body === undefined) throw new ApiError('bad-request', 'a JSON body is required');
          const body = parseWith(route.body, request.body, 'body', route.bodyName);
          if (route.startsOperation && options.earlierStart) {
            const earlier = await options.earlierStart(request);
            if (earlier) return ok(earlier, 202);
          }
          return route.handler({ params, query, body, role, runtime, request });
        };
        const deadlineMs = route.deadlineMs ?? options.deadlineMs;
        let result: Reply;
        try {
          result = deadlineMs ? await withinDeadline(`${route.method} ${route.path}`, deadlineMs, handle()) : await handle();
        } catch (error) {
          // A browser asks its user for the credentials (the token as the password) on this answer.
          if (route.browser && error instanceof ApiError && error.status === 401) reply.header('www-authenticate', BASIC_CHALLENGE);
          throw error;
        }
        reply.status(result.status);
        if (result.contentType) reply.type(result.contentType);
        for (const [name, value] of Object.entries(result.headers ?? {})) reply.header(name, value);
        return result.body;
      },
    });
  }
}
