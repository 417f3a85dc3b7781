// Builds the Fastify app from the route modules. Routes start workflows; they never do their work.
import Fastify, { LogController } from 'fastify';
import type { ApiDeps } from './deps';
import { installErrorHandling } from '../http/errors';
import { dependencyFailure } from './dependencies';
import { defineRoute, openApiDocument, registerRoutes, RouteSpec } from '../http/route';
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

  installErrorHandling(app, { onUnexpected: (error) => app.log.error({ err: error }, 'unhandled error'), classify: dependencyFailure });
  app.addHook('onResponse', async (request, reply) => {
    deps.metrics.countRequest(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode);
  });

  registerRoutes(app, allRoutes(deps), {
    operator: deps.config.SCALEGATE_OPERATOR_TOKEN,
    agent: deps.config.SCALEGATE_AGENT_TOKEN,
    viewer: deps.config.SCALEGATE_VIEWER_TOKEN,
  }, { deadlineMs: deps.config.SCALEGATE_REQUEST_DEADLINE_MS });
  return app;
}
