import type { ApiDeps } from '../deps';
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
        const [postgres, temporal] = await Promise.all([
          deps.db.query('select 1').then(() => true, () => false),
          deps.temporal.reachable(),
        ]);
        const ready = postgres && temporal;
        return ok({ status: ready ? 'ready' : 'not-ready', postgres, temporal }, ready ? 200 : 503);
      },
    }),
  ];
}
