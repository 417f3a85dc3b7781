// The reconcile pass: skips itself with one cheap read when nothing it decides from moved;
// otherwise reads one fleet snapshot, lets domain/reconcile decide, and stores the plans.
import { beginPlacementPass } from '../domain/placement';
import { decideReconcile, workloadsToPlace } from '../domain/reconcile';
import { createPlanner } from '../store/planner';
import type { ActivityDeps } from './ports';
import { createRendezvous, type Rendezvous } from './rendezvous-threads';

export interface ReconcilePassResult {
  skipped: boolean;
  inputsKey: string;
  /** plans (stored, with ids) for workloads whose placement the pass decided to change */
  planIds: { workload: string; planId: string }[];
}

export function reconcileActivities(deps: ActivityDeps, rendezvous: Rendezvous = createRendezvous()) {
  const { registry } = deps.stores;
  const planner = createPlanner(deps.stores, deps.now);

  return {
    /**
     * One reconcile pass. Skips itself (one cheap read) when nothing it decides from moved: the
     * registry revision, the placement sequence and the set of fresh runtimes. Otherwise it plans
     * pending workloads, `all` workloads whose eligible set grew, and unplaced shortfalls.
     * With `deferMarker` a pass that planned leaves the skip marker to recordReconcilePass, which
     * the loop calls once the applies it decided on have started: a pass that dies in between is
     * then simply done again, never skipped.
     */
    async reconcilePass(input: { deferMarker?: boolean } = {}): Promise<ReconcilePassResult> {
      const inputsKey = await registry.reconcileInputsKey();
      const marker = await registry.reconcileMarker();
      if (marker.inputsKey === inputsKey) {
        await registry.recordReconcile(inputsKey, true);
        return { skipped: true, inputsKey, planIds: [] };
      }
      const [fleet, unplaced] = await Promise.all([planner.snapshot(), registry.listUnplaced()]);
      const nowMs = deps.now();
      // Keys the process has not kept yet (a cold pass: many pending workloads) on every core first.
      const pass = beginPlacementPass(fleet.runtimes, nowMs, { keys: rendezvous.keys });
      const snapshot = { ...fleet, unplaced: unplaced.map((u) => u.workload), nowMs, pass };
      await rendezvous.threads.fill(pass, workloadsToPlace(snapshot));
      const planIds: ReconcilePassResult['planIds'] = [];
      for (const decision of decideReconcile(snapshot)) {
        if (decision.action !== 'plan') continue;
        const stored = await planner.save(decision.plan);
        planIds.push({ workload: decision.workload, planId: stored.id });
      }
      if (!input.deferMarker) await registry.recordReconcile(inputsKey, false);
      return { skipped: false, inputsKey, planIds };
    },

    /**
     * Records a pass whose decided applies have all started, so the next pass may skip. An apply
     * that could not start because its workload's `scale:<name>` id was busy (a rollout, a scale)
     * left its change undone: the pass is recorded under a key no later pass matches, so the next
     * one runs in full and plans it again. Recorded as seen, it would be skipped until something
     * else moved (scale-in.test's consumer, defined while a rollout held its id, was never placed).
     */
    async recordReconcilePass(input: { inputsKey: string; busy?: string[] }): Promise<void> {
      const busy = input.busy ?? [];
      await registry.recordReconcile(busy.length ? `busy:${busy.join(',')}` : input.inputsKey, false);
    },
  };
}
