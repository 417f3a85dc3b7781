// The agent's HTTP API, called by the control plane's activities with the shared agent token.
import Fastify, { FastifyError } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../api/errors';
import { defineRoute, ok, registerRoutes } from '../api/route';
import { DriverError } from './drivers/driver';
import type { TaskHost } from './host';

const TaskParams = z.object({ taskId: z.string().min(1).max(200).regex(/^[A-Za-z0-9._-]+$/) });
const TaskStartBody = z.object({
  workload: z.string().min(1),
  kind: z.enum(['service', 'consumer', 'stream']),
  index: z.int().min(0),
  generation: z.int().min(1),
  placementFence: z.int().min(0),
  spec: z.unknown(),
  partitions: z.array(z.int().min(0)).optional(),
});
const DrainQuery = z.object({
  graceMs: z.coerce.number().int().min(0).optional(),
  deadlineMs: z.coerce.number().int().min(0).optional(),
});
const ProbeBody = z.object({ kind: z.enum(['service', 'consumer', 'stream']), spec: z.unknown() });

const DRIVER_ERROR_STATUS: Record<string, number> = { 'placement-unavailable': 422, 'invalid-spec': 422, 'stale-generation': 409, 'drain-deadline': 504 };

export function buildAgentServer(options: { id: string; token: string; host: TaskHost; fence: () => number; labels: Record<string, string> }) {
  const app = Fastify({ logger: false });
  const { host } = options;
  app.setErrorHandler((error: FastifyError | ApiError | DriverError, _request, reply) => {
    if (error instanceof ApiError) return reply.status(error.status).send(error.toBody());
    if (error instanceof DriverError) return reply.status(DRIVER_ERROR_STATUS[error.code] ?? 422).send({ error: error.code, message: error.message });
    const status = (error as FastifyError).statusCode;
    if (status && status < 500) return reply.status(status).send({ error: 'bad-request', message: error.message });
    return reply.status(500).send({ error: 'internal', message: error.message });
  });
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
      params: TaskParams,
      handler: async ({ params }) => {
        const status = host.get(params.taskId);
        if (!status) throw new ApiError('not-found', `no task ${params.taskId} here`);
        return ok(status);
      },
    }),
    defineRoute({
      method: 'PUT', path: '/v1/tasks/:taskId', access: 'agent', summary: 'start a task (idempotent)',
      params: TaskParams, body: TaskStartBody,
      handler: async ({ params, body }) => {
        const outcome = await host.ensure({ ...body, taskId: params.taskId });
        return ok(outcome.status, outcome.created ? 201 : 200);
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/v1/tasks/:taskId', access: 'agent', summary: 'drain and stop a task (idempotent)',
      params: TaskParams, query: DrainQuery,
      handler: async ({ params, query }) => {
        const receipt = await host.remove(params.taskId, query);
        return ok(receipt ? { state: 'stopped', receipt } : { state: 'absent' });
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/probe', access: 'agent', summary: 'can this runtime reach a workload source and destination',
      body: ProbeBody,
      handler: async ({ body }) => ok(await host.probe(body.kind, body.spec)),
    }),
  ];
  registerRoutes(app, routes, { agent: options.token });
  return app;
}
