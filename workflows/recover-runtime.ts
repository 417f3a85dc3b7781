// recoverRuntime (DESIGN.md §4.4), id `recover:<runtime>`: started by the lease sweeper when a
// runtime's lease ran out, or by an operator (POST /v1/runtimes/:id/recover, `scalegate recover`,
// `temporal workflow start`). Mark the runtime LOST and bump its fence (claims pause at once; its
// old fence is refused) → decide per assignment it held, from the workload's kind, contract and
// stored owner (domain/recovery.ts, in an activity: only the lost runtime's assignments move) →
// apply each decided target make-before-break (never draining a task on the LOST runtime: its
// tasks are revoked when it heartbeats again) → converge (new tasks, and survivors that took
// partitions, ready) → ledger row `recover`. An abort, or a failure after the runtime was declared
// LOST, ends in the stop-the-world replan of every affected workload that did not converge.
import { defineQuery, isCancellation, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { z } from 'zod';
import type { Activities, RecoveryItem } from '../activities';
import type { WorkloadRecovery } from '../domain/recovery';
import { RuntimeId, type ReplicaCount } from '../protocol/names';
import { applyPlacement, DEFAULT_CONVERGE_TIMEOUT_MS, withoutRemovalsOn, type PlacementOutcome } from './apply-placement';
import { failureMessage, isStalePlan, formatDuration, handleAborts, parseInput, profiles, reportingOutcome, runtimesOf, trackOperation } from './operation';
import { compensate } from './stop-the-world-replan';
import { RECOVERY_REPLAN_CANCELLED_BY_HAND, askPatch } from './patches';

const isAlreadyStarted = (error: unknown) => error instanceof WorkflowExecutionAlreadyStartedError;

export { abortSignal } from './operation';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);

export const RecoverRuntimeInputSchema = z.strictObject({
  runtime: RuntimeId,
  reason: z.string().min(1).max(500).default('requested'),
  /** who asked: the lease sweeper (a lease ran out) or an operator */
  by: z.enum(['operator', 'lease-sweeper']).default('operator'),
  /**
   * The fence the lease sweeper declared the runtime LOST under. A runtime that is not LOST any more
   * registered again since: it came back, and there is nothing to recover.
   */
  expectedFence: z.int().min(1).optional(),
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).default(DEFAULT_CONVERGE_TIMEOUT_MS),
});
export type RecoverRuntimeInput = z.input<typeof RecoverRuntimeInputSchema>;

/** `cancelled`: an abort or a Temporal cancellation before any placement moved (the runtime stays LOST). */
export type RecoveryOutcome = 'running' | 'completed' | 'degraded' | 'not-needed' | 'compensated' | 'rejected' | 'cancelled' | 'failed';

/** One workload's decision, as it is carried out. */
export interface RecoveryDecisionStatus extends WorkloadRecovery {
  planId: string | null;
  /** where its apply is: writing-placement, starting-tasks, converging, converged, ... */
  phase: string;
  applied: 'pending' | 'converged' | 'skipped' | 'failed' | 'cancelled' | 'compensated' | 'replanned';
  /** whether this recovery wrote its placement */
  committed: boolean;
  attempts: number;
  error: string | null;
}

export interface RecoveryStatus {
  kind: 'recoverRuntime';
  runtime: string;
  by: 'operator' | 'lease-sweeper';
  reason: string;
  phase: string;
  outcome: RecoveryOutcome;
  /** the declaration: declared now, or already LOST (or came back), with the fence it is LOST under */
  lost: { outcome: 'declared' | 'already-lost' | 'came-back'; fence: number; lostAt: string | null } | null;
  decisions: RecoveryDecisionStatus[];
  compensation: { reason: string; workloads: { workload: string; replicas: ReplicaCount; outcome: PlacementOutcome | null }[] } | null;
  error: string | null;
  /** workflow time (ISO-8601): started, declared LOST (the store's clock), decided, converged, ended */
  timings: { startedAt: string; lostAt: string | null; decidedAt: string | null; convergedAt: string | null; endedAt: string | null };
}

/** GET /v1/operations/recover:<runtime> reads it (same name as the scale operations' `status`). */
export const recoveryStatusQuery = defineQuery<RecoveryStatus>('status');

const MAX_DECISION_ATTEMPTS = 3;

export async function recoverRuntime(rawInput: unknown): Promise<RecoveryStatus> {
  return reportingOutcome(() => runRecoverRuntime(rawInput));
}

async function runRecoverRuntime(rawInput: unknown): Promise<RecoveryStatus> {
  const input = parseInput(RecoverRuntimeInputSchema, rawInput, 'recoverRuntime');
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('recover', null, `recover ${input.runtime} (${input.by})`);
  const at = () => new Date().toISOString();
  const status: RecoveryStatus = {
    kind: 'recoverRuntime', runtime: input.runtime, by: input.by, reason: input.reason, phase: op.phase, outcome: 'running',
    lost: null, decisions: [], compensation: null, error: null,
    timings: { startedAt: at(), lostAt: null, decidedAt: null, convergedAt: null, endedAt: null },
  };
  setHandler(recoveryStatusQuery, () => status);
  const aborts = handleAborts();
  const enter = (phase: string) => {
    op.enter(phase);
    status.phase = phase;
  };
  // The exit and its ledger row run in a non-cancellable scope: a cancellation cannot cut them.
  const end = (outcome: RecoveryOutcome, phase: string, reason: string) => aborts.exit(async () => {
    status.outcome = outcome;
    status.timings.endedAt = at();
    enter(phase);
    const lostReplicas = status.decisions.reduce((n, d) => n + d.storedOwner.tasks.length, 0);
    const placedElsewhere = status.decisions.reduce((n, d) => n + d.decisions.filter((r) => r.to !== null).length, 0);
    await store.appendLedger.executeWithOptions({ summary: `ledger: recover ${input.runtime} ${outcome}` }, [{
      kind: 'recover', workload: null, fromReplicas: lostReplicas, toReplicas: placedElsewhere,
      reason: `${input.by}: ${reason}`,
      inputs: {
        runtime: input.runtime, by: input.by, request: input.reason, lost: status.lost,
        decisions: status.decisions.map((d) => ({
          workload: d.workload, kind: d.kind, summary: d.summary, planId: d.planId, applied: d.applied, unplaced: d.unplaced,
          replicas: d.decisions.map((r) => ({ index: r.index, lostTaskId: r.lostTaskId, action: r.action, to: r.to, partitions: r.partitions, handedTo: r.handedTo })),
          warnings: d.warnings,
        })),
      },
      workflowId, runId, outcome,
      evidence: { timings: status.timings, compensation: status.compensation, error: status.error },
    }]);
    return status;
  });

  // 1. Declare LOST: claims pause at once, its old fence is refused from now on.
  enter('marking-lost');
  let items: RecoveryItem[];
  try {
    const marked = await aborts.guard(() => store.markRuntimeLost.executeWithOptions(
      { summary: `declare ${input.runtime} LOST and bump its fence` },
      [{ runtimeId: input.runtime, expectedFence: input.expectedFence, by: input.by === 'operator' ? 'recover (operator)' : 'recover (lease-sweeper)', reason: input.reason }],
    ));
    status.lost = { outcome: marked.outcome, fence: marked.runtime.fence, lostAt: marked.runtime.lostAt };
    status.timings.lostAt = marked.runtime.lostAt;
    if (marked.outcome === 'came-back') {
      return end('not-needed', 'not-needed', `${input.runtime} registered again (fence ${marked.runtime.fence}, ${marked.runtime.status}) after it was declared LOST under fence ${input.expectedFence}: nothing to recover`);
    }
    // 2. Decide, per workload it held, on one snapshot: only its assignments are recomputed.
    enter('deciding');
    const prepared = await aborts.guard(() => store.prepareRecovery.executeWithOptions({ summary: `decide what ${input.runtime} held` }, [{ runtimeId: input.runtime }]));
    items = prepared.items;
  } catch (error) {
    if (aborts.isAbort(error)) return end('cancelled', 'cancelled', `${aborts.reason} (before any placement moved; ${input.runtime} stays ${status.lost ? 'LOST' : 'as it was'})`);
    status.error = failureMessage(error);
    await end('failed', 'failed', status.error);
    throw error;
  }
  status.decisions = items.map((item) => ({
    ...item.decision, planId: item.plan?.id ?? null, phase: 'decided', applied: item.plan ? 'pending' : 'skipped', committed: false, attempts: 0, error: null,
  }));
  status.timings.decidedAt = at();
  const byWorkload = new Map(status.decisions.map((d) => [d.workload, d]));

  /** One workload: apply its target make-before-break, then await the tasks that prove convergence. */
  const applyOne = async (first: RecoveryItem): Promise<void> => {
    const state = byWorkload.get(first.decision.workload)!;
    let item = first;
    for (let attempt = 1; ; attempt++) {
      state.attempts = attempt;
      if (!item.plan || !item.decision.target) {
        state.applied = 'skipped';
        return;
      }
      try {
        await applyPlacement(withoutRemovalsOn(item.plan, [input.runtime]), {
          convergeTimeoutMs: input.convergeTimeoutMs,
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
            { summary: `converge ${state.workload}: ${converge.length} task(s) on ${runtimesOf(converge)} ready (timeout ${formatDuration(input.convergeTimeoutMs)})` },
            [{ tasks: converge, timeoutMs: input.convergeTimeoutMs }],
          );
        }
        state.phase = 'converged';
        state.applied = 'converged';
        return;
      } catch (error) {
        // Another change wrote the placement first: decide again on it (before this recovery wrote anything).
        if (!state.committed && isStalePlan(error) && attempt < MAX_DECISION_ATTEMPTS && !aborts.reason) {
          const again = await store.prepareRecovery.executeWithOptions(
            { summary: `decide again for ${state.workload} (its placement moved)` }, [{ runtimeId: input.runtime, only: [state.workload] }],
          );
          const next = again.items[0];
          if (!next) {
            state.applied = 'skipped';
            state.phase = 'nothing-left';
            state.summary = `${state.workload}: its placement moved and assigns nothing to ${input.runtime} any more`;
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
  };

  // 3. Apply every decided target (independent workloads, in parallel); an abort cancels them.
  const failures: unknown[] = [];
  if (!aborts.reason && items.some((i) => i.plan)) {
    enter('applying');
    try {
      await aborts.guard(async () => {
        const settled = await Promise.allSettled(items.map(applyOne));
        for (const s of settled) if (s.status === 'rejected') failures.push(s.reason);
      });
    } catch (error) {
      failures.push(error);
    }
    // A Temporal cancellation is an abort: its reason is recorded, and what was applied is compensated below.
    failures.some((failure) => aborts.isAbort(failure));
  }

  /** Steps 3b–5: stream replans, compensation, the end. Runs whole, in a scope no cancellation cuts. */
  const finish = async (failures: unknown[]): Promise<RecoveryStatus> => {
    // A replan this recovery started that someone else cancelled (the Web UI, `temporal workflow
    // cancel replan:<w>`, chaos seed 33): an operator's decision, not a failure. No cancellation of
    // this recovery reaches its children here, so a cancelled child was cancelled by hand.
    const cancelledByHand = (error: unknown) => isCancellation(error) && askPatch(RECOVERY_REPLAN_CANCELLED_BY_HAND);
    const cancelledReplans: string[] = [];
    // 3b. Stream jobs: the stop-the-world replan from the last completed checkpoint, unless a failed
    // subtask's report started it already (then that one carries it out).
    for (const state of status.decisions.filter((d) => d.kind === 'stream' && d.decisions.some((r) => r.action === 'replanned'))) {
      // Even after an abort: a job that lost a subtask runs again only through this replan.
      state.phase = 'replanning';
      try {
        await compensate(state.workload, state.replicas, `runtime ${input.runtime} lost: ${input.reason}`, input.convergeTimeoutMs);
        state.summary = `${state.workload}: replanned from its last completed checkpoint`;
      } catch (error) {
        if (cancelledByHand(error)) {
          state.applied = 'cancelled';
          state.error = `replan:${state.workload} was cancelled before it finished: the job may be partly deployed; start that replan again`;
          cancelledReplans.push(state.workload);
          continue;
        }
        if (!isAlreadyStarted(error)) {
          state.applied = 'failed';
          state.error = failureMessage(error);
          failures.push(error);
          continue;
        }
        state.summary = `${state.workload}: its replan (replan:${state.workload}) was already running`;
      }
      state.applied = 'replanned';
      state.phase = 'replanned';
    }

    // 4. An abort or a failure: the stop-the-world replan of every affected workload that did not converge.
    const unfinished = status.decisions.filter((d) => d.target !== null && d.applied !== 'converged' && d.applied !== 'skipped');
    if ((aborts.reason || failures.length) && unfinished.length) {
      const reason = aborts.reason ?? `recovery of ${input.runtime} failed: ${failures.map(failureMessage).join('; ')}`;
      enter('compensating');
      status.compensation = { reason, workloads: unfinished.map((d) => ({ workload: d.workload, replicas: d.replicas, outcome: null })) };
      try {
        for (const entry of status.compensation.workloads) {
          entry.outcome = await compensate(entry.workload, entry.replicas, reason, input.convergeTimeoutMs);
          byWorkload.get(entry.workload)!.applied = 'compensated';
        }
      } catch (error) {
        if (cancelledByHand(error)) {
          return end('cancelled', 'cancelled', `${reason}; its compensation (a stop-the-world replan) was cancelled before it finished: start that replan again`);
        }
        status.error = `compensation failed: ${failureMessage(error)}`;
        await end('failed', 'failed', status.error);
        throw error;
      }
      return end('compensated', 'compensated', reason);
    }
    if (aborts.reason && !items.some((i) => i.plan)) return end('cancelled', 'cancelled', `${aborts.reason} (${input.runtime} stays LOST; it held nothing to move)`);
    if (cancelledReplans.length && !failures.length) {
      return end('cancelled', 'cancelled', `${cancelledReplans.map((w) => `replan:${w}`).join(', ')} cancelled before it finished: the job may be partly deployed; start that replan again`);
    }
    // A failure nothing compensated (a stream replan that failed): never `completed` over it.
    if (failures.length) {
      status.error = failures.map(failureMessage).join('; ');
      return end('failed', 'failed', `recovery of ${input.runtime} did not converge: ${status.error}`);
    }

    // 5. Converged: every decided target is written and its new owners are ready.
    status.timings.convergedAt = at();
    enter('converged');
    const unplaced = status.decisions.filter((d) => d.unplaced);
    const said = status.decisions.length ? status.decisions.map((d) => d.summary).join(' | ') : `${input.runtime} held no assignment`;
    return end(unplaced.length ? 'degraded' : 'completed', 'done', `${input.reason}: ${said}`);
  };
  return aborts.exit(() => finish(failures));
}
