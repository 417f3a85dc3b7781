// leaseSweeper (DESIGN.md §3 "Static stability"): the durable lease sweeper, one per task queue
// (id `lease-sweeper:<task queue>`, started by the worker next to the reconcile loop). Every third
// of the lease the API hands out, one pass (activity sweepLeases, on the database's clock): after the
// control plane itself was away (the API's liveness, or the sweeper's own gap) it waits one lease
// for heartbeats before declaring anything LOST; more than half of a zone's fresh runtimes expiring
// at once is a mass expiry (an event, no automatic recovery); every other expired runtime is
// declared LOST and gets a recoverRuntime child (id `recover:<runtime>`, abandoned on close, an
// already running one is fine). Continue-as-new keeps the history small.
import { continueAsNew, log, ParentClosePolicy, proxyActivities, sleep, startChild, WorkflowIdReusePolicy } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities, SweepPassResult } from '../activities';
import { RuntimeId } from '../protocol/names';
import { failureMessage, formatDuration, parseInput, profiles, trackOperation } from './operation';
import { recoverRuntime } from './recover-runtime';

const store = proxyActivities<Activities>(profiles.storeCall);

export const LeaseSweeperInputSchema = z.strictObject({
  /** passes before continue-as-new keeps the history small */
  passesPerRun: z.int().min(1).max(100_000).default(500),
  /** the pause after a failed pass */
  retryIntervalMs: z.int().min(100).max(3_600_000).default(2_000),
  /** handed to the recoveries it starts */
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).optional(),
  /** runtime → the LOST fence a recovery was started for (carried across continue-as-new: one automatic recovery per loss) */
  recoveries: z.record(RuntimeId, z.int().min(0)).default({}),
});
export type LeaseSweeperInput = z.input<typeof LeaseSweeperInputSchema>;

const phaseOf = (result: SweepPassResult): string => {
  if (result.guard) return `holding (${result.guard.code})`;
  if (result.massExpiry.length) return `idle (mass expiry held: ${result.massExpiry.map((m) => m.zone || 'no zone').join(', ')})`;
  return 'idle';
};

export async function leaseSweeper(rawInput: unknown = {}): Promise<never> {
  const input = parseInput(LeaseSweeperInputSchema, rawInput ?? {}, 'leaseSweeper');
  const op = trackOperation('lease-sweeper', null, 'lease sweeper');
  const started: Record<string, number> = { ...input.recoveries };
  /** Phases change rarely: a search-attribute upsert only when it does keeps each pass to a few events. */
  const enter = (phase: string) => {
    if (op.phase !== phase) op.enter(phase);
  };
  for (let pass = 0; pass < input.passesPerRun; pass++) {
    let result: SweepPassResult;
    try {
      result = await store.sweepLeases.executeWithOptions({ summary: `lease sweep ${pass + 1}` }, []);
    } catch (error) {
      // A loop that must run forever outlives a failed pass: note it and try again.
      log.warn('lease sweep failed', { error: failureMessage(error) });
      enter('idle (last pass failed)');
      await sleep(input.retryIntervalMs, { summary: `next pass in ${formatDuration(input.retryIntervalMs)}` });
      continue;
    }
    for (const due of result.recover) {
      if (started[due.runtimeId] === due.fence) continue; // one automatic recovery per loss
      try {
        await startChild(recoverRuntime, {
          workflowId: `recover:${due.runtimeId}`,
          args: [{ runtime: due.runtimeId, reason: due.reason, by: 'lease-sweeper', expectedFence: due.fence, convergeTimeoutMs: input.convergeTimeoutMs }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
          staticSummary: `recover ${due.runtimeId} (${due.reason})`,
        });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
      }
      started[due.runtimeId] = due.fence;
    }
    // Forget runtimes that are not LOST any more: a later loss of theirs is a new one.
    for (const runtimeId of Object.keys(started)) if (!result.lost.includes(runtimeId)) delete started[runtimeId];
    enter(phaseOf(result));
    await sleep(result.nextPassInMs, { summary: `next pass in ${formatDuration(result.nextPassInMs)}` });
  }
  return continueAsNew<typeof leaseSweeper>({ ...input, recoveries: started });
}
