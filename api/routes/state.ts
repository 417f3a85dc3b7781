import { LedgerPageSchema, LedgerQuerySchema, NODE_NOT_READY_EVENT, PHASE_KEY, StateSchema, WORKLOAD_KEY } from '../../protocol';
import { replicaCounts } from '../../domain/replicas';
import { assignmentKey, crashLoopingTasks, placedTask, reportsByAssignment, type CrashLoopAction, type RecordedCrashLoopDecision } from '../../domain/supervision';
import type { StoredEvent } from '../../store/registry';
import type { ApiDeps } from '../deps';
import { defineRoute, ok } from '../../http/route';

/** Running scalegate operations, from Temporal's visibility (the source of truth for what runs). */
export async function runningOperations(deps: ApiDeps) {
  try {
    const client = await deps.temporal.client();
    const operations = [];
    const query = `ExecutionStatus = "Running" AND TaskQueue = "${deps.config.SCALEGATE_TASK_QUEUE}"`;
    for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
      operations.push({
        workflowId: wf.workflowId,
        runId: wf.runId,
        kind: wf.type,
        target: wf.typedSearchAttributes.get(WORKLOAD_KEY) ?? wf.workflowId.split(':').slice(1).join(':'),
        phase: wf.typedSearchAttributes.get(PHASE_KEY) ?? null,
        startedAt: wf.startTime.toISOString(),
      });
      if (operations.length >= 500) break;
    }
    return operations;
  } catch {
    return null; // Temporal unreachable: say so rather than claim nothing runs
  }
}

/** The events /v1/state lists: runtimes declared LOST, mass expiries, tasks reported crash-looping. */
const RUNTIME_EVENTS = ['runtime.lost', 'mass-expiry', 'task.crash-looping', 'task.crash-loop-decided', NODE_NOT_READY_EVENT];
/** How many of the newest crash-loop decisions `state` reads to name each crash-looping task's. */
const CRASH_LOOP_DECISIONS_READ = 200;

export function stateRoutes(deps: ApiDeps) {
  return [
    defineRoute({
      method: 'GET', path: '/v1/state', access: 'viewer', operationId: 'getState',
      summary: 'runtimes, workloads with placements, unplaced, running operations, last reconcile',
      response: { schema: StateSchema, status: { 200: 'the state' } },
      handler: async (_ctx) => {
        // A read: leases are judged by the lease sweeper workflow, never here.
        const [runtimes, workloads, placements, unplaced, operations, reconcile, liveness, runtimeEvents, decisionEvents] = await Promise.all([
          deps.runtimes.list(),
          deps.registry.listWorkloads(),
          deps.registry.listPlacements(),
          deps.registry.listUnplaced(),
          runningOperations(deps),
          deps.registry.reconcileMarker(),
          deps.runtimes.liveness(),
          deps.registry.recentEvents(RUNTIME_EVENTS, 20),
          deps.registry.recentEvents(['task.crash-loop-decided'], CRASH_LOOP_DECISIONS_READ),
        ]);
        const livenessOf = (component: string) => {
          const row = liveness.find((l) => l.component === component);
          return row ? { at: row.at, resumedAt: row.resumedAt } : null;
        };
        const placementOf = Object.fromEntries(placements.map((p) => [p.workload, p]));
        const counts = replicaCounts(workloads, placements, runtimes, Date.now());
        // Supervision (DESIGN.md §3): each assignment's task as reported, and the crash-looping ones with their reason.
        const reports = reportsByAssignment(runtimes);
        const crashLooping = crashLoopingTasks(placements, runtimes, decisionEvents.map(recordedDecision));
        return ok({
          runtimes: runtimes.map(({ tasks, ...r }) => ({ ...r, tasks: tasks.length })),
          workloads: workloads.map((w) => {
            const placement = placementOf[w.name];
            return {
              // desired (what operations decided: reconcile and recovery restore it; `all`: the matching
              // fresh runtimes) beside placed (what the placement holds) and ready (what its agents report ready)
              name: w.name, kind: w.kind, replicas: w.replicas, ...counts[w.name],
              selector: w.selector, revision: w.revision, runs: w.runs ?? null,
              status: w.retired ? 'retired' : !placement ? 'pending'
                : unplaced.some((u) => u.workload === w.name) || crashLooping.some((c) => c.workload === w.name) ? 'degraded' : 'placed',
              placement: placement
                ? { fence: placement.fence, generation: placement.generation, assignments: placement.assignments }
                : null,
              tasks: (placement?.assignments ?? []).map((a) => ({ ...placedTask(a, reports.get(assignmentKey(a))), revision: w.runs ? a.revision ?? w.runs : null })),
            };
          }),
          unplaced,
          crashLooping,
          operations: operations ?? [],
          operationsAvailable: operations !== null,
          reconcile: { at: reconcile.at, skipped: reconcile.skipped, passes: reconcile.passes, skips: reconcile.skips },
          // When the API and the lease sweeper last showed they were alive, and came back from a gap.
          controlPlane: {
            leaseTtlMs: liveness.find((l) => l.component === 'api')?.leaseTtlMs ?? deps.config.SCALEGATE_LEASE_TTL_MS,
            api: livenessOf('api'),
            leaseSweeper: livenessOf('lease-sweeper'),
          },
          // The newest runtime events: declared LOST (by whom), mass expiries (held, not recovered), a cluster's NotReady nodes.
          runtimeEvents,
        });
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/ledger', access: 'viewer', summary: 'scale events, newest first', operationId: 'listLedgerEvents',
      query: LedgerQuerySchema, response: { schema: LedgerPageSchema, status: { 200: 'the newest events that match, newest first' } },
      handler: async ({ query }) => ok({ events: await deps.ledger.list(query) }),
    }),
  ];
}

/** A `task.crash-loop-decided` event as crashLoopingTasks reads it. */
function recordedDecision(event: StoredEvent): RecordedCrashLoopDecision {
  const { runtimeId, action, reason } = event.detail as { runtimeId?: string; action?: CrashLoopAction; reason?: string };
  return { taskId: event.subject, runtimeId: runtimeId ?? '', action: action ?? 'none', reason: reason ?? '' };
}
