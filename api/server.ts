// Builds the Fastify app from the route modules. Routes start workflows; they never do their work.
import Fastify, { LogController, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { earlierStart } from './operations';
import { createRedactor, REDACTED, secretsOf, workloadOfWorkflowId } from '../lib/log';
import type { ApiDeps } from './deps';
import { frameworkErrorOptions, installErrorHandling } from '../http/errors';
import { dependencyFailure } from './dependencies';
import { openApiDocument } from '../http/openapi';
import { defineRoute, registerRoutes, RouteSpec } from '../http/route';
import { OpenApiDocumentSchema } from '../protocol';
import { ApiConfigSchema, apiUrlOf, type ApiConfig } from './config';
import { UNMATCHED_ROUTE, type MetricSources } from './metrics';
import { healthRoutes } from './routes/health';
import { jobRoutes } from './routes/jobs';
import { operationRoutes } from './routes/operations';
import { runtimeRoutes } from './routes/runtimes';
import { stateRoutes } from './routes/state';
import { tierRoutes } from './routes/tiers';
import { workloadRoutes } from './routes/workloads';

const VERSION = '0.1.0';

/** The tags of the document: an operation's is the first path segment after /v1 (http/openapi.ts). */
const TAGS: Record<string, string> = {
  system: 'Health, readiness, metrics and this document; no token',
  state: 'The whole picture: runtimes, workloads with placements, unplaced, running operations, last reconcile',
  runtimes: 'Nodes with an agent: registration, heartbeats, cordons, recovery',
  workloads: 'Workload definitions, plans and scaling; each change is a Temporal workflow',
  plans: 'Applying a stored plan',
  operations: 'Operations (workflows): status, gates, evidence, approval, abort',
  jobs: 'Stream jobs: operators, subtasks, checkpoints, rescales',
  tiers: 'Autoscaler policies and load signals per tier',
  ledger: 'The append-only scale ledger',
};

/** The API's OpenAPI document, as GET /openapi.json answers it. */
export function apiDocument(routes: RouteSpec[], config: ApiConfig) {
  return openApiDocument(routes, {
    version: VERSION,
    description: 'scalegate, a scaling control plane: every change (scale out, scale in, rescale, recover, retire) is a durable Temporal workflow. Errors are `{ error, message, ... }` (components.schemas.Error).',
    serverUrl: apiUrlOf(config),
    tags: TAGS,
  });
}

/**
 * The document without a running stack (scripts/openapi.ts, test/unit/openapi.test.ts): declaring
 * the routes reads only the configuration (the API address from `env`, defaults and placeholders
 * for the rest: no secret is read); any other dependency a declaration touched would throw.
 */
export function offlineApiDocument(env: NodeJS.ProcessEnv = {}) {
  const { SCALEGATE_API_URL, SCALEGATE_API_HOST, SCALEGATE_API_PORT } = env;
  const config = ApiConfigSchema.parse({
    SCALEGATE_API_URL, SCALEGATE_API_HOST, SCALEGATE_API_PORT, DATABASE_URL: 'postgres://unused',
    SCALEGATE_OPERATOR_TOKEN: 'unused-operator-token-0000', SCALEGATE_AGENT_TOKEN: 'unused-agent-token-00000000', SCALEGATE_VIEWER_TOKEN: 'unused-viewer-token-000000',
  });
  const unused = (name: string) => new Proxy({}, {
    get: (_target, member) => {
      throw new Error(`the offline document used deps.${name}.${String(member)}`);
    },
  });
  const deps = new Proxy({ config } as ApiDeps, { get: (target, name) => (name === 'config' ? target.config : unused(String(name))) });
  return apiDocument(allRoutes(deps), config);
}

export function allRoutes(deps: ApiDeps): RouteSpec[] {
  const routes: RouteSpec[] = [...healthRoutes(deps), ...runtimeRoutes(deps), ...stateRoutes(deps), ...workloadRoutes(deps), ...operationRoutes(deps), ...jobRoutes(deps), ...tierRoutes(deps)];
  routes.push(
    defineRoute({
      method: 'GET', path: '/openapi.json', access: 'none', summary: 'this document', operationId: 'getOpenApiDocument',
      response: { schema: OpenApiDocumentSchema, status: { 200: 'the OpenAPI 3.1 document of this API' } },
      handler: async () => ({ status: 200, body: apiDocument(routes, deps.config) }),
    }),
    defineRoute({
      method: 'GET', path: '/metrics', access: 'none', summary: 'Prometheus metrics (prom-client text format)', operationId: 'getMetrics',
      response: { schema: z.string(), status: { 200: 'Prometheus text exposition format' }, contentType: 'text/plain' },
      errors: [503],
      handler: async () => {
        const body = await deps.metrics.render(metricSources(deps));
        return { status: 200, body, contentType: deps.metrics.contentType };
      },
    }),
  );
  return routes;
}

/** What /metrics reads at scrape time (api/metrics.ts). */
function metricSources(deps: ApiDeps): MetricSources {
  return {
    taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
    ledgerStats: () => deps.ledger.stats(),
    reconcileMarker: () => deps.registry.reconcileMarker(),
    unplaced: () => deps.registry.listUnplaced(),
    runtimes: () => deps.runtimes.list(),
    workloads: () => deps.registry.listWorkloads(),
    placements: () => deps.registry.listPlacements(),
    temporal: () => deps.temporal.client(),
  };
}

/** The scope of a request's log line: the workload, runtime and workflow its path names. */
function scopeOf(request: FastifyRequest): Record<string, string> {
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  const scope: Record<string, string> = {};
  if (params.name) scope.workload = params.name;
  if (params.job) scope.workload = params.job; // a stream job is a workload
  if (params.id && request.url.startsWith('/v1/runtimes/')) scope.runtime = params.id;
  if (params.workflowId) {
    scope.workflow = params.workflowId;
    const workload = workloadOfWorkflowId(params.workflowId);
    if (workload) scope.workload = workload;
  }
  return scope;
}

/**
 * Fastify's pino logger as scalegate JSON lines: `at`, `level` as a word, `msg`, the scope of the
 * request, and every line passed through the redactor (role tokens, Bearer values, URL passwords).
 */
function loggerOptions(deps: ApiDeps) {
  const level = deps.config.SCALEGATE_LOG_LEVEL;
  if (level === 'silent') return false;
  const { config } = deps;
  const redact = createRedactor(secretsOf({
    SCALEGATE_OPERATOR_TOKEN: config.SCALEGATE_OPERATOR_TOKEN,
    SCALEGATE_AGENT_TOKEN: config.SCALEGATE_AGENT_TOKEN, SCALEGATE_VIEWER_TOKEN: config.SCALEGATE_VIEWER_TOKEN,
  }));
  return {
    level,
    messageKey: 'msg',
    timestamp: () => `,"at":"${new Date().toISOString()}"`,
    formatters: { level: (label: string) => ({ level: label }), bindings: () => ({ process: 'api' }) },
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization', '*.authorization', 'credential', '*.credential', 'token', '*.token'], censor: REDACTED },
    stream: { write: (line: string) => void process.stdout.write(redact(line)) },
  };
}

export function buildServer(deps: ApiDeps) {
  const app = Fastify({
    logger: loggerOptions(deps),
    bodyLimit: 1024 * 1024,
    // Fastify's two lines per request are noise; the onResponse hook below writes one scoped line
    logController: new LogController({ disableRequestLogging: true }),
    // a 414, 431 or undecodable URL in the one error shape, like every other error
    ...frameworkErrorOptions,
  });

  installErrorHandling(app, { onUnexpected: (error) => app.log.error({ err: error }, 'unhandled error'), classify: dependencyFailure });
  // The workflow an answer started (202 {workflowId}), so its request line names it.
  const startedWorkflow = new WeakMap<FastifyRequest, string>();
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode === 202 && typeof payload === 'string' && payload.includes('"workflowId"')) {
      try {
        const workflowId = (JSON.parse(payload) as { workflowId?: unknown }).workflowId;
        if (typeof workflowId === 'string') startedWorkflow.set(request, workflowId);
      } catch {
        // not JSON: nothing to note
      }
    }
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
    const seconds = reply.elapsedTime / 1000;
    deps.metrics.countRequest(request.method, request.routeOptions.url, reply.statusCode, seconds);
    // One line per change (info), per read or heartbeat (debug), per server error (error).
    const workflow = startedWorkflow.get(request);
    const fields = { ...scopeOf(request), ...(workflow ? { workflow, workload: workloadOfWorkflowId(workflow) ?? scopeOf(request).workload } : {}), method: request.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime) };
    if (reply.statusCode >= 500) request.log.error(fields, 'request failed');
    else if (request.method === 'GET' || route.endsWith('/heartbeat') || route === '/metrics') request.log.debug(fields, 'request');
    else request.log.info(fields, 'request');
  });

  const routes = allRoutes(deps);
  deps.metrics.declareRoutes(routes.map((r) => r.path));
  registerRoutes(app, routes, {
    operator: deps.config.SCALEGATE_OPERATOR_TOKEN,
    agent: deps.config.SCALEGATE_AGENT_TOKEN,
    viewer: deps.config.SCALEGATE_VIEWER_TOKEN,
  }, { deadlineMs: deps.config.SCALEGATE_REQUEST_DEADLINE_MS, earlierStart: (request, body) => earlierStart(deps, request, body) });
  return app;
}
