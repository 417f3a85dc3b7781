// handleCrashLoops (DESIGN.md §3 "Supervision"): a task its agent reports crash-looping (restarted
// too often within the window) is decided on here, once per task and episode. The heartbeat route
// only reports what the agents saw (signal `crashLooping`, with signal-with-start under
// `crash-loops:<workload>`). The decision (domain/supervision.ts decideCrashLoop, in an activity)
// moves a task whose fault is its runtime's through recovery's path (the plan applied by applyPlan
// under `scale:<workload>`, one operation per workload at a time), or leaves it under its backoff
// with the reason `state` shows. A task left is decided again after `redecideAfterMs`; a move that
// did not complete is decided again at the next report.
import { condition, continueAsNew, defineSignal, executeChild, allHandlersFinished, ParentClosePolicy, proxyActivities, setHandler, WorkflowIdReusePolicy } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { z } from 'zod';
import type { Activities } from '../activities';
import { DEFAULT_RESTART_POLICY, type CrashLoopAction } from '../domain/supervision';
import { WorkloadName } from '../protocol/names';
import { CrashLoopingTasksSchema, type CrashLoopingTasks } from '../protocol/task-reports';
import { applyPlan } from './apply-plan';
import { failureMessage, parseInput, profiles, trackOperation } from './operation';

const store = proxyActivities<Activities>(profiles.storeCall);

export const crashLoopingSignal = defineSignal<[CrashLoopingTasks]>('crashLooping');

const DecidedSchema = z.strictObject({ action: z.enum(['move', 'leave', 'none']), atMs: z.number() });

export const CrashLoopsInputSchema = z.strictObject({
  workload: WorkloadName,
  /** how long it waits for more reports before it ends */
  idleMs: z.int().min(100).max(3_600_000).default(60_000),
  /** a task left crash-looping is decided again this long after (a runtime may have joined since) */
  redecideAfterMs: z.int().min(1_000).max(86_400_000).default(DEFAULT_RESTART_POLICY.crashLoopWindowMs),
  /** the window in which one move of the workload's crash-looping tasks makes a further one its own fault */
  moveWindowMs: z.int().min(1_000).max(86_400_000).default(DEFAULT_RESTART_POLICY.crashLoopWindowMs),
  /** carried across continue-as-new: `<runtime>/<task>` → the last decision and when (workflow time) */
  decided: z.record(z.string().max(300), DecidedSchema).default({}),
  pending: z.array(CrashLoopingTasksSchema).max(1_000).default([]),
});
export type CrashLoopsInput = z.input<typeof CrashLoopsInputSchema>;

export interface CrashLoopsResult {
  decisions: { runtimeId: string; taskId: string; action: CrashLoopAction; reason: string; applied: string | null }[];
}

/** Reports handled before continue-as-new keeps the history small. */
const BATCHES_PER_RUN = 200;
/** Decisions a run keeps in its result (the newest). */
const RESULT_DECISIONS = 50;

export async function handleCrashLoops(rawInput: unknown): Promise<CrashLoopsResult> {
  const input = parseInput(CrashLoopsInputSchema, rawInput, 'handleCrashLoops');
  const op = trackOperation('crash-loops', input.workload, `crash loops of ${input.workload}`);
  const pending: CrashLoopingTasks[] = [...input.pending];
  const decided = { ...input.decided };
  const result: CrashLoopsResult = { decisions: [] };
  setHandler(crashLoopingSignal, (report) => {
    // A signal is not validated by Temporal: keep only what the schema takes, bounded. Reports
    // repeat with every heartbeat: one entry per runtime, its task ids merged.
    const parsed = CrashLoopingTasksSchema.safeParse(report);
    if (!parsed.success) return;
    const same = pending.find((r) => r.runtimeId === parsed.data.runtimeId);
    if (same) same.taskIds = [...new Set([...same.taskIds, ...parsed.data.taskIds])].slice(0, 10_000);
    else if (pending.length < 1_000) pending.push(parsed.data);
  });
  let idle = false;
  for (let batch = 0; batch < BATCHES_PER_RUN && !idle; batch++) {
    op.enter('waiting for reports');
    idle = !(await condition(() => pending.length > 0, input.idleMs));
    if (idle) break;
    const now = Date.now(); // workflow time: deterministic
    for (const [key, d] of Object.entries(decided)) if (now - d.atMs >= input.redecideAfterMs) delete decided[key];
    for (const report of pending.splice(0)) {
      for (const taskId of report.taskIds) {
        const key = `${report.runtimeId}/${taskId}`;
        if (decided[key]) continue;
        op.enter(`deciding ${taskId} on ${report.runtimeId}`);
        const decision = await store.decideCrashLoop.executeWithOptions(
          { summary: `decide crash-looping ${taskId} on ${report.runtimeId}` },
          [{ workload: input.workload, runtimeId: report.runtimeId, taskId, windowMs: input.moveWindowMs }],
        );
        let applied: string | null = null;
        if (decision.action === 'move' && decision.planId) {
          op.enter(`moving ${taskId} off ${report.runtimeId}`);
          applied = await moveThroughApplyPlan(input.workload, decision.planId, `crash loop: ${decision.reason}`);
        }
        // A move that did not complete (another operation held the workload, or the plan went stale) is decided again at the next report.
        if (decision.action !== 'move' || applied === 'completed' || applied === 'degraded') decided[key] = { action: decision.action, atMs: Date.now() };
        result.decisions = [...result.decisions, { runtimeId: report.runtimeId, taskId, action: decision.action, reason: decision.reason, applied }].slice(-RESULT_DECISIONS);
      }
    }
  }
  await condition(allHandlersFinished);
  if (!idle || pending.length > 0) return continueAsNew<typeof handleCrashLoops>({ ...input, decided, pending: pending.splice(0) });
  op.enter('done');
  return result;
}

/** applyPlan of the move under `scale:<workload>`: its outcome, `busy` when another operation holds the workload, or `failed: …`. */
async function moveThroughApplyPlan(workload: string, planId: string, reason: string): Promise<string> {
  try {
    const outcome = await executeChild(applyPlan, {
      workflowId: `scale:${workload}`,
      args: [{ planId, reason }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      staticSummary: `apply ${workload}: ${reason}`.slice(0, 200),
    });
    return outcome.outcome;
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'busy';
    return `failed: ${failureMessage(error)}`;
  }
}
