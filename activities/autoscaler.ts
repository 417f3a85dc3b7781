// Autoscaler activities: what the autoscale:<tier> workflow needs from outside its sandbox — the
// current size of the tier's workloads, and its cron change windows expanded into intervals (cron
// evaluation needs a calendar library and the time zone database, which a workflow must not load).
import { expandChangeWindows } from '../domain/change-windows';
import type { TierRule } from '../domain/tier-rules';
import type { ChangeInterval } from '../domain/autoscale';
import type { ChangeWindowPolicy } from '../protocol/tiers';
import type { ActivityDeps } from './ports';

export interface TierWorkloadSize {
  workload: string;
  /** false: not defined, or retired (the autoscaler leaves it alone and says so) */
  active: boolean;
  /** assignments in its placement now; a stream job: its keyed aggregate's parallelism */
  replicas: number;
  /**
   * A stream job is sized through rescaleOperator on its keyed aggregate (DESIGN.md §4.6), never
   * drained like replicas; its count is bounded by maxParallelism and the source partitions.
   */
  stream?: { operator: string; maxParallelism: number; bound: number; boundBy: string };
}

export function autoscalerActivities(deps: ActivityDeps) {
  return {
    /** The size of each workload of a tier: the assignments of its placement. */
    async tierSnapshot(input: { workloads: string[] }): Promise<TierWorkloadSize[]> {
      return Promise.all(input.workloads.map(async (workload) => {
        const definition = await deps.stores.registry.getWorkload(workload);
        if (!definition || definition.retired) return { workload, active: false, replicas: 0 };
        if (definition.kind === 'stream') {
          const aggregate = definition.spec.operators.find((o) => o.kind === 'keyed-aggregate');
          if (aggregate) {
            const { maxParallelism, partitions } = definition.spec;
            const bound = Math.min(maxParallelism, partitions);
            return {
              workload, active: true, replicas: aggregate.parallelism,
              stream: { operator: aggregate.id, maxParallelism, bound, boundBy: bound === partitions ? `its ${partitions} source partitions` : `its maxParallelism ${maxParallelism}` },
            };
          }
        }
        const placement = await deps.stores.registry.getPlacement(workload);
        return { workload, active: true, replicas: placement?.assignments.length ?? 0 };
      }));
    },
    /** The constraints of every tier that holds `workload`, as of now: min replicas and the scale-in windows open now. */
    async tierRules(input: { workload: string }): Promise<TierRule[]> {
      const nowMs = deps.now();
      return (await deps.stores.tiers.policiesOfWorkload(input.workload)).map(({ tier, policy }) => ({
        tier,
        minReplicas: policy.minReplicas,
        openScaleInWindows: expandChangeWindows(policy.changeWindows.filter((w) => w.forbid === 'scale-in'), nowMs, nowMs)
          .filter((i) => i.startMs <= nowMs && nowMs < i.endMs)
          .map((i) => ({ label: i.label, endMs: i.endMs })),
      }));
    },
    /** The change windows' intervals overlapping [fromMs, toMs] (workflow time), for the pure decision. */
    async changeWindowIntervals(input: { windows: ChangeWindowPolicy[]; fromMs: number; toMs: number }): Promise<ChangeInterval[]> {
      return expandChangeWindows(input.windows, input.fromMs, input.toMs);
    },
  };
}
