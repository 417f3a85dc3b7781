// A stream subtask that fails, or whose peer died, cannot rejoin its dataflow (DESIGN.md §5
// "stream"). Heartbeats carry the failure here and this module only reports it: to the workflow
// handleSubtaskFailures of the job (signal-with-start under `subtask-failures:<job>`), which decides
// whether and when the job is replanned.
import type { TaskReport } from '../protocol';
import { handleSubtaskFailures, subtasksFailedSignal } from '../workflows/subtask-failures';
import type { ApiDeps } from './deps';

/** Reports the failed subtasks of each stream job among a runtime's task reports; answers the workflows signalled. */
export async function reportFailedSubtasks(deps: ApiDeps, runtimeId: string, tasks: readonly TaskReport[]): Promise<string[]> {
  const failedByJob = new Map<string, string[]>();
  for (const task of tasks) {
    if (task.state === 'failed') failedByJob.set(task.workload, [...(failedByJob.get(task.workload) ?? []), task.taskId]);
  }
  const signalled: string[] = [];
  for (const [name, taskIds] of failedByJob) {
    // Only stream jobs have subtasks; a failed service or consumer task is its agent's to restart.
    if ((await deps.registry.getWorkload(name))?.kind !== 'stream') continue;
    const client = await deps.temporal.client();
    const handle = await client.workflow.signalWithStart(handleSubtaskFailures, {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: `subtask-failures:${name}`,
      args: [{ workload: name }],
      signal: subtasksFailedSignal,
      signalArgs: [{ runtimeId, taskIds }],
      staticSummary: `subtask failures of stream job ${name}`,
    });
    signalled.push(handle.workflowId);
  }
  return signalled;
}
