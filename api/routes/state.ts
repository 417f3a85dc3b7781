import { z } from 'zod';
import type { ApiDeps } from '../deps';
import { defineRoute, ok } from '../route';

/** Running scalegate operations, from Temporal's visibility (the source of truth for what runs). */
export async function runningOperations(deps: ApiDeps) {
  try {
    const client = await deps.temporal.client();
    const operations = [];
    const query = `ExecutionStatus = "Running" AND TaskQueue = "${deps.config.SCALEGATE_TASK_QUEUE}"`;
    for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
      const attrs = wf.searchAttributes as Record<string, unknown[] | undefined>;
      operations.push({
        workflowId: wf.workflowId,
        runId: wf.runId,
        kind: wf.type,
        target: (attrs.ScalegateWorkload?.[0] as string | undefined) ?? wf.workflowId.split(':').slice(1).join(':'),
        phase: (attrs.ScalegatePhase?.[0] as string | undefined) ?? null,
        startedAt: wf.startTime.toISOString(),
      });
      if (operations.length >= 500) break;
    }
    return operations;
  } catch {
    return null; // Temporal unreachable: say so rather than claim nothing runs
  }
}

export function stateRoutes(deps: ApiDeps) {
  return [
    defineRoute({
      method: 'GET', path: '/v1/state', access: 'viewer',
      summary: 'runtimes, workloads with placements, unplaced, running operations, last reconcile',
      handler: async () => {
        await deps.runtimes.sweepExpired();
        const [runtimes, workloads, placements, unplaced, operations, reconcile] = await Promise.all([
          deps.runtimes.list(),
          deps.registry.listWorkloads(),
          deps.registry.listPlacements(),
          deps.registry.listUnplaced(),
          runningOperations(deps),
          deps.registry.reconcileMarker(),
        ]);
        const placementOf = Object.fromEntries(placements.map((p) => [p.workload, p]));
        return ok({
          runtimes: runtimes.map(({ tasks, ...r }) => ({ ...r, tasks: tasks.length })),
          workloads: workloads.map((w) => {
            const placement = placementOf[w.name];
            return {
              name: w.name, kind: w.kind, replicas: w.replicas, selector: w.selector, revision: w.revision,
              status: w.retired ? 'retired' : !placement ? 'pending' : unplaced.some((u) => u.workload === w.name) ? 'degraded' : 'placed',
              placement: placement
                ? { fence: placement.fence, generation: placement.generation, assignments: placement.assignments }
                : null,
            };
          }),
          unplaced,
          operations: operations ?? [],
          operationsAvailable: operations !== null,
          reconcile: { at: reconcile.at, skipped: reconcile.skipped, passes: reconcile.passes, skips: reconcile.skips },
        });
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/ledger', access: 'viewer', summary: 'scale events, newest first',
      query: z.object({
        workload: z.string().min(1).optional(),
        kind: z.string().min(1).optional(),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
      }),
      handler: async ({ query }) => ok({ events: await deps.ledger.list(query) }),
    }),
  ];
}
