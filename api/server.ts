// Builds the Fastify app from the route modules. Routes start workflows; they never do their work.
import Fastify, { FastifyError, LogController } from 'fastify';
import type { ApiDeps } from './deps';
import { ApiError } from './errors';
import { defineRoute, openApiDocument, registerRoutes, RouteSpec } from './route';
import { healthRoutes } from './routes/health';
import { operationRoutes } from './routes/operations';
import { runtimeRoutes } from './routes/runtimes';
import { stateRoutes } from './routes/state';
import { workloadRoutes } from './routes/workloads';

const VERSION = '0.1.0';

export function allRoutes(deps: ApiDeps): RouteSpec[] {
  const routes: RouteSpec[] = [...healthRoutes(deps), ...runtimeRoutes(deps), ...stateRoutes(deps), ...workloadRoutes(deps), ...operationRoutes(deps)];
  routes.push(
    defineRoute({
      method: 'GET', path: '/openapi.json', access: 'none', summary: 'this document',
      handler: async () => ({ status: 200, body: openApiDocument(routes, VERSION) }),
    }),
    defineRoute({
      method: 'GET', path: '/metrics', access: 'none', summary: 'Prometheus metrics',
      handler: async () => {
        const runtimes = await deps.runtimes.list();
        const byStatus: Record<string, number> = { READY: 0, CORDONED: 0, LOST: 0 };
        for (const r of runtimes) byStatus[r.status] += 1;
        const body = deps.metrics.render([
          {
            name: 'scalegate_runtimes',
            help: 'runtimes by status',
            values: Object.entries(byStatus).map(([status, value]) => ({ labels: { status }, value })),
          },
        ]);
        return { status: 200, body, contentType: 'text/plain; version=0.0.4' };
      },
    }),
  );
  return routes;
}

export function buildServer(deps: ApiDeps) {
  const level = deps.config.SCALEGATE_LOG_LEVEL;
  const app = Fastify({
    logger: level === 'silent' ? false : { level, redact: ['req.headers.authorization', 'headers.authorization'] },
    bodyLimit: 1024 * 1024,
    // one line per request is noise here; errors are still logged
    logController: new LogController({ disableRequestLogging: true }),
  });

  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) return reply.status(error.status).send(error.toBody());
    if (error.code === 'FST_ERR_CTP_INVALID_JSON' || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (error instanceof SyntaxError && error.statusCode === 400)) {
      return reply.status(400).send({ error: 'invalid-json', message: `malformed JSON body: ${error.message}` });
    }
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return reply.status(415).send({ error: 'unsupported-media-type', message: 'send JSON with content-type: application/json' });
    }
    if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
      return reply.status(400).send({ error: 'bad-request', message: 'the JSON body is empty' });
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return reply.status(error.statusCode).send({ error: 'bad-request', message: error.message });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.status(500).send({ error: 'internal', message: 'internal error; see the API log' });
  });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: 'not-found', message: `no route ${request.method} ${request.url.split('?')[0]}` }),
  );
  app.addHook('onResponse', async (request, reply) => {
    deps.metrics.countRequest(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode);
  });

  registerRoutes(app, allRoutes(deps), {
    operator: deps.config.SCALEGATE_OPERATOR_TOKEN,
    agent: deps.config.SCALEGATE_AGENT_TOKEN,
    viewer: deps.config.SCALEGATE_VIEWER_TOKEN,
  });
  return app;
}
