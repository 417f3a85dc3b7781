// Desired, placed and ready replicas per workload: what GET /v1/state reports beside each workload
// and what the gauges scalegate_workload_replicas{state} export, one computation for both.
//   desired  what operations decided (the registry's replicas); `all`: the fresh READY runtimes
//            its selector matches, as placement counts them
//   placed   the assignments of its placement record
//   ready    those assignments whose runtime (not LOST) reports that very task `ready` (and not crash-looping)
import type { Labels, Placement, ReplicaCount, Runtime, TaskReport } from '../protocol';
import { eligibleRuntimes } from './placement';

export const REPLICA_STATES = ['desired', 'placed', 'ready'] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];
export type ReplicaCounts = Record<ReplicaState, number>;

export function replicaCounts(
  workloads: readonly { name: string; replicas: ReplicaCount; selector: Labels }[],
  placements: readonly Pick<Placement, 'workload' | 'assignments'>[],
  runtimes: readonly (Runtime & { tasks: readonly TaskReport[] })[],
  nowMs: number,
): Record<string, ReplicaCounts> {
  const readyTasks = new Set<string>();
  for (const runtime of runtimes) {
    if (runtime.status === 'LOST') continue;
    // A crash-looping task is not ready, whatever its current run says (DESIGN.md §3 "Supervision").
    for (const task of runtime.tasks) if (task.state === 'ready' && !task.crashLooping) readyTasks.add(`${runtime.id}\n${task.taskId}`);
  }
  const assignmentsOf = new Map(placements.map((p) => [p.workload, p.assignments]));
  const counts: Record<string, ReplicaCounts> = {};
  for (const workload of workloads) {
    const assignments = assignmentsOf.get(workload.name) ?? [];
    counts[workload.name] = {
      desired: workload.replicas === 'all' ? eligibleRuntimes(runtimes, workload, nowMs).length : workload.replicas,
      placed: assignments.length,
      ready: assignments.filter((a) => readyTasks.has(`${a.runtimeId}\n${a.taskId}`)).length,
    };
  }
  return counts;
}
