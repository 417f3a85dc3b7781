// The one planning path: read a fleet snapshot from the stores, let domain/plan compute the plan,
// store it (apply checks its basis later). The API's plan route, the scale workflows (through the
// preparePlan activity) and the reconcile pass all plan through here.
import { capacityOf, roomOf, type FleetCapacity } from '../domain/gates';
import { beginPlacementPass, eligibleInPass, eligibleRuntimes, type RendezvousKeyCache } from '../domain/placement';
import { buildPlan, usedSlotsByOthers, type DecidedTarget, type FleetSnapshot, type Plan } from '../domain/plan';
import type { Placement, ReplicaCount, Workload } from '../protocol';
import type { PlanStore, StoredPlan } from './plans';
import type { RegistryStore } from './registry';
import type { RuntimeStore } from './runtimes';

export interface PlannerStores {
  runtimes: Pick<RuntimeStore, 'fleet'>;
  registry: Pick<RegistryStore, 'listPlacements' | 'listWorkloads' | 'getPlacement' | 'usedSlots'>;
  plans: Pick<PlanStore, 'save'>;
}

type PlanOptions = { newGeneration?: boolean; decided?: DecidedTarget; avoidRuntimes?: string[] };

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

  async function planOn(workload: Workload, replicas: ReplicaCount, options: PlanOptions) {
    const { avoidRuntimes, ...planOptions } = options;
    const fleet: FleetSnapshot & { usedSlots?: Record<string, number> } = workload.colocate ? await snapshot() : await snapshotFor(workload.name);
    // Runtimes that did not answer a moment ago (a stop-the-world found them unreachable) get nothing new.
    const runtimes = avoidRuntimes?.length ? fleet.runtimes.filter((r) => !avoidRuntimes.includes(r.id)) : fleet.runtimes;
    const nowMs = now();
    const pass = keys ? beginPlacementPass(runtimes, nowMs, { keys }) : undefined;
    return { plan: buildPlan({ workload, replicas, ...fleet, runtimes, nowMs, pass, ...planOptions }), runtimes, nowMs, pass, fleet };
  }

  return {
    snapshot,

    /**
     * Plans a replica change of one workload on the current basis and stores it. `decided` takes a
     * target chosen elsewhere (scale-in) instead of placing; it throws DecisionStaleError when the
     * placement moved since that decision.
     */
    async plan(workload: Workload, replicas: ReplicaCount, options: PlanOptions = {}): Promise<StoredPlan> {
      return stores.plans.save((await planOn(workload, replicas, options)).plan);
    },

    /**
     * plan(), and the room its fleet had for the workload, counted as the capacity gate counts it:
     * a scale-out's gates judge the fleet its plan was placed on, without reading it again.
     */
    async planWithCapacity(workload: Workload, replicas: ReplicaCount, options: PlanOptions = {}): Promise<StoredPlan & { capacity: FleetCapacity }> {
      const { plan, runtimes, nowMs, pass, fleet } = await planOn(workload, replicas, options);
      const eligible = pass ? eligibleInPass(pass, workload.selector) : eligibleRuntimes(runtimes, workload, nowMs);
      const own = fleet.placements.find((p) => p.workload === workload.name)?.assignments ?? [];
      const usedByOthers = fleet.usedSlots ?? usedSlotsByOthers(workload.name, fleet.placements);
      return { ...(await stores.plans.save(plan)), capacity: capacityOf(roomOf(eligible, usedByOthers, own)) };
    },

    /** Stores plans computed on a snapshot this planner read (the reconcile pass decides many at once). */
    save: (plan: Plan): Promise<StoredPlan> => stores.plans.save(plan),
  };
}
export type Planner = ReturnType<typeof createPlanner>;
