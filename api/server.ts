// Builds the Fastify app from the route modules. Routes start workflows; they never do their work.
import Fastify, { LogController, type FastifyRequest } from 'fastify';
import { earlierStart } from './operations';
import { createRedactor, REDACTED, secretsOf, workloadOfWorkflowId } from '../lib/log';
import type { ApiDeps } from './deps';
import { installErrorHandling } from '../http/errors';
import { dependencyFailure } from './dependencies';
import { defineRoute, openApiDocument, registerRoutes, RouteSpec } from '../http/route';
import type { MetricSources } from './metrics';
import { healthRoutes } from './routes/health';
import { jobRoutes } from './routes/jobs';
import { operationRoutes } from './routes/operations';
import { runtimeRoutes } from './routes/runtimes';
import { stateRoutes } from './routes/state';
import { tierRoutes } from './routes/tiers';
import { workloadRoutes } from './routes/workloads';

const VERSION = '0.1.0';

export function allRoutes(deps: ApiDeps): RouteSpec[] {
  const routes: RouteSpec[] = [...healthRoutes(deps), ...runtimeRoutes(deps), ...stateRoutes(deps), ...workloadRoutes(deps), ...operationRoutes(deps), ...jobRoutes(deps), ...tierRoutes(deps)];
  routes.push(
    defineRoute({
      method: 'GET', path: '/openapi.json', access: 'none', summary: 'this document',
      handler: async () => ({ status: 200, body: openApiDocument(routes, VERSION) }),
    }),
    defineRoute({
      method: 'GET', path: '/metrics', access: 'none', summary: 'Prometheus metrics (prom-client text format)',
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
    const route = request.routeOptions.url ?? 'unmatched';
    const seconds = reply.elapsedTime / 1000;
    deps.metrics.countRequest(request.method, route, reply.statusCode, seconds);
    // One line per change (info), per read or heartbeat (debug), per server error (error).
    const workflow = startedWorkflow.get(request);
    const fields = { ...scopeOf(request), ...(workflow ? { workflow, workload: workloadOfWorkflowId(workflow) ?? scopeOf(request).workload } : {}), method: request.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime) };
    if (reply.statusCode >= 500) request.log.error(fields, 'request failed');
    else if (request.method === 'GET' || route.endsWith('/heartbeat') || route === '/metrics') request.log.debug(fields, 'request');
    else request.log.info(fields, 'request');
  });

  registerRoutes(app, allRoutes(deps), {
    operator: deps.config.SCALEGATE_OPERATOR_TOKEN,
    agent: deps.config.SCALEGATE_AGENT_TOKEN,
    viewer: deps.config.SCALEGATE_VIEWER_TOKEN,
  }, { deadlineMs: deps.config.SCALEGATE_REQUEST_DEADLINE_MS, earlierStart: (request) => earlierStart(deps, request) });
  return app;
}
