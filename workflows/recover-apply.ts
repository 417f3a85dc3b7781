// One workload's part of a recoverRuntime (DESIGN.md §4.4): its decided target applied
// make-before-break (never draining a task on the lost runtime: its tasks are revoked when it
// heartbeats again), then the tasks that prove convergence awaited; when another change wrote the
// workload's placement first, its decision is made again on that placement. A stream job that lost
// a subtask: its stop-the-world replan from the last completed checkpoint.
import { isCancellation, proxyActivities } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities, RecoveryItem } from '../activities';
import { applyPlacement, withoutRemovalsOn } from './apply-placement';
import { failureMessage, formatDuration, isStalePlan, profiles, runtimesOf } from './operation';
import { RECOVERY_REPLAN_CANCELLED_BY_HAND, askPatch } from './patches';
import type { RecoveryDecisionStatus } from './recover-status';
import { compensate } from './stop-the-world-replan';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);

const MAX_DECISION_ATTEMPTS = 3;

/** Carries out `first` (the decision `state` shows) for `runtime`; a failure is recorded in `state` and rethrown. */
export async function applyRecoveryDecision(
  first: RecoveryItem, state: RecoveryDecisionStatus, context: { runtime: string; convergeTimeoutMs: number; aborted: () => boolean },
): Promise<void> {
  const { runtime, convergeTimeoutMs } = context;
  let item = first;
  for (let attempt = 1; ; attempt++) {
    state.attempts = attempt;
    if (!item.plan || !item.decision.target) {
      state.applied = 'skipped';
      return;
    }
    try {
      await applyPlacement(withoutRemovalsOn(item.plan, [runtime]), {
        convergeTimeoutMs,
        onPhase: (phase) => {
          state.phase = phase;
        },
        onCommitted: () => {
          state.committed = true;
        },
      });
      const converge = item.decision.converge;
      if (converge.length) {
        state.phase = 'converging';
        await long.awaitTasksReady.executeWithOptions(
          { summary: `converge ${state.workload}: ${converge.length} task(s) on ${runtimesOf(converge)} ready (timeout ${formatDuration(convergeTimeoutMs)})` },
          [{ tasks: converge, timeoutMs: convergeTimeoutMs }],
        );
      }
      state.phase = 'converged';
      state.applied = 'converged';
      return;
    } catch (error) {
      // Another change wrote the placement first: decide again on it (before this recovery wrote anything).
      if (!state.committed && isStalePlan(error) && attempt < MAX_DECISION_ATTEMPTS && !context.aborted()) {
        const again = await store.prepareRecovery.executeWithOptions(
          { summary: `decide again for ${state.workload} (its placement moved)` }, [{ runtimeId: runtime, only: [state.workload] }],
        );
        const next = again.items[0];
        if (!next) {
          state.applied = 'skipped';
          state.phase = 'nothing-left';
          state.summary = `${state.workload}: its placement moved and assigns nothing to ${runtime} any more`;
          return;
        }
        Object.assign(state, next.decision, { planId: next.plan?.id ?? null });
        item = next;
        continue;
      }
      state.applied = isCancellation(error) ? 'cancelled' : 'failed';
      state.error = failureMessage(error);
      throw error;
    }
  }
}

/**
 * A replan this recovery started that someone else cancelled (the Web UI, `temporal workflow cancel
 * replan:<w>`, chaos seed 33): an operator's decision, not a failure. Asked where no cancellation of
 * the recovery reaches its children, so a cancelled child was cancelled by hand.
 */
export const replanCancelledByHand = (error: unknown): boolean => isCancellation(error) && askPatch(RECOVERY_REPLAN_CANCELLED_BY_HAND);

/**
 * A stream job that lost a subtask runs again only through the stop-the-world replan from its last
 * completed checkpoint, unless a failed subtask's report started it already (then that one carries
 * it out). `cancelled`: that replan was cancelled by hand; a failure is recorded in `state` and rethrown.
 */
export async function replanRecoveredStream(
  state: RecoveryDecisionStatus, context: { runtime: string; reason: string; convergeTimeoutMs: number },
): Promise<'replanned' | 'cancelled'> {
  state.phase = 'replanning';
  try {
    await compensate(state.workload, state.replicas, `runtime ${context.runtime} lost: ${context.reason}`, context.convergeTimeoutMs);
    state.summary = `${state.workload}: replanned from its last completed checkpoint`;
  } catch (error) {
    if (replanCancelledByHand(error)) {
      state.applied = 'cancelled';
      state.error = `replan:${state.workload} was cancelled before it finished: the job may be partly deployed; start that replan again`;
      return 'cancelled';
    }
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
      state.applied = 'failed';
      state.error = failureMessage(error);
      throw error;
    }
    state.summary = `${state.workload}: its replan (replan:${state.workload}) was already running`;
  }
  state.applied = 'replanned';
  state.phase = 'replanned';
  return 'replanned';
}
