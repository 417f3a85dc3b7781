// rescaleOperator (DESIGN.md §4.3, reference/hot-rescale-at-a-barrier.txt): one operator of a
// stream job to a new parallelism, hot, at a checkpoint barrier C: Preparing → Draining →
// CuttingOver → Complete, or Aborted. The clock pauses so C is the last checkpoint of the old
// layout and C+1 the first of the new; new subtasks take appended indices and restore from C's key
// groups; upstream holds the rescaled edge after barrier C; downstream swaps its inputs at C; the
// old subtasks end at C and are stopped. Everything else keeps running. A request that cannot cut
// over hot, and every abort, go to the stop-the-world replan from the last completed checkpoint at
// the requested parallelism: hot when possible, correct always.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ActivityCancellationType, ActivityFailure, ApplicationFailure, CancellationScope, defineQuery, proxyActivities, setHandler, workflowInfo,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities, RescalePlan } from '../activities';
import type { LedgerOutcome } from '../protocol';
import { WorkloadName } from '../protocol/names';
import { CANCELLATION_REQUESTED, failureMessage, formatDuration, handleAborts, parseInput, profiles, reportingOutcome, runtimesOf, trackOperation } from './operation';
import { compensate, type StreamReplanOutcome } from './stop-the-world-replan';
import { JOINED_REPLAN_JUDGED, JOINED_REPLAN_REFUSED, PREPARE_ENDS_BEFORE_RESUME, RESCALE_JOINS_ENDED_REPLAN, RESCALE_JOINS_ONLY_ITS_WINDOW, RESCALE_NO_ROOM_REFUSED, RESCALE_PLAN_FAILURE_REPLANS, askPatch } from './patches';

export { abortSignal } from './operation';

const store = proxyActivities<Activities>(profiles.storeCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);
const long = proxyActivities<Activities>(profiles.longCall);
/** Calls inside the paused window: a lost answer must reach the fallback in seconds, not after minutes of retries. */
const windowCalls = proxyActivities<Activities>(profiles.windowCall);
/** The preparation since PREPARE_ENDS_BEFORE_RESUME: an abort waits for planRescale to end before the clock is resumed. */
const preparing = proxyActivities<Activities>({ ...profiles.longCall, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED });

export const RescaleInputSchema = z.strictObject({
  job: WorkloadName,
  operator: z.string().min(1).max(63),
  parallelism: z.int().min(1).max(32768),
  reason: z.string().min(1).max(500).default('requested'),
  /** how long each step of the window may take (the pause, barrier C, the new subtasks ready) */
  stepTimeoutMs: z.int().min(1000).max(600_000).default(60_000),
});
export type RescaleInput = z.input<typeof RescaleInputSchema>;

/** `cancelled`: an abort or a Temporal cancellation before anything changed (the clock resumed). */
export type RescaleOutcome = 'running' | 'completed' | 'replanned' | 'compensated' | 'cancelled' | 'refused' | 'failed';

export interface RescaleStatus {
  kind: 'rescaleOperator';
  job: string;
  operator: string;
  from: number | null;
  to: number;
  phase: string;
  outcome: RescaleOutcome;
  /** hot: cut over at a barrier; false: the stop-the-world replan, and why */
  hot: boolean | null;
  reason: string | null;
  /** the cutover barrier: the last checkpoint of the old layout */
  checkpoint: number | null;
  added: string[];
  retired: string[];
  /** the retired subtasks' counters at their end: records taken in, and after barrier C (the held window: 0) */
  retiredCounts: Record<string, Record<string, number>>;
  compensation: {
    reason: string;
    /** what the replan did: its restore point, parallelism and generation */
    outcome: { restoredFrom: number | null; parallelism: StreamReplanOutcome['parallelism'] | null; generation: number | null } | null;
    /** set when a replan of the job was already running and this rescale waited for it instead */
    joined: string | null;
    /** the operator's parallelism the replan applied (null: not known); the rescale is `completed`/`replanned` only if it is `to` */
    applied?: number | null;
  } | null;
  error: string | null;
}

export const rescaleStatusQuery = defineQuery<RescaleStatus>('status');

export async function rescaleOperator(rawInput: unknown): Promise<RescaleStatus> {
  return reportingOutcome(() => runRescaleOperator(rawInput));
}

async function runRescaleOperator(rawInput: unknown): Promise<RescaleStatus> {
  const input = parseInput(RescaleInputSchema, rawInput, 'rescaleOperator');
  const { workflowId, runId } = workflowInfo();
  const status: RescaleStatus = {
    kind: 'rescaleOperator', job: input.job, operator: input.operator, from: null, to: input.parallelism, phase: 'preparing', outcome: 'running',
    hot: null, reason: null, checkpoint: null, added: [], retired: [], retiredCounts: {}, compensation: null, error: null,
  };
  setHandler(rescaleStatusQuery, () => status);
  const op = trackOperation('rescale', input.job, `rescale ${input.job}/${input.operator} → ${input.parallelism}`);
  const enter = (phase: string) => {
    status.phase = phase;
    op.enter(phase);
  };
  const aborts = handleAborts();
  /** when the layout write began (null before): a replan ended since then stopped this window's subtasks too */
  let windowOpenedAt: string | null = null;
  const ledger = (outcome: LedgerOutcome, inputs: Record<string, unknown>, evidence?: unknown) => aborts.exit(() =>
    store.appendLedger.executeWithOptions({ summary: `ledger: rescale ${input.job}/${input.operator} ${outcome}` }, [{
      kind: 'rescale', workload: input.job, fromReplicas: status.from, toReplicas: input.parallelism, reason: input.reason,
      inputs: { operator: input.operator, hot: status.hot, checkpoint: status.checkpoint, ...inputs }, workflowId, runId, outcome, evidence,
    }]));
  /**
   * Every path that does not cut over ends here: the replan at the requested parallelism. When a
   * replan of the job already runs (a recovery of a lost agent, or a failed subtask's report,
   * started it: the layout written already asks for the requested parallelism), this one joins it
   * and waits for its ledger row; one that ended since this window opened, at the requested
   * parallelism, is taken as it is. After the layout write only a replan that began after it is
   * joined (its stop covers this window's subtasks and its paused clock); one that began before it
   * is waited for, and then this replan runs. Once begun it is not cut short: it runs in a
   * non-cancellable scope.
   */
  const replan = (reason: string, outcome: 'replanned' | 'compensated') => aborts.exit(async () => {
    status.compensation = { reason, outcome: null, joined: null };
    const attemptedAt = new Date(Date.now()).toISOString();
    // A replan of the job that ended since the window opened (a recovery's, whose host was lost
    // mid-window) stopped this window's subtasks with the rest: at the requested parallelism it is
    // this rescale's compensation already, and a second replan would stop the world again for nothing.
    // Since RESCALE_JOINS_ONLY_ITS_WINDOW only a replan that began after the window opened is joined
    // (network chaos seed 48: a replan started by a subtask's failure before the layout write was
    // joined, and left the rescale's new subtask placed and the clock paused). Asked only where a
    // replan would be joined, so runs that never meet one replay without it.
    const joinsEnded = windowOpenedAt !== null && askPatch(RESCALE_JOINS_ENDED_REPLAN);
    const ofThisWindow = (startedAt: unknown) => typeof startedAt === 'string' && startedAt >= windowOpenedAt!;
    const ended = joinsEnded
      ? await store.findLedgerRow.executeWithOptions({ summary: `a replan of ${input.job} ended since the window opened?` }, [{ workload: input.job, kind: 'replan', sinceIso: windowOpenedAt! }])
      : null;
    const endedInputs = (ended?.inputs ?? {}) as { parallelism?: { to?: Record<string, number> }; startedAt?: string };
    const endedAtRequested = ended !== null && (ended.outcome === 'completed' || ended.outcome === 'degraded')
      && endedInputs.parallelism?.to?.[input.operator] === input.parallelism && (!askPatch(RESCALE_JOINS_ONLY_ITS_WINDOW) || ofThisWindow(endedInputs.startedAt));
    let joined = endedAtRequested ? ended : null;
    const ownReplan = async (onRunning: 'wait' | 'throw') => {
      const replanned = (await compensate(input.job, undefined, reason, input.stepTimeoutMs, { [input.operator]: input.parallelism }, { onRunning })) as StreamReplanOutcome;
      status.compensation!.outcome = { restoredFrom: replanned.restoredFrom, parallelism: replanned.parallelism, generation: replanned.generation };
    };
    if (joined === null) {
      try {
        await ownReplan('throw');
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        const judgesStart = joinsEnded && askPatch(RESCALE_JOINS_ONLY_ITS_WINDOW);
        const running = judgesStart
          ? await store.runningReplanStart.executeWithOptions({ summary: `when did the running replan:${input.job} start?` }, [{ workload: input.job }])
          : null;
        if (judgesStart && !ofThisWindow(running?.startedAt)) {
          // It began before this window changed anything: it does not cover it. Its end, then this one.
          await ownReplan('wait');
        } else {
          // said at once: the status query (and the Web UI) shows the join while the replan runs
          status.compensation.joined = `replan:${input.job}`;
          joined = await long.awaitLedgerRow.executeWithOptions(
            { summary: `join the running replan:${input.job}: await its ledger row` },
            [{ workload: input.job, kind: 'replan', sinceIso: attemptedAt, timeoutMs: 10 * input.stepTimeoutMs }],
          );
        }
      }
    }
    if (joined !== null) {
      status.compensation.joined = `replan:${input.job}`;
      if (joined.outcome !== 'completed' && joined.outcome !== 'degraded') throw ApplicationFailure.create({ type: 'task-failed', message: `the running replan:${input.job} ended ${joined.outcome}`, nonRetryable: true });
      const inputs = joined.inputs as { restoredFrom?: number | null; parallelism?: { from: Record<string, number>; to: Record<string, number> } | null; generation?: number };
      status.compensation.outcome = { restoredFrom: inputs.restoredFrom ?? null, parallelism: inputs.parallelism ?? null, generation: inputs.generation ?? null };
      // The replan joined was asked by another (a recovery, a failed subtask's report) and may have
      // applied another size: the request is done only if it applied the requested parallelism.
      const applied = inputs.parallelism?.to?.[input.operator] ?? null;
      if (applied !== input.parallelism && askPatch(JOINED_REPLAN_JUDGED)) {
        status.compensation.applied = applied;
        const mismatch = `requested ${input.operator} = ${input.parallelism}; the running replan:${input.job} it joined applied ${input.operator} = ${applied ?? 'unknown'}`;
        status.error = mismatch;
        // Before the layout write nothing of the rescale's own changed: refused, superseded by the
        // replan (runs before JOINED_REPLAN_REFUSED: failed). After it: compensated, as ever, saying so.
        status.outcome = outcome === 'replanned' ? (askPatch(JOINED_REPLAN_REFUSED) ? 'refused' : 'failed') : 'compensated';
        status.compensation.reason = `${reason}; ${mismatch}`;
        await ledger(status.outcome, { why: status.compensation.reason, restoredFrom: status.compensation.outcome.restoredFrom, joined: status.compensation.joined, applied }, { error: mismatch });
        return status;
      }
    }
    status.outcome = outcome;
    await ledger(outcome, { why: reason, restoredFrom: status.compensation.outcome?.restoredFrom ?? null, joined: status.compensation.joined });
    return status;
  });

  // Preparing: eligibility, capacity, the clock paused with nothing in flight, C assigned. Nothing
  // else changed yet: a failure or an abort here resumes the clock and ends the rescale.
  let plan: RescalePlan;
  // Since PREPARE_ENDS_BEFORE_RESUME an abort waits here until planRescale ended, so the resume
  // below comes after its last pause (before it, planRescale could pause the clock again after the
  // resume, and nothing would resume it).
  const waitsForPrepare = askPatch(PREPARE_ENDS_BEFORE_RESUME);
  /** A Temporal cancellation came (its planRescale may have ended well all the same). */
  const cancelRequested = () => waitsForPrepare && CancellationScope.current().consideredCancelled;
  try {
    plan = await aborts.guard(() => (waitsForPrepare ? preparing : long).planRescale.executeWithOptions(
      { summary: `prepare: can ${input.job}/${input.operator} cut over hot? pause the clock` },
      [{ job: input.job, operator: input.operator, parallelism: input.parallelism, pauseTimeoutMs: input.stepTimeoutMs }],
    ));
    if (aborts.reason || cancelRequested()) throw ApplicationFailure.create({ type: 'aborted', message: aborts.reason ?? CANCELLATION_REQUESTED, nonRetryable: true });
  } catch (error) {
    const abort = aborts.isAbort(error) || aborts.reason !== null || cancelRequested();
    return aborts.exit(async () => {
      // planRescale may have paused the clock before it failed or was cancelled: never leave it paused.
      const resumed = await windowCalls.resumeCheckpointClock.executeWithOptions({ summary: `resume the checkpoint clock of ${input.job}` }, [{ job: input.job }])
        .then((answer) => answer.resumed, (resumeError) => `not resumed: ${failureMessage(resumeError)}`);
      // What stopped the preparation was no refusal of the request (an agent that does not answer,
      // the store away): hot is not possible now, correct still is, through the replan at the asked
      // parallelism. Runs recorded before `rescale-plan-failure-replans` failed here.
      const refusal = error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && ['invalid-input', 'not-found'].includes(error.cause.type ?? '');
      const noRoom = error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === 'placement-unavailable';
      if (!abort && noRoom && askPatch(RESCALE_NO_ROOM_REFUSED)) {
        status.outcome = 'refused';
        status.error = failureMessage(error);
        enter('refused');
        await ledger('refused', { clockResumed: resumed }, { error: status.error });
        return status;
      }
      if (!abort && !refusal && askPatch(RESCALE_PLAN_FAILURE_REPLANS)) {
        status.hot = false;
        status.reason = `preparing the hot cutover failed (${failureMessage(error)}); the clock ${resumed === true ? 'resumed' : String(resumed)}`;
        enter('stop-the-world');
        await replan(`not hot: ${status.reason}`, 'replanned');
        enter(status.outcome === 'failed' ? 'aborted' : 'complete');
        return status;
      }
      status.outcome = abort ? 'cancelled' : 'failed';
      status.error = abort ? aborts.reason ?? CANCELLATION_REQUESTED : failureMessage(error);
      enter(abort ? 'cancelled' : 'aborted');
      await ledger(status.outcome, { clockResumed: resumed }, { error: status.error });
      if (abort) return status;
      throw error;
    });
  }
  status.from = plan.from;
  if (!plan.hot) {
    status.hot = false;
    status.reason = plan.reason;
    enter('stop-the-world');
    await replan(`not hot: ${plan.reason}`, 'replanned');
    enter(status.outcome === 'failed' ? 'aborted' : 'complete');
    return status;
  }
  status.hot = true;
  status.checkpoint = plan.checkpoint;
  status.added = plan.added.map((a) => a.taskId);
  status.retired = plan.retiring.map((a) => a.taskId);
  const refs = (assignments: { runtimeId: string; taskId: string }[]) => assignments.map(({ runtimeId, taskId }) => ({ runtimeId, taskId }));

  try {
    // From the layout write on, any failure, abort or cancellation ends in the replan at the requested parallelism.
    windowOpenedAt = new Date(Date.now()).toISOString();
    await aborts.guard(async () => {
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
      const stopped = await long.stopTasks.executeWithOptions(
        { summary: `stop ${plan.retiring.length} retired subtask(s) on ${runtimesOf(plan.retiring)}` }, [{ tasks: refs(plan.retiring), placementFence: final.placementFence }],
      );
      for (const receipt of stopped) {
        const counts = (receipt.receipt as { counts?: Record<string, number> } | undefined)?.counts;
        if (counts) status.retiredCounts[receipt.taskId] = counts;
      }
      await agentCalls.setCheckpointClock.executeWithOptions({ summary: `resume the checkpoint clock (C+1 = ${plan.checkpoint + 1} is the first of the new layout)` }, [{ coordinator: plan.coordinator, state: 'running' }]);
    });
  } catch (error) {
    const abort = aborts.isAbort(error) && aborts.reason !== null;
    const reason = abort ? aborts.reason! : `the cutover failed: ${failureMessage(error)}`;
    status.error = abort ? null : failureMessage(error);
    enter('aborted');
    await replan(reason, 'compensated');
    return status;
  }
  status.outcome = 'completed';
  enter('complete');
  await ledger('completed', { added: status.added, retired: status.retired });
  return status;
}
