// handleSubtaskFailures (DESIGN.md §5 "stream"): a stream subtask that fails, or whose peer died,
// cannot rejoin its dataflow, so its job is replanned from the last completed checkpoint. The
// heartbeat route only reports what the agents saw (signal `subtasksFailed`, with signal-with-start
// under `subtask-failures:<job>`); this workflow decides. It replans when a reported subtask is of
// the current placement and no hot rescale owns the job, once however many subtasks and heartbeats
// report it (`replan:<job>`, abandoned). A job whose replacement subtasks fail again is not
// replanned in a loop: each further replan waits twice as long as the one before.
import { condition, continueAsNew, defineSignal, ParentClosePolicy, proxyActivities, setHandler, sleep, startChild, WorkflowIdReusePolicy, allHandlersFinished } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { WorkloadName } from '../protocol/names';
import { FailedSubtasksSchema, type FailedSubtasks } from '../protocol/stream';
import { formatDuration, parseInput, profiles, trackOperation } from './operation';
import { stopTheWorldReplan } from './stop-the-world-replan';

const store = proxyActivities<Activities>(profiles.storeCall);

export const subtasksFailedSignal = defineSignal<[FailedSubtasks]>('subtasksFailed');

export const SubtaskFailuresInputSchema = z.strictObject({
  workload: WorkloadName,
  /** how long it waits for more reports before it ends */
  idleMs: z.int().min(100).max(3_600_000).default(60_000),
  /** the pause before a second replan of the job; it doubles with each further one, up to maxBackoffMs */
  backoffMs: z.int().min(0).max(3_600_000).default(30_000),
  maxBackoffMs: z.int().min(0).max(86_400_000).default(600_000),
  /** carried across continue-as-new */
  replans: z.int().min(0).default(0),
  pending: z.array(FailedSubtasksSchema).max(1_000).default([]),
});
export type SubtaskFailuresInput = z.input<typeof SubtaskFailuresInputSchema>;

/** Reports handled before continue-as-new keeps the history small. */
const BATCHES_PER_RUN = 200;

export async function handleSubtaskFailures(rawInput: unknown): Promise<{ replans: number }> {
  const input = parseInput(SubtaskFailuresInputSchema, rawInput, 'handleSubtaskFailures');
  const op = trackOperation('subtask-failures', input.workload, `subtask failures of ${input.workload}`);
  const pending: FailedSubtasks[] = [...input.pending];
  setHandler(subtasksFailedSignal, (report) => {
    // A signal is not validated by Temporal: keep only what the schema takes, bounded.
    // Reports repeat with every heartbeat: one entry per runtime, its task ids merged.
    const parsed = FailedSubtasksSchema.safeParse(report);
    if (!parsed.success) return;
    const same = pending.find((r) => r.runtimeId === parsed.data.runtimeId);
    if (same) same.taskIds = [...new Set([...same.taskIds, ...parsed.data.taskIds])].slice(0, 10_000);
    else if (pending.length < 1_000) pending.push(parsed.data);
  });
  let replans = input.replans;
  let idle = false;
  for (let batch = 0; batch < BATCHES_PER_RUN && !idle; batch++) {
    op.enter('waiting for reports');
    idle = !(await condition(() => pending.length > 0, input.idleMs));
    if (idle) break;
    const reports = pending.splice(0);
    op.enter('judging');
    const judge = () => store.currentSubtaskFailures.executeWithOptions(
      { summary: `which of ${reports.length} report(s) are of ${input.workload}'s current placement` },
      [{ workload: input.workload, reports }],
    );
    let verdict = await judge();
    if (verdict.current.length === 0 || verdict.busy) continue;
    if (replans > 0) {
      const backoff = Math.min(input.maxBackoffMs, input.backoffMs * 2 ** (replans - 1));
      op.enter(`backing off ${formatDuration(backoff)} (replan ${replans + 1})`);
      await sleep(backoff, { summary: `replan ${replans + 1} of ${input.workload} waits ${formatDuration(backoff)}` });
      // What the pause changed (a recovery's replan, a new generation) decides again.
      verdict = await judge();
      if (verdict.current.length === 0 || verdict.busy) continue;
    }
    const failed = verdict.current.map((r) => `${r.taskIds.join(', ')} on ${r.runtimeId}`).join('; ');
    try {
      await startChild(stopTheWorldReplan, {
        workflowId: `replan:${input.workload}`,
        args: [{ workload: input.workload, reason: `subtask ${failed} failed` }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: `replan stream job ${input.workload}: a subtask failed`,
      });
      replans++;
    } catch (error) {
      // A replan already runs: the failures it stops are its own.
      if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
    }
  }
  await condition(allHandlersFinished);
  if (!idle || pending.length > 0) return continueAsNew<typeof handleSubtaskFailures>({ ...input, replans, pending: pending.splice(0) });
  op.enter('done');
  return { replans };
}
