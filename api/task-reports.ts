// What heartbeats say that a workflow must decide on (DESIGN.md §3 "Supervision", §5 "stream"):
// this module only reports it, grouped by workload, with signal-with-start to that workload's
// deciding workflow; the workflows decide.
// - A stream subtask that fails, or whose peer died, cannot rejoin its dataflow: handleSubtaskFailures
//   of the job (`subtask-failures:<job>`) decides whether and when the job is replanned.
// - A task its agent reports crash-looping: handleCrashLoops of the workload (`crash-loops:<workload>`)
//   decides whether it moves off its runtime or stays under its backoff.
import type { SignalDefinition, Workflow } from '@temporalio/common';
import type { TaskReport } from '../protocol';
import { crashLoopingSignal, handleCrashLoops } from '../workflows/crash-loops';
import { handleSubtaskFailures, subtasksFailedSignal } from '../workflows/subtask-failures';
import type { ApiDeps } from './deps';

/** Task ids by workload among `tasks`, of the tasks `matches` picks. */
function taskIdsByWorkload(tasks: readonly TaskReport[], matches: (task: TaskReport) => boolean): Map<string, string[]> {
  const byWorkload = new Map<string, string[]>();
  for (const task of tasks) if (matches(task)) byWorkload.set(task.workload, [...(byWorkload.get(task.workload) ?? []), task.taskId]);
  return byWorkload;
}

/** Signal-with-start of `workflow` (input `{workload}`) under `<prefix>:<workload>`, one per workload, with its report; answers the workflow ids. */
async function signalEach<Report>(
  deps: ApiDeps,
  byWorkload: Map<string, string[]>,
  target: { workflow: Workflow; signal: SignalDefinition<[Report]>; prefix: string; summary: (workload: string) => string },
  reportOf: (taskIds: string[]) => Report,
): Promise<string[]> {
  const signalled: string[] = [];
  for (const [name, taskIds] of byWorkload) {
    const client = await deps.temporal.client();
    const handle = await client.workflow.signalWithStart(target.workflow, {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: `${target.prefix}:${name}`,
      args: [{ workload: name }],
      signal: target.signal,
      signalArgs: [reportOf(taskIds)],
      staticSummary: target.summary(name),
    });
    signalled.push(handle.workflowId);
  }
  return signalled;
}

/** Reports the failed subtasks of each stream job among a runtime's task reports; answers the workflows signalled. */
export async function reportFailedSubtasks(deps: ApiDeps, runtimeId: string, tasks: readonly TaskReport[]): Promise<string[]> {
  const jobs = new Map<string, string[]>();
  for (const [name, taskIds] of taskIdsByWorkload(tasks, (task) => task.state === 'failed')) {
    // Only stream jobs have subtasks; a failed service or consumer task is its agent's to restart.
    if ((await deps.registry.getWorkload(name))?.kind === 'stream') jobs.set(name, taskIds);
  }
  return signalEach(deps, jobs, {
    workflow: handleSubtaskFailures, signal: subtasksFailedSignal, prefix: 'subtask-failures',
    summary: (job) => `subtask failures of stream job ${job}`,
  }, (taskIds) => ({ runtimeId, taskIds }));
}

/**
 * Reports each workload's crash-looping tasks among a runtime's task reports; answers the workflows
 * signalled. Every heartbeat that carries one reports it again (a lost signal is made good by the
 * next one); handleCrashLoops decides once per task and episode.
 */
export async function reportCrashLoopingTasks(deps: ApiDeps, runtimeId: string, tasks: readonly TaskReport[]): Promise<string[]> {
  return signalEach(deps, taskIdsByWorkload(tasks, (task) => task.crashLooping === true), {
    workflow: handleCrashLoops, signal: crashLoopingSignal, prefix: 'crash-loops',
    summary: (workload) => `crash loops of ${workload}`,
  }, (taskIds) => ({ runtimeId, taskIds }));
}
