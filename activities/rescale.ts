// Hot rescale activities (DESIGN.md §4.3, reference/hot-rescale-at-a-barrier.txt): decide, write the
// appended layout, arm the affected subtasks, trigger and await the cutover barrier C, then retire
// the old subtasks. Each is safe to retry after it took effect.
import { ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { buildPlan } from '../domain/plan';
import { placeAppended, rescaleEligibility } from '../domain/rescale';
import { eligibleRuntimes } from '../domain/placement';
import { appendRescaled, blockOf, indicesOf, subtaskCount, withParallelism } from '../domain/stream';
import { createPlanner } from '../store/planner';
import type { Assignment, CutoverAnswer, StreamSpec } from '../protocol';
import { StalePlacementError } from '../store/registry';
import { cancellationRequested, heartbeat, idempotencyKey, lookups, pause, type ActivityDeps, type TaskRef } from './ports';
import { setTimeout as sleep } from 'node:timers/promises';


export type RescalePlan =
  | { hot: false; reason: string; from: number | null; to: number }
  | {
      hot: true;
      from: number;
      to: number;
      /** the cutover barrier: the last checkpoint of the old layout */
      checkpoint: number;
      /** the layout from C+1 on (append-only indices) */
      spec: StreamSpec;
      generation: number;
      registryRevision: number;
      placementFence: number;
      coordinator: TaskRef;
      added: Assignment[];
      retiring: Assignment[];
      /** every other subtask of the job: armed too (each finds its own role) */
      others: Assignment[];
    };

const nonRetryable = (type: string, message: string) => ApplicationFailure.create({ type, message, nonRetryable: true });

export function rescaleActivities(deps: ActivityDeps) {
  const { registry, runtimes, streamJobs } = deps.stores;
  const { agents, now } = deps;
  const { agentOf, requireStreamJob: requireJob } = lookups(deps);
  const planner = createPlanner(deps.stores, now);

  return {
    /**
     * Hot or not, and for hot: the cutover checkpoint C, the new layout and where the new subtasks
     * run. Pauses the checkpoint clock and waits until no checkpoint is in flight (rule 5), so C is
     * the job's next checkpoint id. Writes nothing else.
     */
    async planRescale(input: { job: string; operator: string; parallelism: number; pauseTimeoutMs: number }): Promise<RescalePlan> {
      const job = await requireJob(input.job);
      const eligibility = rescaleEligibility(job.spec, input.operator, input.parallelism);
      if (!eligibility.hot) return { hot: false, reason: eligibility.reason, from: eligibility.from, to: input.parallelism };
      const placement = await registry.getPlacement(input.job);
      const byIndex = new Map((placement?.assignments ?? []).map((a) => [a.index, a]));
      const indices = (spec: StreamSpec, kind: Parameters<typeof blockOf>[1]) => indicesOf(blockOf(spec, kind));
      const every = [...indices(job.spec, 'source'), ...indices(job.spec, 'keyed-aggregate'), ...indices(job.spec, 'sink')];
      if (!placement || every.some((i) => !byIndex.has(i))) return { hot: false, reason: `job ${input.job} is not fully placed: only a running job cuts over hot`, from: eligibility.from, to: input.parallelism };

      const spec = appendRescaled(job.spec, input.operator, input.parallelism);
      const [fleet, placements] = await Promise.all([runtimes.list(), registry.listPlacements()]);
      const usedSlots: Record<string, number> = {};
      for (const p of placements) for (const a of p.assignments) usedSlots[a.runtimeId] = (usedSlots[a.runtimeId] ?? 0) + 1;
      const jobSubtasks: Record<string, number> = {};
      for (const a of placement.assignments) jobSubtasks[a.runtimeId] = (jobSubtasks[a.runtimeId] ?? 0) + 1;
      const placed = placeAppended({
        job: input.job, indices: indicesOf(blockOf(spec, 'keyed-aggregate')), generation: placement.generation,
        runtimes: eligibleRuntimes(fleet, job, now()), usedSlots, jobSubtasks,
      });
      if (placed.missing.length) {
        const noSlot = `no free slot for ${placed.missing.length} of the ${input.parallelism} new subtasks next to the running ones`;
        // Not hot; and when the whole job at this size does not fit a new generation either, the
        // replan could not run it: refused here, before the clock pauses or anything else changes.
        const resized = withParallelism(job.spec, { [input.operator]: input.parallelism });
        const trial = buildPlan({ workload: { ...job, spec: resized }, replicas: subtaskCount(resized), ...(await planner.snapshot()), nowMs: now(), newGeneration: true });
        if (trial.unplaced) {
          throw nonRetryable('placement-unavailable', `${noSlot}, and ${trial.unplaced.missing} of the job's ${subtaskCount(resized)} subtasks at ${input.operator} = ${input.parallelism} do not fit the eligible runtimes' free slots in a new generation either (nothing was changed)`);
        }
        return { hot: false, reason: noSlot, from: eligibility.from, to: input.parallelism };
      }

      const coordinator = byIndex.get(blockOf(job.spec, 'sink').base)!;
      const clockOf = async (state: 'paused' | 'running') => agents.checkpointClock(await agentOf(coordinator.runtimeId), coordinator.taskId, { state });
      const deadline = now() + input.pauseTimeoutMs;
      // A cancelled rescale pauses nothing more (the workflow resumes the clock once this ended).
      if (cancellationRequested()) throw new CancelledFailure('rescale cancelled before the clock paused');
      for (;;) {
        const clock = await clockOf('paused');
        heartbeat({ pausing: coordinator.taskId, inFlight: clock.inFlight });
        if (clock.inFlight === null) break;
        if (cancellationRequested()) {
          await clockOf('running');
          throw new CancelledFailure(`rescale cancelled while checkpoint ${clock.inFlight} was in flight; the clock runs again`);
        }
        if (now() > deadline) {
          // Nothing changed: the clock runs on as before.
          await clockOf('running').catch(() => undefined);
          throw nonRetryable('cutover-deadline', `checkpoint ${clock.inFlight} of ${input.job} did not complete within ${input.pauseTimeoutMs} ms after the clock paused`);
        }
        await sleep(50);
      }
      const retiringIndices = new Set(indices(job.spec, 'keyed-aggregate'));
      return {
        hot: true, from: eligibility.from, to: input.parallelism, checkpoint: await streamJobs.nextCheckpointId(input.job), spec,
        generation: placement.generation, registryRevision: job.revision, placementFence: placement.fence,
        coordinator: { runtimeId: coordinator.runtimeId, taskId: coordinator.taskId }, added: placed.assignments,
        retiring: placement.assignments.filter((a) => retiringIndices.has(a.index)),
        others: placement.assignments.filter((a) => !retiringIndices.has(a.index)),
      };
    },

    /**
     * Writes the appended layout: the spec with explicit bases (replicas = its subtask count) and
     * the placement with the new subtasks next to the old ones, fenced. A retry finds its own write.
     */
    async commitRescaleLayout(input: { job: string; plan: Extract<RescalePlan, { hot: true }> }) {
      const { plan } = input;
      // The spec and the placement in one fenced transaction: a refused write changes neither.
      const placement = await registry.commitPlacement(
        input.job, { registryRevision: plan.registryRevision, placementFence: plan.placementFence }, [...plan.retiring, ...plan.others, ...plan.added],
        {
          generation: plan.generation, writer: idempotencyKey() ?? 'rescale', planId: `rescale:${input.job}:${plan.checkpoint}:add`,
          spec: plan.spec, desiredReplicas: subtaskCount(plan.spec),
        },
      ).catch((error: unknown) => {
        if (error instanceof StalePlacementError) throw nonRetryable('stale-plan', `job ${input.job} changed since the rescale was planned (revision ${plan.registryRevision}, fence ${plan.placementFence}): ${error.message}`);
        throw error;
      });
      const job = await requireJob(input.job);
      return { placementFence: placement.fence, registryRevision: job.revision };
    },

    /** Arms every subtask of the job for the cutover at C; answers each one's role. A refusal fails non-retryably. */
    async armCutover(input: { checkpoint: number; operator: string; spec: StreamSpec; tasks: TaskRef[] }) {
      const roles: (TaskRef & { role: CutoverAnswer['role'] })[] = [];
      for (const task of input.tasks) {
        heartbeat({ arming: task.taskId });
        const answer = await agents.armCutover(await agentOf(task.runtimeId), task.taskId, { checkpoint: input.checkpoint, operator: input.operator, spec: input.spec });
        roles.push({ ...task, role: answer.role });
      }
      return roles;
    },

    /** The coordinator triggers C now, with the clock still paused (rule 1: C assigned explicitly). */
    async triggerCutover(input: { coordinator: TaskRef; checkpoint: number }) {
      return agents.checkpointClock(await agentOf(input.coordinator.runtimeId), input.coordinator.taskId, { state: 'paused', trigger: input.checkpoint });
    },

    /** Waits until checkpoint C completed (the old layout drained through it and the sink committed it). */
    async awaitCheckpoint(input: { job: string; checkpoint: number; timeoutMs: number }) {
      const deadline = now() + input.timeoutMs;
      for (;;) {
        const completed = await streamJobs.lastCompletedCheckpoint(input.job);
        heartbeat({ awaiting: input.checkpoint, completed: completed?.id ?? null });
        if (completed && completed.id >= input.checkpoint) return completed;
        if (now() > deadline) throw nonRetryable('cutover-deadline', `checkpoint ${input.checkpoint} of ${input.job} did not complete within ${input.timeoutMs} ms`);
        await pause(50);
      }
    },

    /** The final layout: the placement without the retired subtasks (fenced; a retry finds its own write). */
    async retireFromLayout(input: { job: string; plan: Extract<RescalePlan, { hot: true }>; registryRevision: number; placementFence: number }) {
      const { plan } = input;
      const placement = await registry.commitPlacement(
        input.job, { registryRevision: input.registryRevision, placementFence: input.placementFence }, [...plan.others, ...plan.added],
        { generation: plan.generation, writer: idempotencyKey() ?? 'rescale', planId: `rescale:${input.job}:${plan.checkpoint}:retire` },
      );
      return { placementFence: placement.fence };
    },

    /**
     * Resumes the job's checkpoint clock wherever its coordinator runs now (a rescale that failed or
     * was cancelled while preparing may have paused it). Resuming a running clock changes nothing.
     */
    async resumeCheckpointClock(input: { job: string }): Promise<{ resumed: boolean | string }> {
      const job = await requireJob(input.job);
      const placement = await registry.getPlacement(input.job);
      const coordinator = placement?.assignments.find((a) => a.index === blockOf(job.spec, 'sink').base);
      if (!coordinator) return { resumed: `job ${input.job} has no placed coordinator: nothing paused` };
      await agents.checkpointClock(await agentOf(coordinator.runtimeId), coordinator.taskId, { state: 'running' });
      return { resumed: true };
    },

    /** Resumes the checkpoint clock: C+1 is the first checkpoint of the new layout. */
    async setCheckpointClock(input: { coordinator: TaskRef; state: 'paused' | 'running' }) {
      return agents.checkpointClock(await agentOf(input.coordinator.runtimeId), input.coordinator.taskId, { state: input.state });
    },
  };
}
