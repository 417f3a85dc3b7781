import { withinDeadline } from '../../http/deadline';
import type { ApiDeps } from '../deps';

/** readiness answers within 2 s even when a dependency hangs */
const READINESS_PROBE_MS = 1500;
import { defineRoute, ok } from '../../http/route';

export function healthRoutes(deps: ApiDeps) {
  return [
    defineRoute({
      method: 'GET', path: '/healthz', access: 'none', summary: 'liveness',
      handler: async () => ok({ status: 'ok' }),
    }),
    defineRoute({
      method: 'GET', path: '/readyz', access: 'none', summary: 'readiness: Temporal and PostgreSQL reachable',
      handler: async () => {
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
