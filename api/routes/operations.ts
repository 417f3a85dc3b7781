import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { OperationParamsSchema, ScaleRequestSchema, WorkloadParamsSchema } from '../../protocol';
import { abortSignal, approveUpdate, scaleOut, statusQuery } from '../../workflows/scale-out';
import { scaleIn } from '../../workflows/scale-in';
import { applyPlan } from '../../workflows/apply-plan';
import { recoverRuntime } from '../../workflows/recover-runtime';
import { rescaleOperator } from '../../workflows/rescale-operator';
import { stopTheWorldReplan } from '../../workflows/stop-the-world-replan';
import type { ApiDeps } from '../deps';
import { checkReplicaLimit } from '../limits';
import { ApiError } from '../../http/errors';
import { requireActiveWorkload, startOperation } from '../operations';
import { defineRoute, ok } from '../../http/route';

/** Workflows that handle the abort signal (→ the stop-the-world replan once they changed something). */
const ABORTABLE: string[] = [scaleOut.name, scaleIn.name, applyPlan.name, recoverRuntime.name, rescaleOperator.name];

/** The innermost cause's message: "Activity task failed" says less than the activity's own failure. */
function rootCauseMessage(error: Error): string {
  let cause: Error = error;
  while (cause.cause instanceof Error) cause = cause.cause;
  return cause.message;
}

/** The workflow's own outcome → the API's status words (DESIGN.md §6). */
const STATUS_OF_OUTCOME: Record<string, string> = {
  running: 'running', completed: 'completed', refused: 'refused', compensated: 'compensated', rejected: 'cancelled', cancelled: 'cancelled', failed: 'failed',
  // applied with a shortfall recorded as unplaced
  degraded: 'completed',
  // a rescale that could not cut over hot and went to the stop-the-world replan, as asked
  replanned: 'completed',
};

export function operationRoutes(deps: ApiDeps) {
  const handleOf = async (workflowId: string) => (await deps.temporal.client()).workflow.getHandle(workflowId);

  return [
    defineRoute({
      method: 'POST', path: '/v1/workloads/:name/scale', access: 'operator', startsOperation: true,
      summary: 'scale to a replica count: starts scaleOut or scaleIn (from current vs requested) under scale:<name>; a stream job replans every operator proportionally under replan:<name>',
      params: WorkloadParamsSchema, body: ScaleRequestSchema,
      handler: async ({ params, body , request }) => {
        const workload = await requireActiveWorkload(deps, params.name);
        const placement = await deps.registry.getPlacement(params.name);
        const current = placement?.assignments.length ?? 0;
        if (body.replicas === 'all') throw new ApiError('validation-failed', 'scale takes a replica count; "all" is a workload definition (PUT)');
        checkReplicaLimit(body.replicas, deps.config.SCALEGATE_MAX_REPLICAS);
        if (body.replicas === current) throw new ApiError('conflict', `${params.name} already runs ${current} replica(s)`, { current });
        if (workload.kind === 'stream') {
          // A stream job's size is its operators' parallelism: every operator scales proportionally,
          // through the stop-the-world replan from the last completed checkpoint.
          if (body.approval === 'manual') throw new ApiError('validation-failed', 'manual approval applies to scale-out of services and consumers; a stream job scales through the stop-the-world replan');
          const started = await startOperation(deps, { request,
            workflow: stopTheWorldReplan, workflowId: `replan:${params.name}`,
            input: { workload: params.name, replicas: body.replicas, reason: body.reason ?? 'scale requested via API' },
            summary: `scale stream job ${params.name} ${current} → ${body.replicas} subtasks (stop-the-world replan)`,
          });
          return ok(started, 202);
        }
        const kind = body.replicas > current ? 'scaleOut' : 'scaleIn';
        if (kind === 'scaleIn' && body.approval === 'manual') throw new ApiError('validation-failed', 'manual approval applies to scale-out only');
        const { replicas, approval, reason, ...options } = body;
        const started = await startOperation(deps, { request,
          workflow: kind === 'scaleOut' ? scaleOut : scaleIn, workflowId: `scale:${params.name}`,
          input: { workload: params.name, replicas, reason: reason ?? 'requested via API', ...(kind === 'scaleOut' ? { approval } : {}), ...options },
          summary: `scale ${params.name} ${current} → ${replicas}`,
        });
        return ok(started, 202);
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/operations/:workflowId', access: 'viewer',
      summary: 'one operation: kind, status, phase, gates, plan, evidence, compensation',
      params: OperationParamsSchema,
      handler: async ({ params }) => {
        const handle = await handleOf(params.workflowId);
        let description;
        try {
          description = await handle.describe();
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) throw new ApiError('not-found', `no operation ${params.workflowId}`);
          throw error;
        }
        const temporalStatus = description.status.name;
        let detail: Record<string, unknown> | null = null;
        if (temporalStatus === 'COMPLETED') detail = (await handle.result()) as Record<string, unknown>;
        else if (temporalStatus === 'RUNNING') detail = (await handle.query(statusQuery).catch(() => null)) as Record<string, unknown> | null;
        let status: string;
        if (temporalStatus === 'RUNNING') status = 'running';
        else if (temporalStatus === 'COMPLETED') status = STATUS_OF_OUTCOME[String(detail?.outcome ?? 'completed')] ?? 'completed';
        else if (temporalStatus === 'CANCELLED' || temporalStatus === 'TERMINATED') status = 'cancelled';
        else status = 'failed';
        let failure: string | null = null;
        if (status === 'failed') failure = await handle.result().then(() => null, rootCauseMessage);
        return ok({
          workflowId: description.workflowId, runId: description.runId, kind: description.type, status, temporalStatus,
          phase: detail?.phase ?? null, startedAt: description.startTime.toISOString(), closedAt: description.closeTime?.toISOString() ?? null,
          // The scale operations' status (discriminated by its kind) is spread out; every other kind's is `result`.
          ...(detail && (detail.kind === 'scaleOut' || detail.kind === 'scaleIn') ? {
            gates: detail.gates, evidenceGap: detail.evidenceGap, plan: detail.plan, evidence: { baseline: detail.baseline, after: detail.after, comparison: detail.comparison },
            approval: detail.approval, scaleIn: detail.scaleIn ?? null, compensation: detail.compensation, tierRules: detail.tierRules ?? null,
          } : { result: detail }),
          failure,
        });
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/operations/:workflowId/approve', access: 'operator', summary: 'approve a change waiting for manual approval',
      // an update waits for a worker: after a worker crash Temporal moves the task on within ~10 s
      deadlineMs: 60_000,
      params: OperationParamsSchema,
      handler: async ({ params }) => {
        try {
          return ok(await (await handleOf(params.workflowId)).executeUpdate(approveUpdate, { args: [{ by: 'operator' }] }));
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) throw new ApiError('not-found', `no running operation ${params.workflowId}`);
          if (error instanceof WorkflowUpdateFailedError) throw new ApiError('conflict', error.cause?.message ?? error.message);
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/operations/:workflowId/abort', access: 'operator', summary: 'abort an operation (after a change: the replan compensates)',
      params: OperationParamsSchema,
      handler: async ({ params }) => {
        try {
          const handle = await handleOf(params.workflowId);
          const { type, status } = await handle.describe();
          if (status.name !== 'RUNNING') throw new ApiError('conflict', `${params.workflowId} is not running (${status.name.toLowerCase()})`);
          if (!ABORTABLE.includes(type)) {
            throw new ApiError('conflict', `a ${type} cannot be aborted: only ${ABORTABLE.join(', ')} take an abort (a ${type} is itself a placement change or its compensation)`);
          }
          await handle.signal(abortSignal, { reason: 'aborted via API' });
          return ok({ workflowId: params.workflowId, aborting: true }, 202);
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) throw new ApiError('not-found', `no running operation ${params.workflowId}`);
          throw error;
        }
      },
    }),
  ];
}
