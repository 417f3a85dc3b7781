// retireWorkload: DELETE /v1/workloads/:name stops every task and empties the placement.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { WorkloadName } from '../protocol';
import { parseInput, profiles, trackOperation } from './operation';

const store = proxyActivities<Activities>(profiles.storeWrite);
const long = proxyActivities<Activities>(profiles.longDrain);

export const RetireInputSchema = z.object({ workload: WorkloadName, reason: z.string().max(500).optional() });

/** DELETE /v1/workloads/:name: stop every task, empty the placement, ledger. */
export async function retireWorkload(rawInput: unknown): Promise<{ stopped: string[] }> {
  const input = parseInput(RetireInputSchema, rawInput, 'retireWorkload');
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('retire', input.workload, `retire ${input.workload}`);
  const before = await store.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
  op.enter('stopping-tasks');
  const stopped = await long.stopAllTasksOfWorkload.executeWithOptions({ summary: `stop every task of ${input.workload}` }, [{ workload: input.workload }]);
  op.enter('clearing-placement');
  await store.clearPlacement.executeWithOptions({ summary: `clear placement of ${input.workload}` }, [{ workload: input.workload, writer: workflowId }]);
  await store.appendLedger.executeWithOptions({ summary: `ledger: retire ${input.workload}` }, [{
    kind: 'retire', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: 0,
    reason: input.reason ?? 'retired', workflowId, runId, outcome: 'completed',
  }]);
  op.enter('done');
  return { stopped: stopped.map((t) => t.taskId) };
}

