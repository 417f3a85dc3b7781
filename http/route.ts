// One builder declares every route: zod schemas for params/query/body, the role it needs, and a
// handler that only sees validated input. The same declarations produce /openapi.json.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { describeIssues } from '../protocol/issues';
import { Access, authorize, Role, RoleTokens } from './auth';
import { withinDeadline } from './deadline';
import { ApiError } from './errors';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface Reply {
  status: number;
  body: unknown;
  contentType?: string;
}

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  role: Role | null;
  request: FastifyRequest;
}

export interface RouteSpec<P = unknown, Q = unknown, B = unknown> {
  method: Method;
  /** Fastify syntax: /v1/runtimes/:id */
  path: string;
  access: Access;
  summary: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** overrides the server's request deadline (e.g. a route that waits for a workflow's update) */
  deadlineMs?: number;
  handler(ctx: RouteContext<P, Q, B>): Promise<Reply>;
}

export const ok = (body: unknown, status = 200): Reply => ({ status, body });

export function defineRoute<P = undefined, Q = undefined, B = undefined>(spec: RouteSpec<P, Q, B>): RouteSpec {
  return spec as unknown as RouteSpec;
}

function parseWith<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value ?? (where === 'body' ? undefined : {}));
  if (!result.success) {
    throw new ApiError('validation-failed', `invalid ${where}: ${describeIssues(result.error)}`, {
      issues: result.error.issues.map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message })),
    });
  }
  return result.data;
}

/**
 * @param options.deadlineMs how long a handler may take before the caller is answered 503
 *   `dependency-unavailable` (the backstop for a dependency that hangs instead of failing)
 */
export function registerRoutes(app: FastifyInstance, routes: RouteSpec[], tokens: RoleTokens, options: { deadlineMs?: number } = {}): void {
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        const role = authorize(tokens, route.access, request.headers.authorization);
        const params = parseWith(route.params, request.params, 'params');
        const query = parseWith(route.query, request.query, 'query');
        if (route.body && request.body === undefined) throw new ApiError('bad-request', 'a JSON body is required');
        const body = parseWith(route.body, request.body, 'body');
        const handled = route.handler({ params, query, body, role, request });
        const deadlineMs = route.deadlineMs ?? options.deadlineMs;
        const result = deadlineMs ? await withinDeadline(`${route.method} ${route.path}`, deadlineMs, handled) : await handled;
        reply.status(result.status);
        if (result.contentType) reply.type(result.contentType);
        return result.body;
      },
    });
  }
}

/** The OpenAPI 3.1 document, built from the same zod schemas the handlers validate with. */
export function openApiDocument(routes: RouteSpec[], version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  const jsonSchema = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
  for (const route of routes) {
    const openApiPath = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
      if (!schema) continue;
      const shape = jsonSchema(schema) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, s] of Object.entries(shape.properties ?? {})) {
        parameters.push({ name, in: where, required: where === 'path' || (shape.required ?? []).includes(name), schema: s });
      }
    }
    paths[openApiPath] ??= {};
    paths[openApiPath][route.method.toLowerCase()] = {
      summary: route.summary,
      security: route.access === 'none' ? [] : [{ bearer: [] }],
      'x-scalegate-role': route.access,
      parameters,
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } } } : {}),
      responses: {
        default: {
          description: 'success, or an error { error, message }',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'scalegate', version },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    paths,
  };
}
