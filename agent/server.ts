// The agent's HTTP API, called by the control plane's activities. It accepts only the credential of
// this agent's runtime (DESIGN.md §3 "Credentials"): not the shared agent token, not another
// runtime's credential. Before the agent has registered it has none, and answers 503.
import Fastify from 'fastify';
import { ApiError, frameworkErrorOptions, installErrorHandling } from '../http/errors';
import { defineRoute, ok, registerRoutes, type RuntimeAccess } from '../http/route';
import { CheckpointClockBodySchema, CutoverBodySchema, DrainQuerySchema, ProbeBodySchema, TaskParamsSchema, TaskStartBodySchema, type StopAnswer } from '../protocol';
import type { TaskHost } from './host';

export interface AgentServerOptions {
  id: string;
  /** this runtime's current credential; null until the agent has registered (the API answers 503) */
  credential: () => string | null;
  host: TaskHost;
  fence: () => number;
  labels: Record<string, string>;
}

export function buildAgentServer(options: AgentServerOptions) {
  const app = Fastify({ logger: false, ...frameworkErrorOptions });
  const { host } = options;
  /** Every route: the caller must be this very runtime's control plane, proven by its credential. */
  const self: RuntimeAccess = {
    idOf: () => options.id,
    credentialOf: () => {
      const credential = options.credential();
      if (credential === null) throw new ApiError('unavailable', `agent ${options.id} has not registered with the control plane yet; retry`);
      return credential;
    },
  };
  installErrorHandling(app, { onUnexpected: (error) => console.error(JSON.stringify({ at: new Date().toISOString(), runtime: options.id, event: 'unhandled error', error: error.message })) });
  const routes = [
    defineRoute({
      method: 'GET', path: '/v1/health', access: 'runtime', runtime: self, summary: 'agent health',
      handler: async () => ok({ id: options.id, fence: options.fence(), labels: options.labels, tasks: host.list().length }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/tasks', access: 'runtime', runtime: self, summary: 'tasks hosted here',
      handler: async () => ok({ tasks: host.list() }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/tasks/:taskId', access: 'runtime', runtime: self, summary: 'one task',
      params: TaskParamsSchema,
      handler: async ({ params }) => {
        const status = host.get(params.taskId);
        if (!status) throw new ApiError('not-found', `no task ${params.taskId} here`);
        return ok(status);
      },
    }),
    defineRoute({
      method: 'PUT', path: '/v1/tasks/:taskId', access: 'runtime', runtime: self, summary: 'start a task (idempotent)',
      params: TaskParamsSchema, body: TaskStartBodySchema,
      handler: async ({ params, body }) => {
        const outcome = await host.ensure({ ...body, taskId: params.taskId });
        return ok(outcome.status, outcome.created ? 201 : 200);
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/v1/tasks/:taskId', access: 'runtime', runtime: self, summary: 'drain and stop a task (idempotent)',
      params: TaskParamsSchema, query: DrainQuerySchema,
      handler: async ({ params, query }) => {
        const receipt = await host.drainTask(params.taskId, query);
        const answer: StopAnswer = receipt ? { state: 'stopped', receipt } : { state: 'absent' };
        return ok(answer);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/tasks/:taskId/checkpoint-clock', access: 'runtime', runtime: self,
      summary: "pause or resume a stream job's checkpoint clock (on its coordinator, the first sink subtask)",
      params: TaskParamsSchema, body: CheckpointClockBodySchema,
      handler: async ({ params, body }) => {
        const answer = await host.checkpointClock(params.taskId, body);
        if (!answer) throw new ApiError('not-found', `no task ${params.taskId} here`);
        return ok(answer);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/tasks/:taskId/cutover', access: 'runtime', runtime: self,
      summary: 'arm a stream subtask for a hot rescale at checkpoint barrier C (idempotent for the same C)',
      params: TaskParamsSchema, body: CutoverBodySchema,
      handler: async ({ params, body }) => {
        const answer = host.armCutover(params.taskId, body);
        if (!answer) throw new ApiError('not-found', `no task ${params.taskId} here`);
        return ok(answer);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/probe', access: 'runtime', runtime: self, summary: 'can this runtime reach a workload\'s source and destination, and every endpoint it requires',
      body: ProbeBodySchema,
      handler: async ({ body }) => ok(await host.probe(body.kind, body.spec, body.requires)),
    }),
  ];
  // No role token is accepted here: the agent token only registers a runtime with the control plane.
  registerRoutes(app, routes, {});
  return app;
}
