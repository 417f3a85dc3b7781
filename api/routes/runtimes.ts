import { z } from 'zod';
import { HeartbeatSchema, RegisterRuntimeSchema, RuntimeParamsSchema } from '../../protocol';
import { StaleFenceError } from '../../store/runtimes';
import type { ApiDeps } from '../deps';
import { ApiError } from '../../http/errors';
import { defineRoute, ok } from '../../http/route';


export function runtimeRoutes(deps: ApiDeps) {
  const leaseTtlMs = deps.config.SCALEGATE_LEASE_TTL_MS;
  const leaseTerms = { leaseTtlMs, heartbeatIntervalMs: Math.floor(leaseTtlMs / 3) };

  const setCordon = (cordoned: boolean) => async ({ params }: { params: z.infer<typeof RuntimeParamsSchema> }) => {
    const runtime = await deps.runtimes.setCordoned(params.id, cordoned);
    if (!runtime) throw new ApiError('not-found', `no runtime ${params.id}`);
    return ok(runtime);
  };

  return [
    defineRoute({
      method: 'POST', path: '/v1/runtimes', access: 'agent', summary: 'register a runtime (agent)',
      body: RegisterRuntimeSchema,
      handler: async ({ body }) => {
        const runtime = await deps.runtimes.register(body, leaseTtlMs);
        return ok({ ...runtime, ...leaseTerms }, 201);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/heartbeat', access: 'agent',
      summary: 'renew the lease and report tasks; the answer lists revoked tasks',
      params: RuntimeParamsSchema, body: HeartbeatSchema,
      handler: async ({ params, body }) => {
        try {
          const runtime = await deps.runtimes.heartbeat(params.id, body.fence, body.tasks, leaseTtlMs);
          const placed = new Set(await deps.registry.tasksOnRuntime(params.id));
          const revoked = body.tasks.map((t) => t.taskId).filter((id) => !placed.has(id));
          return ok({ leaseExpiresAt: runtime.leaseExpiresAt, fence: runtime.fence, status: runtime.status, revoked, ...leaseTerms });
        } catch (error) {
          if (error instanceof StaleFenceError) {
            // A runtime that was declared LOST (or re-registered elsewhere) must register again; every
            // task it reports is revoked, and it must not act on its old fence.
            throw new ApiError(error.current === null ? 'not-found' : 'stale-fence', error.message, {
              currentFence: error.current,
              revoked: body.tasks.map((t) => t.taskId),
            });
          }
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/cordon', access: 'operator', summary: 'cordon: no new tasks',
      params: RuntimeParamsSchema, handler: setCordon(true),
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/uncordon', access: 'operator', summary: 'uncordon',
      params: RuntimeParamsSchema, handler: setCordon(false),
    }),
  ];
}
