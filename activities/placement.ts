// Placement activities: store reads the workflows start from, planning through the one planner,
// and the fenced placement write.
import { ApplicationFailure } from '@temporalio/activity';
import { DecisionStaleError, type DecidedTarget } from '../domain/plan';
import type { Assignment, Placement, ReplicaCount, Unplaced, Workload } from '../protocol';
import { DuplicateTaskIdError, StalePlacementError } from '../store/registry';
import { createPlanner } from '../store/planner';
import { lookups, type ActivityDeps } from './ports';
import { createRendezvous, type Rendezvous } from './rendezvous-threads';

/** A refusal the caller must plan (or decide) again for: non-retryable `stale-plan`. */
function stalePlan(error: unknown): never {
  if (error instanceof StalePlacementError || error instanceof DecisionStaleError) {
    throw ApplicationFailure.create({ type: 'stale-plan', message: error.message, nonRetryable: true });
  }
  if (error instanceof DuplicateTaskIdError) throw ApplicationFailure.create({ type: error.code, message: error.message, nonRetryable: true });
  throw error;
}

export function placementActivities(deps: ActivityDeps, rendezvous: Rendezvous = createRendezvous()) {
  const { runtimes, registry, plans } = deps.stores;
  const planner = createPlanner(deps.stores, deps.now, rendezvous.keys);
  const { requireWorkload } = lookups(deps);

  return {
    /** A store round trip: proves the worker reaches PostgreSQL. */
    async storePing(): Promise<{ runtimes: number; ready: number; workloads: number }> {
      const all = await runtimes.list();
      const workloads = await registry.listWorkloads();
      return { runtimes: all.length, ready: all.filter((r) => r.status === 'READY').length, workloads: workloads.length };
    },

    async loadWorkload(name: string): Promise<Workload | null> {
      return registry.getWorkload(name);
    },

    async loadPlacement(name: string): Promise<Placement | null> {
      return registry.getPlacement(name);
    },

    /** A rollout rolled back: `revision`'s spec is the workload's current one again (idempotent). */
    async restoreRevision(input: { workload: string; revision: string }): Promise<Workload> {
      return registry.restoreRevision(input.workload, input.revision).catch((error: Error) => {
        throw ApplicationFailure.create({ type: 'invalid-input', message: error.message, nonRetryable: true });
      });
    },

    async loadPlan(planId: string) {
      const plan = await plans.get(planId);
      if (!plan) throw ApplicationFailure.create({ type: 'not-found', message: `no plan ${planId}`, nonRetryable: true });
      return plan;
    },

    /**
     * Plans a change on the current basis and stores it (so apply can check the basis). `decided`
     * is a target the workflow chose itself (scale-in's survivors); it is refused as `stale-plan`
     * when the placement moved since the workflow read it.
     */
    async preparePlan(input: { workload: string; replicas: ReplicaCount; newGeneration?: boolean; decided?: DecidedTarget; avoidRuntimes?: string[] }) {
      const workload = await requireWorkload(input.workload);
      // with the room its fleet had: a scale-out's capacity gate judges that (the workflows that do not, ignore it)
      return planner.planWithCapacity(workload, input.replicas, { newGeneration: input.newGeneration, decided: input.decided, avoidRuntimes: input.avoidRuntimes }).catch(stalePlan);
    },

    /**
     * The fenced write: refuses (non-retryable `stale-plan`) when the workload's registry revision
     * or its placement fence moved since the plan was made; otherwise compare-and-set on the fence.
     * Safe to retry after it took effect (same plan id). Records or clears the unplaced entry.
     */
    async commitPlacement(input: {
      workload: string;
      basis: { registryRevision: number; placementFence: number };
      assignments: Assignment[];
      generation: number;
      unplaced: Unplaced | null;
      writer: string;
      /** the plan being applied: a retried write recognises its own earlier success by it */
      planId: string;
      /** the operation's result, written as the workload's desired replicas in the same transaction */
      desiredReplicas?: ReplicaCount;
    }): Promise<Placement> {
      const placement = await registry
        .commitPlacement(input.workload, input.basis, input.assignments, {
          generation: input.generation, writer: input.writer, planId: input.planId, desiredReplicas: input.desiredReplicas,
        })
        .catch(stalePlan);
      if (input.unplaced) {
        await registry.setUnplaced({ ...input.unplaced, detail: `${input.unplaced.missing} replica(s) have no eligible runtime` });
        await registry.emitEvent('placement.pending', input.workload, { missing: input.unplaced.missing, reason: input.unplaced.reason });
      } else {
        await registry.clearUnplaced(input.workload);
      }
      return placement;
    },

    /** Retirement: an empty placement (fenced on whatever is current) and no unplaced entry. */
    async clearPlacement(input: { workload: string; writer: string }): Promise<void> {
      const current = await registry.getPlacement(input.workload);
      await registry.writePlacement(input.workload, current?.fence ?? 0, [], { writer: input.writer });
      await registry.clearUnplaced(input.workload);
    },
  };
}
