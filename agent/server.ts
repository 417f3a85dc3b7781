// The agent's HTTP API, called by the control plane's activities with the shared agent token.
import Fastify from 'fastify';
import { ApiError, installErrorHandling } from '../http/errors';
import { defineRoute, ok, registerRoutes } from '../http/route';
import { DrainQuerySchema, ProbeBodySchema, TaskParamsSchema, TaskStartBodySchema, type StopAnswer } from '../protocol';
import type { TaskHost } from './host';

export function buildAgentServer(options: { id: string; token: string; host: TaskHost; fence: () => number; labels: Record<string, string> }) {
  const app = Fastify({ logger: false });
  const { host } = options;
  installErrorHandling(app, { onUnexpected: (error) => console.error(JSON.stringify({ at: new Date().toISOString(), runtime: options.id, event: 'unhandled error', error: error.message })) });
  const routes = [
    defineRoute({
      method: 'GET', path: '/v1/health', access: 'agent', summary: 'agent health',
      handler: async () => ok({ id: options.id, fence: options.fence(), labels: options.labels, tasks: host.list().length }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/tasks', access: 'agent', summary: 'tasks hosted here',
      handler: async () => ok({ tasks: host.list() }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/tasks/:taskId', access: 'agent', summary: 'one task',
      params: TaskParamsSchema,
      handler: async ({ params }) => {
        const status = host.get(params.taskId);
        if (!status) throw new ApiError('not-found', `no task ${params.taskId} here`);
        return ok(status);
      },
    }),
    defineRoute({
      method: 'PUT', path: '/v1/tasks/:taskId', access: 'agent', summary: 'start a task (idempotent)',
      params: TaskParamsSchema, body: TaskStartBodySchema,
      handler: async ({ params, body }) => {
        const outcome = await host.ensure({ ...body, taskId: params.taskId });
        return ok(outcome.status, outcome.created ? 201 : 200);
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/v1/tasks/:taskId', access: 'agent', summary: 'drain and stop a task (idempotent)',
      params: TaskParamsSchema, query: DrainQuerySchema,
      handler: async ({ params, query }) => {
        const receipt = await host.remove(params.taskId, query);
        const answer: StopAnswer = receipt ? { state: 'stopped', receipt } : { state: 'absent' };
        return ok(answer);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/probe', access: 'agent', summary: 'can this runtime reach a workload source and destination',
      body: ProbeBodySchema,
      handler: async ({ body }) => ok(await host.probe(body.kind, body.spec)),
    }),
  ];
  registerRoutes(app, routes, { agent: options.token });
  return app;
}
