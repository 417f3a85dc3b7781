// rescaleOperator (DESIGN.md §4.3, reference/hot-rescale-at-a-barrier.txt): one operator of a
// stream job to a new parallelism, hot, at a checkpoint barrier C: Preparing → Draining →
// CuttingOver → Complete, or Aborted. The clock pauses so C is the last checkpoint of the old
// layout and C+1 the first of the new; new subtasks take appended indices and restore from C's key
// groups; upstream holds the rescaled edge after barrier C; downstream swaps its inputs at C; the
// old subtasks end at C and are stopped. Everything else keeps running. A request that cannot cut
// over hot, and every abort, go to the stop-the-world replan from the last completed checkpoint at
// the requested parallelism (rescale-exits.ts): hot when possible, correct always.
import { ActivityCancellationType, ApplicationFailure, CancellationScope, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { CANCELLATION_REQUESTED, beginOperation, formatDuration, parseInput, profiles, reportingOutcome, runtimesOf } from './operation';
import { PREPARE_ENDS_BEFORE_RESUME, askPatch } from './patches';
import { drainActivity } from './apply-placement';
import { rescaleExits } from './rescale-exits';
import { RescaleInputSchema, rescaleStatusQuery, type RescaleStatus } from './rescale-status';

export { abortSignal } from './operation';
export { RescaleInputSchema, rescaleStatusQuery, type RescaleInput, type RescaleOutcome, type RescaleStatus } from './rescale-status';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);
const long = proxyActivities<Activities>(profiles.longCall);
/** Calls inside the paused window: a lost answer must reach the fallback in seconds, not after minutes of retries. */
const windowCalls = proxyActivities<Activities>(profiles.windowCall);
/** The preparation since PREPARE_ENDS_BEFORE_RESUME: an abort waits for planRescale to end before the clock is resumed. */
const preparing = proxyActivities<Activities>({ ...profiles.longCall, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED });

export async function rescaleOperator(rawInput: unknown): Promise<RescaleStatus> {
  return reportingOutcome(() => runRescaleOperator(rawInput));
}

async function runRescaleOperator(rawInput: unknown): Promise<RescaleStatus> {
  const input = parseInput(RescaleInputSchema, rawInput, 'rescaleOperator');
  const status: RescaleStatus = {
    kind: 'rescaleOperator', job: input.job, operator: input.operator, from: null, to: input.parallelism, phase: 'preparing', outcome: 'running',
    hot: null, reason: null, checkpoint: null, added: [], retired: [], retiredCounts: {}, compensation: null, error: null,
  };
  const op = beginOperation({
    operation: 'rescale', workload: input.job, summary: `rescale ${input.job}/${input.operator} → ${input.parallelism}`, status, query: rescaleStatusQuery,
    ledger: {
      calls: store, subject: `rescale ${input.job}/${input.operator}`,
      row: (inputs: Record<string, unknown>, evidence?: unknown) => ({
        kind: 'rescale', workload: input.job, fromReplicas: status.from, toReplicas: input.parallelism, reason: input.reason,
        inputs: { operator: input.operator, hot: status.hot, checkpoint: status.checkpoint, ...inputs }, evidence,
      }),
    },
  });
  const { aborts, enter } = op;
  /** when the layout write began (null before): a replan ended since then stopped this window's subtasks too */
  let windowOpenedAt: string | null = null;
  const exits = rescaleExits(op, input, () => windowOpenedAt);

  // Preparing: eligibility, capacity, the clock paused with nothing in flight, C assigned. Nothing
  // else changed yet: a failure or an abort here resumes the clock and ends the rescale.
  // Since PREPARE_ENDS_BEFORE_RESUME an abort waits here until planRescale ended, so the resume
  // below comes after its last pause (before it, planRescale could pause the clock again after the
  // resume, and nothing would resume it).
  const waitsForPrepare = askPatch(PREPARE_ENDS_BEFORE_RESUME);
  /** A Temporal cancellation came (its planRescale may have ended well all the same). */
  const cancelRequested = () => waitsForPrepare && CancellationScope.current().consideredCancelled;
  const plan = await op.guarded(() => (waitsForPrepare ? preparing : long).planRescale.executeWithOptions(
    { summary: `prepare: can ${input.job}/${input.operator} cut over hot? pause the clock` },
    [{ job: input.job, operator: input.operator, parallelism: input.parallelism, pauseTimeoutMs: input.stepTimeoutMs }],
  ), (abort, error) => exits.prepareFailed(error, abort !== null || aborts.reason !== null || cancelRequested()));
  if (aborts.reason || cancelRequested()) {
    await exits.prepareFailed(ApplicationFailure.create({ type: 'aborted', message: aborts.reason ?? CANCELLATION_REQUESTED, nonRetryable: true }), true);
  }
  status.from = plan.from;
  if (!plan.hot) return exits.notHot(plan.reason);
  status.hot = true;
  status.checkpoint = plan.checkpoint;
  status.added = plan.added.map((a) => a.taskId);
  status.retired = plan.retiring.map((a) => a.taskId);
  const refs = (assignments: { runtimeId: string; taskId: string }[]) => assignments.map(({ runtimeId, taskId }) => ({ runtimeId, taskId }));

  // From the layout write on, any failure, abort or cancellation ends in the replan at the requested parallelism.
  windowOpenedAt = new Date(Date.now()).toISOString();
  await op.guarded(async () => {
    const layout = await store.commitRescaleLayout.executeWithOptions(
      { summary: `write the layout: ${plan.added.length} new subtask(s) of ${input.operator} appended, C = ${plan.checkpoint}` }, [{ job: input.job, plan }],
    );

    // Draining: new subtasks deployed (they restore from C once it completed), every subtask armed, C triggered and completed.
    enter('draining');
    await long.startTasks.executeWithOptions(
      { summary: `deploy ${plan.added.length} new ${input.operator} subtask(s) on ${runtimesOf(plan.added)}, joining after checkpoint ${plan.checkpoint}` },
      [{ workload: input.job, kind: 'stream', spec: plan.spec, placementFence: layout.placementFence, generation: plan.generation, assignments: plan.added, joinAt: plan.checkpoint }],
    );
    await windowCalls.armCutover.executeWithOptions(
      { summary: `arm ${plan.others.length + plan.retiring.length} subtask(s) for the cutover at checkpoint ${plan.checkpoint}` },
      [{ checkpoint: plan.checkpoint, operator: input.operator, spec: plan.spec, tasks: refs([...plan.others, ...plan.retiring]) }],
    );
    await windowCalls.triggerCutover.executeWithOptions({ summary: `trigger barrier C = ${plan.checkpoint}` }, [{ coordinator: plan.coordinator, checkpoint: plan.checkpoint }]);
    await long.awaitCheckpoint.executeWithOptions(
      { summary: `await checkpoint ${plan.checkpoint} completed (timeout ${formatDuration(input.stepTimeoutMs)})` },
      [{ job: input.job, checkpoint: plan.checkpoint, timeoutMs: input.stepTimeoutMs }],
    );

    // CuttingOver: the new subtasks restored from C and wired in; the old ones stopped; the clock resumes at C+1.
    enter('cutting-over');
    await long.awaitTasksReady.executeWithOptions(
      { summary: `await ${plan.added.length} new subtask(s) ready (timeout ${formatDuration(input.stepTimeoutMs)})` },
      [{ tasks: refs(plan.added), timeoutMs: input.stepTimeoutMs }],
    );
    const final = await store.retireFromLayout.executeWithOptions(
      { summary: `write the layout without the ${plan.retiring.length} retired subtask(s)` },
      [{ job: input.job, plan, registryRevision: layout.registryRevision, placementFence: layout.placementFence }],
    );
    const stopped = await drainActivity().executeWithOptions(
      { summary: `stop ${plan.retiring.length} retired subtask(s) on ${runtimesOf(plan.retiring)}` }, [{ tasks: refs(plan.retiring), placementFence: final.placementFence }],
    );
    for (const receipt of stopped) {
      const counts = (receipt.receipt as { counts?: Record<string, number> } | undefined)?.counts;
      if (counts) status.retiredCounts[receipt.taskId] = counts;
    }
    await agentCalls.setCheckpointClock.executeWithOptions({ summary: `resume the checkpoint clock (C+1 = ${plan.checkpoint + 1} is the first of the new layout)` }, [{ coordinator: plan.coordinator, state: 'running' }]);
  }, exits.cutoverFailed);
  return op.end({ outcome: 'completed', phase: 'complete' }, { added: status.added, retired: status.retired });
}
