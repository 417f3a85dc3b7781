// reconcile: the durable reconcile loop (DESIGN.md §3 placement), one pass per interval.
import { condition, continueAsNew, defineSignal, log, ParentClosePolicy, proxyActivities, setHandler, startChild, WorkflowIdReusePolicy } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { applyPlan } from './apply-plan';
import { failureMessage, formatDuration, parseInput, profiles, trackOperation } from './operation';
import { RECONCILE_MARKER_AFTER_CHILDREN, RECONCILE_WAKE, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);

export const ReconcileInputSchema = z.object({
  intervalMs: z.int().min(100).max(3_600_000).default(15_000),
  /** passes before continue-as-new keeps the history small */
  passesPerRun: z.int().min(1).max(10_000).default(200),
});

/**
 * Asks for the next pass now rather than at the end of the interval: the API sends it when a
 * workload is defined or a runtime registers, so a new workload is placed within a pass instead of
 * up to an interval later (15 s under npm start). Fire-and-forget: a lost wake only means the
 * interval's pass places it.
 */
export const wakeSignal = defineSignal('wake');

/**
 * The reconcile loop: a durable timer workflow (id `reconcile:<task queue>`, started by the worker). Each pass places pending
 * workloads, grows `all` workloads onto new matching runtimes and retries unplaced shortfalls,
 * each through applyPlan under the workload's `scale:<name>` id. A busy workload waits a pass: the
 * pass that found it busy is not recorded as seen, so the next one plans it again.
 */
export async function reconcile(rawInput: unknown = {}): Promise<never> {
  const input = parseInput(ReconcileInputSchema, rawInput ?? {}, 'reconcile');
  const op = trackOperation('reconcile', null, 'reconcile loop');
  const nextPass = { summary: `next pass in ${formatDuration(input.intervalMs)}` };
  let woken = false;
  // Patched: a run begun before the handler existed ignored a wake (its timer ran out), and replays so.
  if (askPatch(RECONCILE_WAKE)) {
    setHandler(wakeSignal, () => {
      woken = true;
    });
  }
  /** The interval's timer, cut short by a wake (one that came during the pass skips it). */
  const untilNextPass = async (): Promise<void> => {
    if (!woken) await condition(() => woken, input.intervalMs, nextPass);
    woken = false;
  };
  for (let pass = 0; pass < input.passesPerRun; pass++) {
    op.enter('reconciling');
    // The skip marker is written after the applies below have started (not inside the pass), so a
    // pass interrupted in between is redone rather than skipped. Patched: older runs wrote it inside.
    const markerAfterChildren = askPatch(RECONCILE_MARKER_AFTER_CHILDREN);
    let result: Awaited<ReturnType<Activities['reconcilePass']>>;
    try {
      result = await store.reconcilePass.executeWithOptions({ summary: `reconcile pass ${pass + 1}` }, [markerAfterChildren ? { deferMarker: true } : {}]);
    } catch (error) {
      // A loop that must run forever outlives a failed pass: note it and try again next interval.
      log.warn('reconcile pass failed', { error: failureMessage(error) });
      op.enter('idle (last pass failed)');
      await untilNextPass();
      continue;
    }
    const busy: string[] = [];
    for (const { workload, planId } of result.planIds) {
      try {
        await startChild(applyPlan, {
          workflowId: `scale:${workload}`,
          args: [{ planId, reason: 'reconcile' }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          staticSummary: `reconcile ${workload}`,
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
        busy.push(workload);
      }
    }
    if (markerAfterChildren && !result.skipped) {
      await store.recordReconcilePass.executeWithOptions({ summary: `record the pass (${result.planIds.length - busy.length} apply(s) started${busy.length ? `, ${busy.length} workload(s) busy` : ''})` }, [{ inputsKey: result.inputsKey, busy }]);
    }
    op.enter(result.skipped ? 'idle (skipped)' : 'idle');
    await untilNextPass();
  }
  return continueAsNew<typeof reconcile>(input);
}
