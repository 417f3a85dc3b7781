// Runtimes: registration, heartbeats, cordons, recovery (DESIGN.md §3 "Credentials", "Static
// stability", §6). The agent token only registers a new runtime (or one whose lease lapsed, or that
// was declared LOST); a live runtime re-registers, and heartbeats, with its own credential, issued at
// registration and returned once. A heartbeat's answer revokes only what a decision moved away: the
// reported tasks no placement assigns to that runtime, also when its fence is stale (it was declared
// LOST): the rest it keeps running while it registers again.
import { z } from 'zod';
import { HeartbeatRenewalSchema, HeartbeatSchema, RegisterRuntimeSchema, RegistrationSchema, RuntimeParamsSchema, RuntimeViewSchema, StartedOperationSchema } from '../../protocol';
import { newRuntimeCredential, RuntimeLiveError, StaleFenceError } from '../../store/runtimes';
import { recoverRuntime } from '../../workflows/recover-runtime';
import { startOperation, wakeReconcileLoop } from '../operations';
import { reportCrashLoopingTasks, reportFailedSubtasks } from '../task-reports';
import type { ApiDeps } from '../deps';
import { ApiError } from '../../http/errors';
import { defineRoute, ok, type RuntimeAccess } from '../../http/route';

export function runtimeRoutes(deps: ApiDeps) {
  const leaseTtlMs = deps.config.SCALEGATE_LEASE_TTL_MS;
  const leaseTerms = { leaseTtlMs, heartbeatIntervalMs: Math.floor(leaseTtlMs / 3) };
  /** The runtime named by the path must present its own credential. */
  const pathRuntime: RuntimeAccess = { credentialOf: (id) => deps.runtimes.credentialOf(id) };
  /** Registration names its runtime in the body. */
  const bodyRuntime: RuntimeAccess = { ...pathRuntime, idOf: ({ body }) => (body as { id?: unknown } | null)?.id };

  /** The reported tasks that no placement assigns to the runtime: what a decision moved away (or never placed there). */
  const revokedOf = (placedTaskIds: string[], tasks: { taskId: string }[]) => {
    const placed = new Set(placedTaskIds);
    return tasks.map((t) => t.taskId).filter((taskId) => !placed.has(taskId));
  };

  const setCordon = (cordoned: boolean) => async ({ params }: { params: z.infer<typeof RuntimeParamsSchema> }) => {
    const runtime = await deps.runtimes.setCordoned(params.id, cordoned);
    if (!runtime) throw new ApiError('not-found', `no runtime ${params.id}`);
    return ok(runtime);
  };

  return [
    defineRoute({
      method: 'POST', path: '/v1/runtimes', access: 'agent-or-runtime', runtime: bodyRuntime,
      summary: 'register a runtime: with the agent token a new (or lapsed) one, 201 with its credential; with its own credential a live one resumes (200)',
      body: RegisterRuntimeSchema, operationId: 'registerRuntime',
      response: { schema: RegistrationSchema, status: { 201: 'registered: a new fence and the runtime\'s credential (shown once)', 200: 'resumed with its own credential: same fence, no credential' } },
      errors: [409],
      handler: async ({ body, runtime: caller, request }) => {
        if (caller) {
          // Its own credential: resume. Same fence, same credential, nothing revoked.
          const resumed = await deps.runtimes.resume(body, caller.credential, leaseTtlMs);
          if (resumed.runtime) return ok({ ...resumed.runtime, ...leaseTerms, resumed: true });
          if (resumed.refused === 'expired') {
            throw new ApiError('credential-expired', `the lease of runtime ${body.id} lapsed; register it again with the agent token for a new credential`);
          }
          throw new ApiError('invalid-credential', `the bearer token is not the current credential of runtime ${body.id}`);
        }
        // The agent token: a new runtime, or one whose lease lapsed. A new credential, a new fence.
        const credential = newRuntimeCredential();
        try {
          const runtime = await deps.runtimes.register(body, leaseTtlMs, credential);
          // a new runtime: `all` workloads grow onto it, unplaced shortfalls may fit
          wakeReconcileLoop(deps, request.log);
          return ok({ ...runtime, ...leaseTerms, credential, resumed: false }, 201);
        } catch (error) {
          if (error instanceof RuntimeLiveError) throw new ApiError('runtime-live', error.message);
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/heartbeat', access: 'runtime', runtime: pathRuntime,
      summary: 'renew the lease and report tasks (the runtime\'s own credential); the answer lists the reported tasks no placement assigns to it (revoked)',
      params: RuntimeParamsSchema, body: HeartbeatSchema, operationId: 'heartbeatRuntime',
      response: { schema: HeartbeatRenewalSchema, status: { 200: 'the lease is renewed' } }, errors: [404, 409],
      handler: async ({ params, body, request }) => {
        try {
          const runtime = await deps.runtimes.heartbeat(params.id, body.fence, body.tasks, leaseTtlMs);
          const revoked = revokedOf(runtime.placedTaskIds, body.tasks);
          // The lease is renewed whatever happens here: a report that cannot be made now is made at the next heartbeat.
          await reportFailedSubtasks(deps, params.id, body.tasks).then(
            (signalled) => signalled.forEach((workflowId) => request.log.warn({ runtime: params.id, workflowId }, 'stream subtask failed: reported')),
            (error: Error) => request.log.error({ runtime: params.id, err: error }, 'stream subtask failure could not be reported'),
          );
          // Not awaited: the answer (and so the agent's next renewal) never waits on Temporal for it.
          void reportCrashLoopingTasks(deps, params.id, body.tasks).catch(
            (error: Error) => request.log.error({ runtime: params.id, err: error }, 'crash-looping task could not be reported'),
          );
          return ok({ leaseExpiresAt: runtime.leaseExpiresAt, fence: runtime.fence, status: runtime.status, revoked, ...leaseTerms });
        } catch (error) {
          if (error instanceof StaleFenceError) {
            // Declared LOST (or registered again elsewhere): its old fence renews nothing and it must
            // register again. Revoked are only the reported tasks recovery moved elsewhere (no
            // placement assigns them to this runtime): the others it legitimately runs, and keeps.
            throw new ApiError(error.current === null ? 'not-found' : 'stale-fence', error.message, {
              currentFence: error.current,
              status: error.status,
              revoked: error.current === null ? body.tasks.map((t) => t.taskId) : revokedOf(error.placedTaskIds, body.tasks),
            });
          }
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/cordon', access: 'operator', summary: 'cordon: no new tasks', operationId: 'cordonRuntime',
      response: { schema: RuntimeViewSchema, status: { 200: 'the runtime, cordoned' } }, errors: [404],
      params: RuntimeParamsSchema, handler: setCordon(true),
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/uncordon', access: 'operator', summary: 'uncordon', operationId: 'uncordonRuntime',
      response: { schema: RuntimeViewSchema, status: { 200: 'the runtime, no longer cordoned' } }, errors: [404],
      params: RuntimeParamsSchema, handler: setCordon(false),
    }),
    defineRoute({
      method: 'POST', path: '/v1/runtimes/:id/recover', access: 'operator', startsOperation: true,
      summary: 'start recoverRuntime (recover:<id>): declare the runtime LOST, move its work to eligible runtimes; 409 while one runs',
      params: RuntimeParamsSchema, operationId: 'recoverRuntime',
      response: { schema: StartedOperationSchema, status: { 202: 'recoverRuntime started under recover:<id>' } }, errors: [404],
      handler: async ({ params , request }) => {
        const runtime = await deps.runtimes.get(params.id);
        if (!runtime) throw new ApiError('not-found', `no runtime ${params.id}`);
        const started = await startOperation(deps, { request,
          workflow: recoverRuntime, workflowId: `recover:${params.id}`,
          input: { runtime: params.id, reason: 'requested via API', by: 'operator' },
          summary: `recover ${params.id} (${runtime.status}, requested via API)`,
        });
        return ok(started, 202);
      },
    }),
  ];
}
