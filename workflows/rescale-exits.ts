// How a rescaleOperator ends when it does not cut over (DESIGN.md §4 "Exits",
// reference/hot-rescale-at-a-barrier.txt): a preparation that failed or was aborted resumes the
// clock, then ends refused, cancelled, failed or, not hot, in the stop-the-world replan at the
// requested parallelism; a failure or an abort after the layout write ends in that replan as its
// compensation. The replan is the rescale's own, or one of the job already running that it joins.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { CANCELLATION_REQUESTED, failureMessage, profiles, type OperationShell } from './operation';
import { JOINED_REPLAN_JUDGED, JOINED_REPLAN_REFUSED, RESCALE_JOINS_ENDED_REPLAN, RESCALE_JOINS_ONLY_ITS_WINDOW, RESCALE_NO_ROOM_REFUSED, RESCALE_PLAN_FAILURE_REPLANS, askPatch } from './patches';
import type { RescaleRequest, RescaleStatus } from './rescale-status';
import { compensate, type StreamReplanOutcome } from './stop-the-world-replan';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);
/** Calls inside the paused window: a lost answer must reach the fallback in seconds, not after minutes of retries. */
const windowCalls = proxyActivities<Activities>(profiles.windowCall);

/** A rescale's shell: its ledger row takes the row's inputs (beside operator, hot, checkpoint) and its evidence. */
export type RescaleShell = OperationShell<RescaleStatus, [inputs: Record<string, unknown>, evidence?: unknown]>;

/** The exits of the rescale `op` of `input`; `windowOpenedAt()`: when its layout write began (null before). */
export function rescaleExits(op: RescaleShell, input: RescaleRequest, windowOpenedAt: () => string | null) {
  const { status, enter, ledger } = op;
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
  const replan = (reason: string, outcome: 'replanned' | 'compensated') => op.aborts.exit(async () => {
    status.compensation = { reason, outcome: null, joined: null };
    const attemptedAt = new Date(Date.now()).toISOString();
    const opened = windowOpenedAt();
    // A replan of the job that ended since the window opened (a recovery's, whose host was lost
    // mid-window) stopped this window's subtasks with the rest: at the requested parallelism it is
    // this rescale's compensation already, and a second replan would stop the world again for nothing.
    // Since RESCALE_JOINS_ONLY_ITS_WINDOW only a replan that began after the window opened is joined
    // (network chaos seed 48: a replan started by a subtask's failure before the layout write was
    // joined, and left the rescale's new subtask placed and the clock paused). Asked only where a
    // replan would be joined, so runs that never meet one replay without it.
    const joinsEnded = opened !== null && askPatch(RESCALE_JOINS_ENDED_REPLAN);
    const ofThisWindow = (startedAt: unknown) => typeof startedAt === 'string' && startedAt >= opened!;
    const ended = joinsEnded
      ? await store.findLedgerRow.executeWithOptions({ summary: `a replan of ${input.job} ended since the window opened?` }, [{ workload: input.job, kind: 'replan', sinceIso: opened! }])
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
        return;
      }
    }
    status.outcome = outcome;
    await ledger(outcome, { why: reason, restoredFrom: status.compensation.outcome?.restoredFrom ?? null, joined: status.compensation.joined });
  });

  /** Not hot (the plan says why, or its preparation failed): the stop-the-world replan at the requested parallelism, as asked. */
  const notHot = async (why: string): Promise<never> => {
    status.hot = false;
    status.reason = why;
    enter('stop-the-world');
    await replan(`not hot: ${why}`, 'replanned');
    enter(status.outcome === 'failed' ? 'aborted' : 'complete');
    return op.ended();
  };

  return {
    notHot,
    /**
     * Preparing failed, or was aborted (`abort`): nothing else changed. planRescale may have paused
     * the clock before it failed or was cancelled: it is resumed first, never left paused.
     */
    prepareFailed: (error: unknown, abort: boolean): Promise<never> => op.aborts.exit(async () => {
      const resumed = await windowCalls.resumeCheckpointClock.executeWithOptions({ summary: `resume the checkpoint clock of ${input.job}` }, [{ job: input.job }])
        .then((answer) => answer.resumed, (resumeError) => `not resumed: ${failureMessage(resumeError)}`);
      // What stopped the preparation was no refusal of the request (an agent that does not answer,
      // the store away): hot is not possible now, correct still is, through the replan at the asked
      // parallelism. Runs recorded before `rescale-plan-failure-replans` failed here.
      const refusal = error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && ['invalid-input', 'not-found'].includes(error.cause.type ?? '');
      const noRoom = error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === 'placement-unavailable';
      if (!abort && noRoom && askPatch(RESCALE_NO_ROOM_REFUSED)) {
        return op.end({ outcome: 'refused', error: failureMessage(error) }, { clockResumed: resumed }, { error: failureMessage(error) });
      }
      if (!abort && !refusal && askPatch(RESCALE_PLAN_FAILURE_REPLANS)) {
        return notHot(`preparing the hot cutover failed (${failureMessage(error)}); the clock ${resumed === true ? 'resumed' : String(resumed)}`);
      }
      const message = abort ? op.aborts.reason ?? CANCELLATION_REQUESTED : failureMessage(error);
      await op.record({ outcome: abort ? 'cancelled' : 'failed', phase: abort ? 'cancelled' : 'aborted', error: message }, { clockResumed: resumed }, { error: message });
      if (abort) return op.ended();
      throw error;
    }),
    /** After the layout write: a failure, an abort (`abort`, its reason) or a cancellation ends in the replan, `compensated`. */
    cutoverFailed: async (abort: string | null, error: unknown): Promise<never> => {
      status.error = abort !== null ? null : failureMessage(error);
      enter('aborted');
      await replan(abort ?? `the cutover failed: ${failureMessage(error)}`, 'compensated');
      return op.ended();
    },
  };
}
