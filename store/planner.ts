// The one planning path: read a fleet snapshot from the stores, let domain/plan compute the plan,
// store it (apply checks its basis later). The API's plan route, the scale workflows (through the
// preparePlan activity) and the reconcile pass all plan through here.
import { beginPlacementPass, type RendezvousKeyCache } from '../domain/placement';
import { buildPlan, type DecidedTarget, type FleetSnapshot, type Plan } from '../domain/plan';
import type { Placement, ReplicaCount, Workload } from '../protocol';
import type { PlanStore, StoredPlan } from './plans';
import type { RegistryStore } from './registry';
import type { RuntimeStore } from './runtimes';

export interface PlannerStores {
  runtimes: Pick<RuntimeStore, 'fleet'>;
  registry: Pick<RegistryStore, 'listPlacements' | 'listWorkloads' | 'getPlacement' | 'usedSlots'>;
  plans: Pick<PlanStore, 'save'>;
}

/** `keys`: rendezvous keys kept across plans by the process (activities/rendezvous-threads.ts). */
export function createPlanner(stores: PlannerStores, now: () => number = Date.now, keys?: RendezvousKeyCache) {
  async function snapshot(): Promise<FleetSnapshot> {
    const [runtimes, placements, workloads] = await Promise.all([stores.runtimes.fleet(), stores.registry.listPlacements(), stores.registry.listWorkloads()]);
    return { runtimes, placements, workloads };
  }

  /**
   * What one workload's plan reads when it has no colocation group to find: the runtimes, its own
   * placement and the others' replicas per runtime (counted by the database), not every placement
   * and workload: an operation's cost then grows with the runtimes, not with the workloads.
   */
  async function snapshotFor(workload: string): Promise<FleetSnapshot & { placement: Placement | null; usedSlots: Record<string, number> }> {
    const [runtimes, placement, usedSlots] = await Promise.all([stores.runtimes.fleet(), stores.registry.getPlacement(workload), stores.registry.usedSlots({ except: workload })]);
    return { runtimes, placements: placement ? [placement] : [], workloads: [], placement, usedSlots };
  }

  return {
    snapshot,

    /**
     * Plans a replica change of one workload on the current basis and stores it. `decided` takes a
     * target chosen elsewhere (scale-in) instead of placing; it throws DecisionStaleError when the
     * placement moved since that decision.
     */
    async plan(workload: Workload, replicas: ReplicaCount, options: { newGeneration?: boolean; decided?: DecidedTarget; avoidRuntimes?: string[] } = {}): Promise<StoredPlan> {
      const { avoidRuntimes, ...planOptions } = options;
      const fleet = workload.colocate ? await snapshot() : await snapshotFor(workload.name);
      // Runtimes that did not answer a moment ago (a stop-the-world found them unreachable) get nothing new.
      const runtimes = avoidRuntimes?.length ? fleet.runtimes.filter((r) => !avoidRuntimes.includes(r.id)) : fleet.runtimes;
      const nowMs = now();
      const pass = keys ? beginPlacementPass(runtimes, nowMs, { keys }) : undefined;
      return stores.plans.save(buildPlan({ workload, replicas, ...fleet, runtimes, nowMs, pass, ...planOptions }));
    },

    /** Stores plans computed on a snapshot this planner read (the reconcile pass decides many at once). */
    save: (plan: Plan): Promise<StoredPlan> => stores.plans.save(plan),
  };
}
export type Planner = ReturnType<typeof createPlanner>;
