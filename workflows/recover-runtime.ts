// recoverRuntime (DESIGN.md §4.4), id `recover:<runtime>`: started by the lease sweeper when a
// runtime's lease ran out, or by an operator (POST /v1/runtimes/:id/recover, `scalegate recover`,
// `temporal workflow start`). Mark the runtime LOST and bump its fence (claims pause at once; its
// old fence is refused) → decide per assignment it held, from the workload's kind, contract and
// stored owner (domain/recovery.ts, in an activity: only the lost runtime's assignments move) →
// apply each decided target make-before-break (never draining a task on the LOST runtime: its
// tasks are revoked when it heartbeats again) → converge (new tasks, and survivors that took
// partitions, ready) → ledger row `recover`. An abort, or a failure after the runtime was declared
// LOST, ends in the stop-the-world replan of every affected workload that did not converge.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { beginOperation, checkInput, failureMessage, profiles, reportingOutcome } from './operation';
import { applyRecoveryDecision, replanCancelledByHand, replanRecoveredStream } from './recover-apply';
import { recoveryRow, recoveryStatusQuery, type RecoveryOutcome, type RecoveryStatus } from './recover-status';
import { compensate } from './stop-the-world-replan';

export { abortSignal } from './operation';
export { recoveryStatusQuery, type RecoverRuntimeInput, type RecoveryDecisionStatus, type RecoveryOutcome, type RecoveryStatus } from './recover-status';

const store = proxyActivities<Activities>(profiles.storeCall);

export async function recoverRuntime(rawInput: unknown): Promise<RecoveryStatus> {
  return reportingOutcome(() => runRecoverRuntime(rawInput));
}

async function runRecoverRuntime(rawInput: unknown): Promise<RecoveryStatus> {
  const input = await checkInput('recoverRuntime', rawInput);
  const at = () => new Date().toISOString();
  const status: RecoveryStatus = {
    kind: 'recoverRuntime', runtime: input.runtime, by: input.by, reason: input.reason, phase: 'starting', outcome: 'running',
    lost: null, decisions: [], compensation: null, error: null,
    timings: { startedAt: at(), lostAt: null, decidedAt: null, convergedAt: null, endedAt: null },
  };
  const op = beginOperation({
    operation: 'recover', workload: null, summary: `recover ${input.runtime} (${input.by})`, status, query: recoveryStatusQuery,
    ledger: { calls: store, subject: `recover ${input.runtime}`, row: (reason: string) => recoveryRow(status, reason) },
    onEnd: () => { status.timings.endedAt = at(); },
  });
  const { aborts, enter } = op;
  const end = (outcome: RecoveryOutcome, phase: string, reason: string, error?: string) => op.end({ outcome, phase, error }, reason);
  /** Before any placement moved: an abort ends the recovery `cancelled`, a failure `failed`. */
  const beforeAnyMove = async (abort: string | null, error: unknown): Promise<never> => {
    if (abort !== null) return end('cancelled', 'cancelled', `${abort} (before any placement moved; ${input.runtime} stays ${status.lost ? 'LOST' : 'as it was'})`);
    await op.record({ outcome: 'failed', error: failureMessage(error) }, failureMessage(error));
    throw error;
  };

  // 1. Declare LOST: claims pause at once, its old fence is refused from now on.
  enter('marking-lost');
  const marked = await op.guarded(() => store.markRuntimeLost.executeWithOptions(
    { summary: `declare ${input.runtime} LOST and bump its fence` },
    [{ runtimeId: input.runtime, expectedFence: input.expectedFence, by: input.by === 'operator' ? 'recover (operator)' : 'recover (lease-sweeper)', reason: input.reason }],
  ), beforeAnyMove);
  status.lost = { outcome: marked.outcome, fence: marked.runtime.fence, lostAt: marked.runtime.lostAt };
  status.timings.lostAt = marked.runtime.lostAt;
  const { items } = await op.guarded(async () => {
    if (marked.outcome === 'came-back') {
      return end('not-needed', 'not-needed', `${input.runtime} registered again (fence ${marked.runtime.fence}, ${marked.runtime.status}) after it was declared LOST under fence ${input.expectedFence}: nothing to recover`);
    }
    // 2. Decide, per workload it held, on one snapshot: only its assignments are recomputed.
    enter('deciding');
    return store.prepareRecovery.executeWithOptions({ summary: `decide what ${input.runtime} held` }, [{ runtimeId: input.runtime }]);
  }, beforeAnyMove);
  status.decisions = items.map((item) => ({
    ...item.decision, planId: item.plan?.id ?? null, phase: 'decided', applied: item.plan ? 'pending' : 'skipped', committed: false, attempts: 0, error: null,
  }));
  status.timings.decidedAt = at();
  const byWorkload = new Map(status.decisions.map((d) => [d.workload, d]));

  // 3. Apply every decided target (independent workloads, in parallel); an abort cancels them.
  const failures: unknown[] = [];
  if (!aborts.reason && items.some((i) => i.plan)) {
    enter('applying');
    const context = { runtime: input.runtime, convergeTimeoutMs: input.convergeTimeoutMs, aborted: () => aborts.reason !== null };
    try {
      await aborts.guard(async () => {
        const settled = await Promise.allSettled(items.map((item) => applyRecoveryDecision(item, byWorkload.get(item.decision.workload)!, context)));
        for (const s of settled) if (s.status === 'rejected') failures.push(s.reason);
      });
    } catch (error) {
      failures.push(error);
    }
    // A Temporal cancellation is an abort: its reason is recorded, and what was applied is compensated below.
    failures.some((failure) => aborts.isAbort(failure));
  }

  // Steps 3b–5 run whole, in a scope no cancellation cuts.
  return aborts.exit(async () => {
    const cancelledReplans: string[] = [];
    // 3b. Stream jobs: the stop-the-world replan from the last completed checkpoint (even after an abort).
    for (const state of status.decisions.filter((d) => d.kind === 'stream' && d.decisions.some((r) => r.action === 'replanned'))) {
      try {
        if (await replanRecoveredStream(state, input) === 'cancelled') cancelledReplans.push(state.workload);
      } catch (error) {
        failures.push(error);
      }
    }

    // 4. An abort or a failure: the stop-the-world replan of every affected workload that did not converge.
    const unfinished = status.decisions.filter((d) => d.target !== null && d.applied !== 'converged' && d.applied !== 'skipped');
    if ((aborts.reason || failures.length) && unfinished.length) {
      const reason = aborts.reason ?? `recovery of ${input.runtime} failed: ${failures.map(failureMessage).join('; ')}`;
      return op.compensate(async () => {
        status.compensation = { reason, workloads: unfinished.map((d) => ({ workload: d.workload, replicas: d.replicas, outcome: null })) };
        try {
          for (const entry of status.compensation.workloads) {
            entry.outcome = await compensate(entry.workload, entry.replicas, reason, input.convergeTimeoutMs);
            byWorkload.get(entry.workload)!.applied = 'compensated';
          }
        } catch (error) {
          if (!replanCancelledByHand(error)) throw error;
          return () => end('cancelled', 'cancelled', `${reason}; its compensation (a stop-the-world replan) was cancelled before it finished: start that replan again`);
        }
      }, { compensated: () => [reason], failed: (error) => [error] });
    }
    if (aborts.reason && !items.some((i) => i.plan)) return end('cancelled', 'cancelled', `${aborts.reason} (${input.runtime} stays LOST; it held nothing to move)`);
    if (cancelledReplans.length && !failures.length) {
      return end('cancelled', 'cancelled', `${cancelledReplans.map((w) => `replan:${w}`).join(', ')} cancelled before it finished: the job may be partly deployed; start that replan again`);
    }
    // A failure nothing compensated (a stream replan that failed): never `completed` over it.
    if (failures.length) {
      const error = failures.map(failureMessage).join('; ');
      return end('failed', 'failed', `recovery of ${input.runtime} did not converge: ${error}`, error);
    }

    // 5. Converged: every decided target is written and its new owners are ready.
    status.timings.convergedAt = at();
    enter('converged');
    const said = status.decisions.length ? status.decisions.map((d) => d.summary).join(' | ') : `${input.runtime} held no assignment`;
    return end(status.decisions.some((d) => d.unplaced) ? 'degraded' : 'completed', 'done', `${input.reason}: ${said}`);
  });
}
