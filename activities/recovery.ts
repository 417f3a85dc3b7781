// Recovery activities (DESIGN.md §3 "Static stability", §4.4): the lease sweep (its guards, the
// declaration of LOST, mass-expiry holds) and recoverRuntime's declaration, decision and plans.
// The decisions are domain/recovery.ts's; these only read and write the stores.
import { ApplicationFailure } from '@temporalio/activity';
import { beginPlacementPass } from '../domain/placement';
import { decideCrashLoop, reportsByAssignment, type CrashLoopDecision } from '../domain/supervision';
import { controlPlaneGuard, decideSweep, planRecovery, type MassExpiry, type SweepGuard, type WorkloadRecovery } from '../domain/recovery';
import type { StoredPlan } from '../store/plans';
import { createPlanner } from '../store/planner';
import { idempotencyKey, type ActivityDeps } from './ports';
import { createRendezvous, type Rendezvous } from './rendezvous-threads';

/** The pause between passes while no API has said which lease it hands out. */
export const SWEEP_IDLE_MS = 2_000;

export interface SweepPassResult {
  /** why nothing was declared in this pass (null: leases were judged) */
  guard: SweepGuard | null;
  /** the lease the API hands out (null: no API has recorded its liveness yet) */
  leaseTtlMs: number | null;
  /** when to pass again: a third of the lease */
  nextPassInMs: number;
  /** runtimes declared LOST in this pass, with their new fence */
  declared: { runtimeId: string; fence: number; leaseExpiresAt: string }[];
  /** zones found in a mass expiry in this pass, and the runtimes newly held */
  massExpiry: (MassExpiry & { held: string[] })[];
  /** recoveries due: the runtimes declared now, and LOST runtimes some placement still assigns work to */
  recover: { runtimeId: string; fence: number; reason: string }[];
  /** every runtime LOST now */
  lost: string[];
  /** expired runtimes the guard kept from being declared */
  waiting: string[];
}

export interface RecoveryItem {
  decision: WorkloadRecovery;
  /** the stored plan of the decided target (null: nothing to write) */
  plan: StoredPlan | null;
}

export interface PreparedRecovery {
  runtime: { id: string; status: string; fence: number };
  items: RecoveryItem[];
}

export interface MarkedLost {
  outcome: 'declared' | 'already-lost' | 'came-back';
  runtime: { id: string; status: string; fence: number; lostAt: string | null; labels: Record<string, string> };
}

export function recoveryActivities(deps: ActivityDeps, rendezvous: Rendezvous = createRendezvous()) {
  const { runtimes, sinkAudit, registry } = deps.stores;
  const planner = createPlanner(deps.stores, deps.now);

  /**
   * Recovery's decisions and plans for the work `runtimeId` holds (of `only`), as if it were lost,
   * on one snapshot; a consumer's stored owner is what the offsets table names.
   */
  async function planOff(runtimeId: string, only?: string[]) {
    const snapshot = await planner.snapshot();
    const runtime = snapshot.runtimes.find((r) => r.id === runtimeId);
    if (!runtime) throw ApplicationFailure.create({ type: 'unknown-runtime', message: `runtime ${runtimeId} is not registered`, nonRetryable: true });
    const consumers = new Set(snapshot.workloads.filter((w) => w.kind === 'consumer').map((w) => w.name));
    const storedOwners: Record<string, number[]> = {};
    for (const placement of snapshot.placements) {
      if (!consumers.has(placement.workload) || (only && !only.includes(placement.workload))) continue;
      const lostTasks = placement.assignments.filter((a) => a.runtimeId === runtimeId).map((a) => a.taskId);
      if (!lostTasks.length) continue;
      storedOwners[placement.workload] = (await sinkAudit.partitionsOwnedBy(placement.workload, lostTasks)).map((o) => o.partition);
    }
    const nowMs = deps.now();
    const pass = beginPlacementPass(snapshot.runtimes, nowMs, { keys: rendezvous.keys });
    return { snapshot, ...planRecovery({ runtimeId, ...snapshot, nowMs, storedOwners, only, pass }) };
  }

  return {
    /**
     * One pass of the lease sweeper, on the database's clock: records the pass, applies the guards
     * (the API away, or back or the sweeper back less than a lease ago: nothing is declared), holds
     * the zones in a mass expiry (event `mass-expiry`), declares the other expired runtimes LOST (a
     * compare-and-set on their fence; event `runtime.lost`) and answers which recoveries are due.
     */
    async sweepLeases(): Promise<SweepPassResult> {
      const view = await runtimes.beginSweep();
      const lost = await runtimes.lostIds();
      if (view.leaseTtlMs === null) {
        const guard: SweepGuard = { code: 'api-never-seen', detail: 'no API has recorded its liveness (and lease) yet' };
        return { guard, leaseTtlMs: null, nextPassInMs: SWEEP_IDLE_MS, declared: [], massExpiry: [], recover: [], lost, waiting: [] };
      }
      const leaseTtlMs = view.leaseTtlMs;
      const guard = controlPlaneGuard({ nowMs: view.nowMs, leaseTtlMs, api: view.api, sweeper: view.sweeper });
      const decision = decideSweep({ nowMs: view.nowMs, leaseTtlMs, runtimes: view.runtimes, guard });
      const massExpiry: SweepPassResult['massExpiry'] = [];
      for (const zone of decision.massExpiry) {
        const held = await runtimes.holdForMassExpiry(zone.zone, zone.suspects, {
          population: zone.population, expired: zone.expired, suspects: zone.suspects, leaseTtlMs,
          why: `${zone.suspects.length} of the ${zone.population} fresh runtime(s) of zone "${zone.zone}" expired at once: none is recovered automatically (POST /v1/runtimes/:id/recover still works)`,
        });
        massExpiry.push({ ...zone, held });
      }
      const declared = (await runtimes.declareExpired(decision.declare, 'lease-sweeper'))
        .map((d) => ({ runtimeId: d.id, fence: d.fence, leaseExpiresAt: d.leaseExpiresAt }));
      const recover: SweepPassResult['recover'] = declared.map((d) => ({ runtimeId: d.runtimeId, fence: d.fence, reason: `lease expired at ${d.leaseExpiresAt}` }));
      if (!guard) {
        for (const stale of await runtimes.lostHoldingWork()) {
          if (!recover.some((r) => r.runtimeId === stale.id)) recover.push({ runtimeId: stale.id, fence: stale.fence, reason: 'LOST with assignments left' });
        }
      }
      return {
        guard, leaseTtlMs, nextPassInMs: Math.max(100, Math.floor(leaseTtlMs / 3)), declared, massExpiry, recover,
        lost: [...new Set([...lost, ...declared.map((d) => d.runtimeId)])].sort(), waiting: decision.waiting,
      };
    },

    /**
     * recoverRuntime's first step: declare the runtime LOST and bump its fence (idempotent). With
     * `expectedFence` (a recovery the sweeper started) a runtime that registered again since comes
     * back `came-back`, untouched. An unknown runtime fails non-retryably.
     */
    async markRuntimeLost(input: { runtimeId: string; expectedFence?: number; by: string; reason?: string }): Promise<MarkedLost> {
      const result = await runtimes.declareLost(input.runtimeId, { expectedFence: input.expectedFence, by: input.by, reason: input.reason });
      if (result.outcome === 'unknown') {
        throw ApplicationFailure.create({ type: 'unknown-runtime', message: `runtime ${input.runtimeId} is not registered`, nonRetryable: true });
      }
      const r = result.runtime;
      return { outcome: result.outcome, runtime: { id: r.id, status: r.status, fence: r.fence, lostAt: r.lostAt, labels: r.labels } };
    },

    /**
     * recoverRuntime's decision (domain/recovery.ts) on one fleet snapshot, for every workload the
     * runtime holds assignments of (or `only` those), and the stored plan of each decided target:
     * the same planner as every other change, on the target decided here. A consumer's stored owner
     * is read from its offsets table.
     */
    async prepareRecovery(input: { runtimeId: string; only?: string[] }): Promise<PreparedRecovery> {
      const { snapshot, decisions, plans } = await planOff(input.runtimeId, input.only);
      const runtime = snapshot.runtimes.find((r) => r.id === input.runtimeId)!;
      const items: RecoveryItem[] = [];
      for (const [i, decision] of decisions.entries()) {
        const plan = plans[i];
        items.push({ decision, plan: plan ? await planner.save(plan) : null });
      }
      return { runtime: { id: runtime.id, status: runtime.status, fence: runtime.fence }, items };
    },

    /**
     * handleCrashLoops' decision about one crash-looping task (domain/supervision.ts decideCrashLoop):
     * recovery's plan for its workload's tasks on its runtime (as if that runtime were lost) tells
     * whether another eligible runtime has room; a move stores that plan for applyPlan. The decision
     * is recorded (event `task.crash-loop-decided`), and `state` shows it.
     */
    async decideCrashLoop(input: { workload: string; runtimeId: string; taskId: string; windowMs: number }): Promise<CrashLoopDecision & { planId: string | null }> {
      // Retried after it took effect (its reply lost), it answers its first decision: deciding again
      // would count its own move among the recent ones and leave the task where it crash-loops.
      const key = idempotencyKey();
      const earlier = key ? await registry.eventByKey('task.crash-loop-decided', key) : null;
      if (earlier) {
        const { action, reason, planId } = earlier.detail as { action: CrashLoopDecision['action']; reason: string; planId: string | null };
        return { action, reason, planId };
      }
      const [{ snapshot, decisions, plans }, reported, recentMoves] = await Promise.all([
        planOff(input.runtimeId, [input.workload]),
        runtimes.list(),
        registry.crashLoopMovesWithin(input.workload, input.windowMs),
      ]);
      const workload = snapshot.workloads.find((w) => w.name === input.workload) ?? null;
      const placement = snapshot.placements.find((p) => p.workload === input.workload) ?? null;
      const replica = decisions[0]?.decisions.find((r) => r.lostTaskId === input.taskId);
      const decided = decideCrashLoop({
        task: input, workload, assignments: placement?.assignments ?? null, reports: reportsByAssignment(reported), recentMoves,
        roomElsewhere: replica !== undefined && (replica.to !== null || replica.action === 'handed-over'),
      });
      const plan = decided.action === 'move' ? plans[0] : null;
      const planId = plan ? (await planner.save(plan)).id : null;
      if (decided.action !== 'none') {
        await registry.emitEvent('task.crash-loop-decided', input.taskId, { runtimeId: input.runtimeId, workload: input.workload, action: decided.action, reason: decided.reason, planId, ...(key ? { idempotencyKey: key } : {}) });
      }
      return { ...decided, planId };
    },
  };
}
