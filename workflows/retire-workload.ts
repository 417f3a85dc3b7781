// retireWorkload: DELETE /v1/workloads/:name empties the placement and stops every task; one on a
// runtime that is down is revoked when that runtime heartbeats again (it never keeps running).
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { WorkloadName } from '../protocol/names';
import { parseInput, profiles, reportingOutcome, trackOperation } from './operation';
import { RETIRE_CLEAR_FIRST, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);

export const RetireInputSchema = z.object({ workload: WorkloadName, reason: z.string().max(500).optional() });

/** DELETE /v1/workloads/:name: stop every task, empty the placement, ledger. */
export async function retireWorkload(rawInput: unknown): Promise<{ stopped: string[]; unreachable?: string[] }> {
  return reportingOutcome(() => runRetireWorkload(rawInput));
}

async function runRetireWorkload(rawInput: unknown): Promise<{ stopped: string[]; unreachable?: string[] }> {
  const input = parseInput(RetireInputSchema, rawInput, 'retireWorkload');
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('retire', input.workload, `retire ${input.workload}`);
  const before = await store.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
  let stopped: { taskId: string }[];
  let unreachable: string[] = [];
  if (askPatch(RETIRE_CLEAR_FIRST)) {
    // The decision first: nothing is placed any more. Then stop what answers; a runtime that is down
    // now is told its tasks are revoked when it heartbeats again, so none keeps running.
    op.enter('clearing-placement');
    await store.clearPlacement.executeWithOptions({ summary: `clear placement of ${input.workload}` }, [{ workload: input.workload, writer: workflowId }]);
    op.enter('stopping-tasks');
    const retired = await long.stopRetiredTasks.executeWithOptions({ summary: `stop every task of ${input.workload}` }, [{ workload: input.workload }]);
    unreachable = retired.unreachable;
    // The stop reports what was still running when it listed each agent: a heartbeat may have been
    // told to revoke a task first (the placement is already empty), and a retried attempt finds what
    // the first one stopped gone. What the placement held on the runtimes that answered is stopped.
    const answered = (before?.assignments ?? []).filter((a) => !unreachable.includes(a.runtimeId));
    stopped = [...answered, ...retired.stopped.filter((t) => !answered.some((a) => a.taskId === t.taskId))];
  } else {
    op.enter('stopping-tasks');
    stopped = await long.stopAllTasksOfWorkload.executeWithOptions({ summary: `stop every task of ${input.workload}` }, [{ workload: input.workload }]);
    op.enter('clearing-placement');
    await store.clearPlacement.executeWithOptions({ summary: `clear placement of ${input.workload}` }, [{ workload: input.workload, writer: workflowId }]);
  }
  await store.appendLedger.executeWithOptions({ summary: `ledger: retire ${input.workload}` }, [{
    kind: 'retire', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: 0,
    reason: input.reason ?? 'retired', workflowId, runId, outcome: 'completed',
    ...(unreachable.length ? { inputs: { unreachable, note: 'their tasks are revoked when they heartbeat again' } } : {}),
  }]);
  op.enter('done');
  return { stopped: stopped.map((t) => t.taskId), ...(unreachable.length ? { unreachable } : {}) };
}

