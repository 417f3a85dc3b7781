// Stream job activities for the stop-the-world replan (DESIGN.md §4.5, §5 "stream"): resize a job's
// operators in its definition, stop every subtask wherever it runs, and read the checkpoint the new
// generation restores from.
import { ApplicationFailure } from '@temporalio/activity';
import { buildPlan } from '../domain/plan';
import { scaleParallelism, subtaskCount, withParallelism } from '../domain/stream';
import { describeIssues, StreamSpecSchema, type FailedSubtasks } from '../protocol';
import { createPlanner } from '../store/planner';
import { lookups, runningWorkflow, type ActivityDeps, type TaskRef } from './ports';
import { agentCalls } from './tasks';

/**
 * How long the stream stop-the-world tries an agent that fails within a live lease before it lists
 * the runtime as unreachable (an agent restarting answers well within it).
 */
export const STREAM_STOP_UNANSWERED_MS = 30_000;

export function streamActivities(deps: ActivityDeps) {
  const { registry, runtimes, streamJobs } = deps.stores;
  const { now } = deps;
  const { requireStreamJob } = lookups(deps);
  const { stopEveryTaskOf } = agentCalls(deps);
  const planner = createPlanner(deps.stores, now);

  return {
    /**
     * Sets a stream job's operator parallelism in its definition: the given operators' (`parallelism`),
     * or every operator scaled proportionally to a subtask count (`replicas`), or as it is. Answers
     * the subtask count to place. A resulting spec the schema refuses fails non-retryably, naming why.
     */
    async resizeStreamJob(input: { workload: string; parallelism?: Record<string, number>; replicas?: number }) {
      const workload = await requireStreamJob(input.workload);
      const from = Object.fromEntries(workload.spec.operators.map((op) => [op.id, op.parallelism]));
      const unknown = Object.keys(input.parallelism ?? {}).filter((id) => !(id in from));
      if (unknown.length) {
        throw ApplicationFailure.create({ type: 'invalid-input', message: `job ${input.workload} has no operator ${unknown.join(', ')} (operators: ${Object.keys(from).join(', ')})`, nonRetryable: true });
      }
      const wanted = input.parallelism ?? (input.replicas !== undefined ? scaleParallelism(workload.spec, input.replicas) : from);
      const parsed = StreamSpecSchema.safeParse(withParallelism(workload.spec, wanted));
      if (!parsed.success) {
        throw ApplicationFailure.create({ type: 'invalid-input', message: `job ${input.workload} at ${JSON.stringify(wanted)}: ${describeIssues(parsed.error)}`, nonRetryable: true });
      }
      const spec = parsed.data;
      const to = Object.fromEntries(spec.operators.map((op) => [op.id, op.parallelism]));
      // A job runs whole or not at all: refuse a size the fleet's free slots cannot hold, before anything changes.
      const trial = buildPlan({ workload, replicas: subtaskCount(spec), ...(await planner.snapshot()), nowMs: now(), newGeneration: true });
      if (trial.unplaced) {
        throw ApplicationFailure.create({
          type: 'placement-unavailable', nonRetryable: true,
          message: `job ${input.workload} at ${JSON.stringify(to)} needs ${subtaskCount(spec)} subtasks; ${trial.unplaced.missing} do not fit the eligible runtimes' free slots (nothing was changed)`,
        });
      }
      // Written also when only the layout changes: a hot rescale's appended indices start from 0 again.
      if (JSON.stringify(spec) !== JSON.stringify(workload.spec)) {
        const { name: _name, revision: _revision, retired: _retired, ...definition } = workload;
        await registry.putWorkload(input.workload, { ...definition, spec, replicas: subtaskCount(spec) });
      }
      return { replicas: subtaskCount(spec), from, to };
    },

    /**
     * Stops every subtask of a stream job on every runtime that answers, under the job's current
     * placement fence. The calls are classified as every stop's are (`agentCalls` in tasks.ts): an
     * agent's refusal (409 `stale-fence`: another decision moved the job meanwhile) fails the
     * activity non-retryably, naming it; a transient failure (refused or reset connection, a
     * timeout, a 5xx) is tried again while the runtime's lease runs, for at most
     * STREAM_STOP_UNANSWERED_MS. Only a runtime whose agent never answered in that time, or that is
     * LOST or whose lease ran out, is listed as unreachable, not waited for: its subtasks can commit
     * nothing once the new generation starts (every commit checks the job's generation), and the
     * replan places around it.
     */
    async stopStreamJob(input: { workload: string }): Promise<{ stopped: (TaskRef & { counts?: Record<string, number> })[]; unreachable: string[] }> {
      const placement = await registry.getPlacement(input.workload);
      const placementFence = placement?.fence;
      // A LOST runtime holding subtasks is not called (skipLost) but named: the replan removes nothing there.
      const unreachable = [...await runtimes.lostAmong((placement?.assignments ?? []).map((a) => a.runtimeId))].sort();
      const stopped = await stopEveryTaskOf(
        input.workload, { placementFence, skipLost: true, limitMs: STREAM_STOP_UNANSWERED_MS, atLimit: 'unreachable' }, (runtime) => unreachable.push(runtime.id),
      ).catch((error: unknown) => {
        if (error instanceof ApplicationFailure && error.nonRetryable) {
          throw ApplicationFailure.create({ type: error.type ?? undefined, nonRetryable: true, message: `the stop of job ${input.workload} (placement fence ${placementFence ?? 'none'}) was refused: ${error.message}`, cause: error });
        }
        throw error;
      });
      // the subtasks' counters at their end: what the sources had read when the world stopped
      return { stopped: stopped.map(({ runtimeId, taskId, answer }) => ({ runtimeId, taskId, ...(answer.receipt?.counts ? { counts: answer.receipt.counts } : {}) })), unreachable };
    },

    /** The newest completed checkpoint of a job: what its next generation restores from (null: none, it starts empty). */
    async streamRestorePoint(input: { workload: string }) {
      return streamJobs.lastCompletedCheckpoint(input.workload);
    },

    /**
     * What reported subtask failures mean for a stream job (workflow handleSubtaskFailures decides on
     * it): the reports of subtasks its current placement holds on the reporting runtime (an older
     * generation's end is no news), and the operation that owns them if one runs on the job (`busy`: a
     * hot rescale, whose abort path replans, or a replan, which stops them). A job that is gone,
     * retired or no stream job has no current failures.
     */
    async currentSubtaskFailures(input: { workload: string; reports: readonly FailedSubtasks[] }): Promise<{ current: FailedSubtasks[]; busy: string | null }> {
      const workload = await registry.getWorkload(input.workload);
      if (!workload || workload.kind !== 'stream' || workload.retired) return { current: [], busy: null };
      const placement = await registry.getPlacement(input.workload);
      const held = new Set((placement?.assignments ?? []).map((a) => `${a.runtimeId}/${a.taskId}`));
      const current = input.reports
        .map((report) => ({ runtimeId: report.runtimeId, taskIds: report.taskIds.filter((taskId) => held.has(`${report.runtimeId}/${taskId}`)) }))
        .filter((report) => report.taskIds.length > 0);
      if (current.length === 0) return { current, busy: null };
      for (const workflowId of [`rescale:${input.workload}`, `replan:${input.workload}`]) {
        if (await runningWorkflow(workflowId)) return { current, busy: workflowId };
      }
      return { current, busy: null };
    },
  };
}
