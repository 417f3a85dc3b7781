// A stream subtask that fails, or whose peer died, cannot rejoin its dataflow: its job is replanned
// from the last completed checkpoint (DESIGN.md §5 "stream"). Heartbeats carry the failure here; the
// replan (replan:<job>) runs once however many subtasks and heartbeats report it.
import type { TaskReport } from '../protocol';
import { stopTheWorldReplan } from '../workflows/stop-the-world-replan';
import { ApiError } from '../http/errors';
import type { ApiDeps } from './deps';
import { startOperation } from './operations';

async function isRunning(deps: ApiDeps, workflowId: string): Promise<boolean> {
  const client = await deps.temporal.client();
  const description = await client.workflow.getHandle(workflowId).describe().catch(() => null);
  return description?.status.name === 'RUNNING';
}

/** Starts the replan of every stream job with a failed subtask of its current placement on this runtime. */
export async function replanJobsWithFailedSubtasks(deps: ApiDeps, runtimeId: string, tasks: readonly TaskReport[]): Promise<string[]> {
  const failed = tasks.filter((t) => t.state === 'failed');
  const started: string[] = [];
  for (const name of new Set(failed.map((t) => t.workload))) {
    const workload = await deps.registry.getWorkload(name);
    if (!workload || workload.kind !== 'stream' || workload.retired) continue;
    const placement = await deps.registry.getPlacement(name);
    // Only subtasks of the current generation: an old one reporting its end is no news.
    const current = failed.filter((t) => t.workload === name && placement?.assignments.some((a) => a.taskId === t.taskId && a.runtimeId === runtimeId));
    if (current.length === 0) continue;
    // A hot rescale running on the job owns its failures: its abort path replans it.
    if (await isRunning(deps, `rescale:${name}`)) continue;
    try {
      const operation = await startOperation(deps, {
        workflow: stopTheWorldReplan, workflowId: `replan:${name}`,
        input: { workload: name, reason: `subtask ${current.map((t) => t.taskId).join(', ')} on ${runtimeId} failed` },
        summary: `replan stream job ${name}: a subtask failed`,
      });
      started.push(operation.workflowId);
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 'operation-in-progress')) throw error;
    }
  }
  return started;
}
