import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { describeObject, kubernetesOf, statusOfOutcome, AbortAnswerSchema, OperationListQuerySchema, OperationListSchema, OperationParamsSchema, OperationReadQuerySchema, OperationReportQuerySchema, OperationViewSchema, ScaleRequestSchema, ScaleStatusSchema, StartedOperationSchema, WorkloadParamsSchema } from '../../protocol';
import { abortSignal, approveUpdate, scaleOut } from '../../workflows/scale-out';
import { statusQueryOf, type OperationStatus } from '../../workflows/status';
import type { ScaleStatus } from '../../workflows/scale-operation';
import { scaleIn } from '../../workflows/scale-in';
import { applyPlan } from '../../workflows/apply-plan';
import { recoverRuntime } from '../../workflows/recover-runtime';
import { rescaleOperator } from '../../workflows/rescale-operator';
import { stopTheWorldReplan } from '../../workflows/stop-the-world-replan';
import type { ApiDeps } from '../deps';
import { checkReplicaLimit } from '../limits';
import { ApiError } from '../../http/errors';
import { reportUrlOf, requireActiveWorkload, startOperation } from '../operations';
import { listOperations, runOfStart } from '../operation-list';
import { chooseScale, isRefusal, optionsNotTaken } from '../../domain/scale-choice';
import { defineRoute, ok } from '../../http/route';
import { renderOperationReport, REPORT_CONTENT_SECURITY_POLICY } from '../report';
import { rollout } from '../../workflows/rollout';
import { z } from 'zod';
import { PHASE_KEY } from '../../protocol/search-attributes';

/** Workflows that handle the abort signal (→ the stop-the-world replan once they changed something; a rollout rolls back). */
const ABORTABLE: string[] = [scaleOut.name, scaleIn.name, applyPlan.name, recoverRuntime.name, rescaleOperator.name, rollout.name];

/**
 * How long a running operation's status query may take. A query is answered by a worker: one that
 * is down or too busy leaves the detail unknown (null; the phase from the operation's
 * ScalegatePhase search attribute, which Temporal holds), rather than the caller waiting out the
 * route's deadline for a 503 though Temporal knows the operation runs. Under the CLI's 3 s before
 * it says it is still waiting for the API.
 */
export const STATUS_QUERY_TIMEOUT_MS = 2_000;

/** A running scale operation's fields when no worker answered its status query in time: each unknown. */
export const UNKNOWN_SCALE_STATUS = {
  gates: null, evidenceGap: null, plan: null, evidence: { baseline: null, after: null, comparison: null },
  approval: null, scaleIn: null, compensation: null, tierRules: null, soakEndsAt: null, steps: null, kubernetes: null,
} as const;

/** The innermost cause's message: "Activity task failed" says less than the activity's own failure. */
function rootCauseMessage(error: Error): string {
  let cause: Error = error;
  while (cause.cause instanceof Error) cause = cause.cause;
  return cause.message;
}

export function operationRoutes(deps: ApiDeps) {
  const handleOf = async (workflowId: string, runId?: string) => (await deps.temporal.client()).workflow.getHandle(workflowId, runId);
  /** A running operation's status by its query, within STATUS_QUERY_TIMEOUT_MS; null when no worker answered in time. */
  const queriedStatus = async (handle: Awaited<ReturnType<typeof handleOf>>, query: NonNullable<ReturnType<typeof statusQueryOf>>) =>
    (await deps.temporal.client()).connection.withDeadline(Date.now() + STATUS_QUERY_TIMEOUT_MS, () => handle.query(query)).catch(() => null);

  /**
   * GET /v1/operations/:workflowId's answer: what the report page shows too. With a run id, exactly
   * that run (404 when it is not a run of the workflow id); without, the newest run of the id.
   */
  const describeOperation = async (workflowId: string, runId?: string): Promise<z.output<typeof OperationViewSchema>> => {
    const handle = await handleOf(workflowId, runId);
    let description;
    try {
      description = await handle.describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new ApiError('not-found', runId ? `no run ${runId} of operation ${workflowId}` : `no operation ${workflowId}`);
      throw error;
    }
    const temporalStatus = description.status.name;
    // A completed operation's result is its final status (the scale operations, rescale, recovery) or its outcome.
    let detail: (OperationStatus | Record<string, unknown>) | null = null;
    if (temporalStatus === 'COMPLETED') detail = (await handle.result()) as OperationStatus | Record<string, unknown>;
    else if (temporalStatus === 'RUNNING') {
      const query = statusQueryOf(description.type);
      detail = query ? await queriedStatus(handle, query) : null;
    }
    const scaleKind = description.type === scaleOut.name || description.type === scaleIn.name;
    const scale = scaleKind ? (detail as ScaleStatus | null) : null;
    let status: string;
    if (temporalStatus === 'RUNNING') status = 'running';
    else if (temporalStatus === 'COMPLETED') status = statusOfOutcome(String(detail?.outcome ?? 'completed'));
    else if (temporalStatus === 'CANCELLED' || temporalStatus === 'TERMINATED') status = 'cancelled';
    else status = 'failed';
    let failure: string | null = null;
    if (status === 'failed') failure = await handle.result().then(() => null, rootCauseMessage);
    return {
      workflowId: description.workflowId, runId: description.runId, kind: description.type, status, temporalStatus,
      reportUrl: reportUrlOf(deps, description.workflowId, { runId: description.runId }),
      phase: detail?.phase ?? (temporalStatus === 'RUNNING' ? description.typedSearchAttributes.get(PHASE_KEY) ?? null : null), startedAt: description.startTime.toISOString(), closedAt: description.closeTime?.toISOString() ?? null,
      // The scale operations' status (by the workflow type, not the shape) is spread out; every other kind's is `result`.
      ...(scale ? {
        gates: scale.gates, evidenceGap: scale.evidenceGap, plan: scale.plan, evidence: { baseline: scale.baseline, after: scale.after, comparison: scale.comparison },
        approval: scale.approval, scaleIn: scale.scaleIn ?? null, compensation: scale.compensation, tierRules: scale.tierRules ?? null,
        soakEndsAt: scale.soakEndsAt ?? null, steps: scale.steps ?? null, kubernetes: scale.kubernetes ?? null,
      } : scaleKind ? UNKNOWN_SCALE_STATUS : { result: detail }),
      failure,
    };
  };

  return [
    defineRoute({
      method: 'POST', path: '/v1/workloads/:name/scale', access: 'operator', startsOperation: true, operationId: 'scaleWorkload',
      response: { schema: StartedOperationSchema, status: { 202: 'scaleOut or scaleIn started under scale:<name>, or stopTheWorldReplan under replan:<name>' } }, errors: [404, 409, 422],
      summary: 'scale to a replica count: starts scaleOut or scaleIn (from current vs requested) under scale:<name>; a stream job replans every operator proportionally under replan:<name>',
      params: WorkloadParamsSchema, body: ScaleRequestSchema,
      handler: async ({ params, body, request }) => {
        const workload = await requireActiveWorkload(deps, params.name);
        checkReplicaLimit(body.replicas, deps.config.SCALEGATE_MAX_REPLICAS);
        // A Kubernetes workload has no placement: its desired replicas are what the last operation
        // left (the workflow reads the object itself and refuses a size that moved meanwhile).
        const object = kubernetesOf(workload);
        const current = object ? Number(workload.replicas) : (await deps.registry.getPlacement(params.name))?.assignments.length ?? 0;
        const choice = chooseScale({ door: 'request', workload: params.name, kind: workload.kind, current, target: body.replicas, approval: body.approval });
        if (isRefusal(choice)) throw new ApiError(choice.refused, choice.message, { current });
        const { replicas, approval, reason, ...options } = body;
        const dropped = optionsNotTaken(choice, options, `${current} → ${replicas}`);
        if (dropped) throw new ApiError(dropped.refused, dropped.message, { current });
        const started = choice.workflow === 'stopTheWorldReplan'
          ? await startOperation(deps, { request, body,
            workflow: stopTheWorldReplan, workflowId: choice.workflowId,
            input: { workload: params.name, replicas, reason: reason ?? 'scale requested via API', ...(options.convergeTimeoutMs !== undefined ? { convergeTimeoutMs: options.convergeTimeoutMs } : {}) },
            summary: `scale stream job ${params.name} ${current} → ${replicas} subtasks (stop-the-world replan)`,
          })
          : await startOperation(deps, { request, body,
            workflow: choice.workflow === 'scaleOut' ? scaleOut : scaleIn, workflowId: choice.workflowId,
            input: { workload: params.name, replicas, reason: reason ?? 'requested via API', ...(choice.workflow === 'scaleOut' ? { approval } : {}), ...options },
            summary: `scale ${params.name}${object ? ` (${describeObject(object)})` : ''} ${current} → ${replicas}`,
          });
        return ok(started, 202);
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/operations', access: 'viewer', operationId: 'listOperations',
      summary: 'past and running operations (one entry per run), newest first, each with its workflow id, run id, kind, status, start time and its run\'s report link',
      query: OperationListQuerySchema, response: { schema: OperationListSchema, status: { 200: 'the newest runs that match, newest first' } },
      handler: async ({ query }) => ok({ operations: await listOperations(deps, query) }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/operations/:workflowId', access: 'viewer',
      summary: 'one operation: kind, status, phase, gates, plan, evidence, compensation; ?runId= reads that run (else the newest run of the id)', operationId: 'getOperation',
      params: OperationParamsSchema, query: OperationReadQuerySchema, response: { schema: OperationViewSchema, status: { 200: 'the operation' } }, errors: [404],
      handler: async ({ params, query }) => ok(await describeOperation(params.workflowId, query.runId)),
    }),
    defineRoute({
      method: 'GET', path: '/v1/operations/:workflowId/report', access: 'viewer', browser: true, operationId: 'getOperationReport',
      summary: 'the operation\'s evidence as an HTML page (no external assets): charts of throughput, backlog, latency and errors at the baseline and after, then the verdict table; ?runId= (or ?start=, the Web UI link\'s start id) shows that run, else the newest. A browser may sign in with HTTP Basic, the viewer token as the password',
      params: OperationParamsSchema, query: OperationReportQuerySchema, response: { schema: z.string(), contentType: 'text/html', status: { 200: 'the report page' } }, errors: [404],
      handler: async ({ params, query }) => {
        const runId = query.runId ?? (query.start ? await runOfStart(deps, params.workflowId, query.start) : undefined);
        return {
          status: 200, contentType: 'text/html; charset=utf-8', body: renderOperationReport(await describeOperation(params.workflowId, runId)),
          headers: { 'content-security-policy': REPORT_CONTENT_SECURITY_POLICY, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' },
        };
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/operations/:workflowId/approve', access: 'operator', summary: 'approve a change waiting for manual approval', operationId: 'approveOperation',
      response: { schema: ScaleStatusSchema, status: { 200: 'approved: the operation goes on' } }, errors: [404, 409],
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
      method: 'POST', path: '/v1/operations/:workflowId/abort', access: 'operator', summary: 'abort an operation (after a change: the replan compensates)', operationId: 'abortOperation',
      params: OperationParamsSchema, response: { schema: AbortAnswerSchema, status: { 202: 'the abort was signalled' } }, errors: [404, 409],
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
