// Starting operations: one workflow per target at a time (the workflow id is the target), so a
// second request for a busy target is refused with the running workflow's id.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { ApiDeps } from './deps';
import { ApiError } from '../http/errors';

import type { StartedOperation, Workload } from '../protocol';
export type { StartedOperation };

/** The workload an operation is asked for: defined and not retired, else 404. */
export async function requireActiveWorkload(deps: ApiDeps, name: string): Promise<Workload> {
  const workload = await deps.registry.getWorkload(name);
  if (!workload || workload.retired) throw new ApiError('not-found', `no active workload ${name}`);
  return workload;
}

export async function startOperation(
  deps: ApiDeps,
  options: { workflow: (input: any) => Promise<unknown>; workflowId: string; input: unknown; summary: string },
): Promise<StartedOperation> {
  const client = await deps.temporal.client().catch(() => {
    throw new ApiError('unavailable', 'Temporal is not reachable; try again');
  });
  try {
    const handle = await client.workflow.start(options.workflow, {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: options.workflowId,
      args: [options.input],
      staticSummary: options.summary,
    });
    const uiUrl = `${deps.config.SCALEGATE_UI_URL}/namespaces/${deps.config.TEMPORAL_NAMESPACE}/workflows/${encodeURIComponent(handle.workflowId)}/${handle.firstExecutionRunId}`;
    return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, kind: options.workflow.name, uiUrl };
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      throw new ApiError('operation-in-progress', `an operation on ${options.workflowId} is already running`, {
        workflowId: options.workflowId,
      });
    }
    throw error;
  }
}
