import { withinDeadline } from '../../http/deadline';
import type { ApiDeps } from '../deps';

/** readiness answers within 2 s even when a dependency hangs */
const READINESS_PROBE_MS = 1500;
import { defineRoute, ok } from '../../http/route';
import { LivenessSchema, ReadinessSchema } from '../../protocol';

export function healthRoutes(deps: ApiDeps) {
  return [
    defineRoute({
      method: 'GET', path: '/healthz', access: 'none', summary: 'liveness', operationId: 'getLiveness',
      response: { schema: LivenessSchema, status: { 200: 'the API process is up' } },
      handler: async (_ctx) => ok({ status: 'ok' }),
    }),
    defineRoute({
      method: 'GET', path: '/readyz', access: 'none', summary: 'readiness: Temporal and PostgreSQL reachable', operationId: 'getReadiness',
      response: { schema: ReadinessSchema, status: { 200: 'Temporal and PostgreSQL answer', 503: 'Temporal or PostgreSQL does not answer (which one is false)' } },
      handler: async (_ctx) => {
        // Each probe gets a short deadline of its own: a frozen dependency answers 503, not a hang.
        const probe = (what: string, work: Promise<unknown>) => withinDeadline(what, READINESS_PROBE_MS, work).then(() => true, () => false);
        const [postgres, temporal] = await Promise.all([
          probe('PostgreSQL', deps.db.query('select 1')),
          probe('Temporal', deps.temporal.reachable().then((up) => up || Promise.reject(new Error('unreachable')))),
        ]);
        const ready = postgres && temporal;
        return ok({ status: ready ? 'ready' : 'not-ready', postgres, temporal }, ready ? 200 : 503);
      },
    }),
  ];
}
