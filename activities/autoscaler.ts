// Autoscaler activities: what the autoscale:<tier> workflow needs from outside its sandbox — the
// current size of the tier's workloads, and its cron change windows expanded into intervals (cron
// evaluation needs a calendar library and the time zone database, which a workflow must not load).
import { CronExpressionParser } from 'cron-parser';
import type { ChangeInterval } from '../domain/autoscale';
import type { ChangeWindowPolicy } from '../protocol/tiers';
import type { ActivityDeps } from './ports';

/** Upper bound on the occurrences walked per window and call (a `* * * * *` window of 7 days is 10,080). */
const MAX_OCCURRENCES = 20_000;

/** Null when `cron` parses (UTC), else the parser's message. Used by the API to answer 422 naming the field. */
export function cronProblem(cron: string): string | null {
  try {
    CronExpressionParser.parse(cron, { tz: 'UTC' });
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * The intervals [start, start + durationMs) of every window occurrence that overlaps [fromMs, toMs],
 * merged per window and sorted. Pure apart from the library; exported for unit tests.
 */
export function expandChangeWindows(windows: readonly ChangeWindowPolicy[], fromMs: number, toMs: number): ChangeInterval[] {
  const intervals: ChangeInterval[] = [];
  for (const window of windows) {
    const starts: number[] = [];
    // occurrences that started up to durationMs before fromMs may still be open
    const back = CronExpressionParser.parse(window.cron, { tz: 'UTC', currentDate: new Date(fromMs + 1) });
    for (let i = 0; i < MAX_OCCURRENCES && back.hasPrev(); i++) {
      const at = back.prev().getTime();
      if (at + window.durationMs <= fromMs) break;
      starts.push(at);
    }
    const forward = CronExpressionParser.parse(window.cron, { tz: 'UTC', currentDate: new Date(fromMs) });
    for (let i = 0; i < MAX_OCCURRENCES && forward.hasNext(); i++) {
      const at = forward.next().getTime();
      if (at > toMs) break;
      starts.push(at);
    }
    const merged: ChangeInterval[] = [];
    for (const startMs of [...new Set(starts)].sort((a, b) => a - b)) {
      const endMs = startMs + window.durationMs;
      const last = merged[merged.length - 1];
      if (last && startMs <= last.endMs) last.endMs = Math.max(last.endMs, endMs);
      else merged.push({ startMs, endMs, label: `"${window.cron}" (${window.durationMs} ms, UTC)` });
    }
    intervals.push(...merged);
  }
  return intervals.sort((a, b) => a.startMs - b.startMs);
}

export interface TierWorkloadSize {
  workload: string;
  /** false: not defined, or retired (the autoscaler leaves it alone and says so) */
  active: boolean;
  /** assignments in its placement now */
  replicas: number;
}

export function autoscalerActivities(deps: ActivityDeps) {
  return {
    /** The size of each workload of a tier: the assignments of its placement. */
    async tierSnapshot(input: { workloads: string[] }): Promise<TierWorkloadSize[]> {
      return Promise.all(input.workloads.map(async (workload) => {
        const definition = await deps.stores.registry.getWorkload(workload);
        if (!definition || definition.retired) return { workload, active: false, replicas: 0 };
        const placement = await deps.stores.registry.getPlacement(workload);
        return { workload, active: true, replicas: placement?.assignments.length ?? 0 };
      }));
    },
    /** The change windows' intervals overlapping [fromMs, toMs] (workflow time), for the pure decision. */
    async changeWindowIntervals(input: { windows: ChangeWindowPolicy[]; fromMs: number; toMs: number }): Promise<ChangeInterval[]> {
      return expandChangeWindows(input.windows, input.fromMs, input.toMs);
    },
  };
}
