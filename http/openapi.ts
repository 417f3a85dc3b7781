// The OpenAPI 3.1 document of a set of routes, built from their declarations (http/route.ts): the
// zod schemas they validate params, queries and bodies with (as the JSON they accept), the
// protocol/ schemas of their answers (as the JSON they send), and the error statuses each can
// answer, all in the one Error shape. `npm run lint:openapi` lints what this builds.
import { z } from 'zod';
import { IDEMPOTENCY_KEY } from '../protocol/api';
import { ERROR_CODES, ErrorBodySchema } from '../protocol/errors';
import type { Access } from './auth';
import type { RouteSpec } from './route';

export interface DocumentOptions {
  version: string;
  description: string;
  /** where clients reach the API, e.g. http://127.0.0.1:8080 */
  serverUrl: string;
  /** every tag an operation gets (the first path segment after /v1, else `system`), with its description */
  tags: Record<string, string>;
}

/** Who may call, in words, per access (http/auth.ts). */
const ACCESS_TEXT: Record<Access, string> = {
  none: 'No token.',
  viewer: 'Token: viewer or operator.',
  operator: 'Token: operator.',
  agent: 'Token: agent.',
  'operator-or-agent': 'Token: operator or agent.',
  runtime: "Token: the credential of the runtime the path names (issued at registration).",
  'agent-or-runtime': "Token: the agent token (a new or lapsed runtime), or the credential of the runtime the body names (a live one resuming).",
};

/** The error answers, one per status, each in the Error shape; the codes come from protocol/errors.ts. */
const ERROR_RESPONSES: Record<number, { name: string; description: string }> = {
  400: { name: 'BadRequest', description: 'The request is malformed (not JSON, an empty body, a bad Idempotency-Key).' },
  401: { name: 'Unauthorized', description: 'No token, an unknown token, or not the credential of the runtime named.' },
  403: { name: 'Forbidden', description: 'A valid token of a role this route does not take.' },
  404: { name: 'NotFound', description: 'What the path names does not exist.' },
  405: { name: 'MethodNotAllowed', description: 'The path exists but not with this method (this path answers it to any method it does not list); the Allow header lists those it takes.' },
  409: { name: 'Conflict', description: 'A conflict with what is there now: an operation already runs on the target, a stale plan or fence, a PUT that changes a live workload\'s kind.' },
  413: { name: 'PayloadTooLarge', description: 'The body is larger than the server reads (1 MiB).' },
  414: { name: 'UriTooLong', description: 'A path segment is longer than the router takes (4096 characters as sent, percent-encoded: longer than any valid parameter).' },
  415: { name: 'UnsupportedMediaType', description: 'The body is not application/json.' },
  422: { name: 'ValidationFailed', description: 'The input is well-formed but invalid; validation-failed lists every bad field in `issues`; idempotency-key-reused: the Idempotency-Key already started an operation for another method, path or body (its `workflowId` and `runId` are in the answer).' },
  431: { name: 'HeadersTooLarge', description: 'The request headers are larger than the server reads (16 KiB in all).' },
  503: { name: 'Unavailable', description: 'PostgreSQL or Temporal did not answer in time; nothing was started. Retry (with the same Idempotency-Key).' },
};

const codesOf = (status: number) => Object.entries(ERROR_CODES).filter(([, c]) => c.status === status).map(([code]) => code);

/** The error statuses a route can answer: from its access, inputs and starts, plus those its handler declares. */
export function errorStatusesOf(route: RouteSpec): number[] {
  // Any request: headers too large (431), another method than the path's (405); a path parameter
  // longer than the router takes (414).
  const statuses = new Set<number>([...(route.errors ?? []), 405, 431]);
  if (route.path.includes('/:')) statuses.add(414);
  // Authentication: a missing or unknown token (401), a token of another role (403); a runtime's
  // credential is looked up, and every authenticated route reads PostgreSQL or Temporal (503).
  if (route.access !== 'none') [401, 403, 503].forEach((s) => statuses.add(s));
  if (route.params || route.query || route.body) statuses.add(422);
  if (route.body) [400, 413, 415].forEach((s) => statuses.add(s));
  // A malformed Idempotency-Key (400); a target that is busy (409); a key used for another request (422).
  if (route.startsOperation) [400, 409, 422].forEach((s) => statuses.add(s));
  return [...statuses].sort((a, b) => a - b);
}

const ref = (to: string) => ({ $ref: `#/components/${to}` });

/** No NUL character anywhere (JSON Schema's regex dialect is ECMA-262's, as JavaScript's). */
const NO_NUL = '^[^\\u0000]*$';

/** JSON Schema of a zod schema, as OpenAPI 3.1 embeds it (no `$schema`, no safe-integer bounds on every integer). */
function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'throw',
    override: ({ jsonSchema }) => {
      const node = jsonSchema as Record<string, unknown>;
      if (node.minimum === Number.MIN_SAFE_INTEGER) delete node.minimum;
      if (node.maximum === Number.MAX_SAFE_INTEGER) delete node.maximum;
      // An answer may gain fields (DESIGN.md §6: more fields are welcome): only requests are closed.
      if (io === 'output' && node.additionalProperties === false) delete node.additionalProperties;
      // A request's strings and keys take no NUL (http/route.ts nulPath: PostgreSQL stores none).
      if (io === 'input' && node.type === 'string' && node.pattern === undefined && node.const === undefined && node.enum === undefined) node.pattern = NO_NUL;
      if (io === 'input' && node.type === 'object' && node.additionalProperties !== false && node.propertyNames === undefined) node.propertyNames = { pattern: NO_NUL };
    },
  });
  return json;
}

/** `/v1/runtimes/:id` → `/v1/runtimes/{id}` */
const openApiPath = (path: string) => path.replace(/:([A-Za-z]+)/g, '{$1}');
const tagOf = (path: string) => /^\/v1\/([a-z]+)/.exec(path)?.[1] ?? 'system';

export function openApiDocument(routes: RouteSpec[], options: DocumentOptions) {
  const schemas: Record<string, unknown> = { Error: jsonSchemaOf(ErrorBodySchema, 'output') };
  const titled = new Map<string, z.ZodType>([['Error', ErrorBodySchema]]);
  /** An answer schema: a titled one once under components.schemas, referenced; the rest inline. */
  const answerSchema = (schema: z.ZodType) => {
    const title = z.globalRegistry.get(schema)?.title;
    if (!title) return jsonSchemaOf(schema, 'output');
    const known = titled.get(title);
    if (known && known !== schema) throw new Error(`two answer schemas are titled ${title}`);
    if (!known) {
      titled.set(title, schema);
      schemas[title] = jsonSchemaOf(schema, 'output');
    }
    return ref(`schemas/${title}`);
  };

  const usedErrors = new Set<number>();
  const usedTags = new Set<string>();
  const operationIds = new Set<string>();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const where = `${route.method} ${route.path}`;
    if (!route.operationId) throw new Error(`route ${where} declares no operationId`);
    if (operationIds.has(route.operationId)) throw new Error(`operationId ${route.operationId} is used twice`);
    operationIds.add(route.operationId);
    if (!route.response) throw new Error(`route ${where} declares no response`);
    const tag = tagOf(route.path);
    if (!options.tags[tag]) throw new Error(`route ${where} has tag ${tag}, which has no description`);
    usedTags.add(tag);

    const parameters: unknown[] = [];
    for (const [location, schema] of [['path', route.params], ['query', route.query]] as const) {
      if (!schema) continue;
      const shape = jsonSchemaOf(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, s] of Object.entries(shape.properties ?? {})) {
        parameters.push({ name, in: location, required: location === 'path' || (shape.required ?? []).includes(name), schema: s });
      }
    }
    if (route.startsOperation) {
      parameters.push({
        name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', pattern: IDEMPOTENCY_KEY.source },
        description: 'A retry with the same key is answered the operation the first request started (202), never a second start.',
      });
    }

    const { schema, status, contentType = 'application/json' } = route.response;
    const responses: Record<string, unknown> = {};
    for (const [code, description] of Object.entries(status)) responses[code] = { description, content: { [contentType]: { schema: answerSchema(schema) } } };
    for (const code of errorStatusesOf(route)) {
      usedErrors.add(code);
      responses[String(code)] ??= ref(`responses/${ERROR_RESPONSES[code].name}`);
    }

    paths[openApiPath(route.path)] ??= {};
    paths[openApiPath(route.path)][route.method.toLowerCase()] = {
      operationId: route.operationId,
      tags: [tag],
      summary: route.summary,
      description: ACCESS_TEXT[route.access],
      security: route.access === 'none' ? [] : [{ bearer: [] }],
      'x-scalegate-role': route.access,
      ...(parameters.length ? { parameters } : {}),
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchemaOf(route.body, 'input') } } } } : {}),
      responses,
    };
  }

  const responses = Object.fromEntries([...usedErrors].sort((a, b) => a - b).map((code) => {
    const { name, description } = ERROR_RESPONSES[code];
    const headers = code === 405 ? { headers: { Allow: { description: 'the methods the path takes, e.g. `GET, HEAD`', schema: { type: 'string' } } } } : {};
    return [name, { description: `${description} The codes with this status (protocol/errors.ts, the API's and the agents' alike): ${codesOf(code).join(', ')}.`, ...headers, content: { 'application/json': { schema: ref('schemas/Error') } } }];
  }));
  return {
    openapi: '3.1.0',
    info: { title: 'scalegate', version: options.version, description: options.description, license: { name: 'Apache-2.0', identifier: 'Apache-2.0' } },
    servers: [{ url: options.serverUrl, description: 'this API' }],
    tags: Object.entries(options.tags).filter(([name]) => usedTags.has(name)).map(([name, description]) => ({ name, description })),
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a role token (operator, viewer, agent) or a runtime credential' } }, schemas, responses },
    paths,
  };
}
