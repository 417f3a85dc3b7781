// Starting operations: one workflow per target at a time (the workflow id is the target), so a
// second request for a busy target is refused with the running workflow's id.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { ApiDeps } from './deps';
import { ApiError } from '../http/errors';
import { apiUrlOf } from './config';

import { ADMIT_BY_MEMO, IDEMPOTENCY_KEY, type StartedOperation, type Workload } from '../protocol';
import type { RecordedStart } from '../store/operation-starts';
export type { StartedOperation };

/** The workload an operation is asked for: defined and not retired, else 404. */
export async function requireActiveWorkload(deps: ApiDeps, name: string): Promise<Workload> {
  const workload = await deps.registry.getWorkload(name);
  if (!workload || workload.retired) throw new ApiError('not-found', `no active workload ${name}`);
  return workload;
}

/** The Idempotency-Key header of a request (undefined when absent); a malformed one is a 400. */
export function idempotencyKeyOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const raw = headers['idempotency-key'];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !IDEMPOTENCY_KEY.test(raw)) {
    throw new ApiError('bad-request', 'Idempotency-Key must be 1 to 200 characters of A-Z a-z 0-9 . _ : -');
  }
  return raw;
}

type StartRequest = { headers: Record<string, string | string[] | undefined>; method: string; url: string };
const requestLineOf = (request: StartRequest) => `${request.method} ${request.url.split('?')[0]}`;

/** The operation this request's Idempotency-Key already started (null: none, or no key). */
export async function earlierStart(deps: ApiDeps, request: StartRequest): Promise<StartedOperation | null> {
  const key = idempotencyKeyOf(request.headers);
  if (!key) return null;
  const earlier = await deps.operationStarts.get(key);
  return earlier ? sameRequest(key, earlier, requestLineOf(request)) : null;
}

/** How long before the request deadline a start must have reached Temporal: its answer needs time to come back. */
const ADMISSION_MARGIN_MS = 2_000;

/**
 * Starts one operation, unambiguously (DESIGN.md §4 "Unambiguous starts"):
 * - the operation an Idempotency-Key starts is recorded: a later request with the key is answered
 *   it (by `earlierStart`, which the route builder asks first for every start route);
 * - a 503 means nothing started, ever: the start carries an admission deadline (memo
 *   `scalegateAdmitBy`) that the workflow checks against the time Temporal recorded the start
 *   (workflows/operation.ts `refuseLateStart`), and the API answers 503 only after that deadline.
 */
export async function startOperation(
  deps: ApiDeps,
  options: {
    workflow: (input: any) => Promise<unknown>; workflowId: string; input: unknown; summary: string;
    /** the request's headers (its Idempotency-Key) and what it was, e.g. "POST /v1/workloads/web/scale" */
    request?: StartRequest;
  },
): Promise<StartedOperation> {
  const key = options.request ? idempotencyKeyOf(options.request.headers) : undefined;
  const admitWithinMs = Math.max(1_000, deps.config.SCALEGATE_REQUEST_DEADLINE_MS - ADMISSION_MARGIN_MS);
  const admitBy = new Date(Date.now() + admitWithinMs);
  const unavailable = () => new ApiError('unavailable', `Temporal did not take the start of ${options.workflowId} within ${admitWithinMs} ms; nothing was started (a start that arrives later is refused). Try again${key ? ' with the same Idempotency-Key' : ''}`);
  const client = await deps.temporal.client().catch(() => {
    throw unavailable();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const start = client.workflow.start(options.workflow, {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: options.workflowId,
      args: [options.input],
      staticSummary: options.summary,
      // the Web UI shows this under the workflow's details: a link to its evidence page
      staticDetails: reportDetails(deps, options.workflowId),
      memo: { [ADMIT_BY_MEMO]: admitBy.toISOString() },
    });
    // Armed on the deadline itself, not admitWithinMs from now: awaiting the client took time.
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(unavailable()), Math.max(0, admitBy.getTime() - Date.now()));
    });
    const handle = await Promise.race([start, late]);
    // An answer read after the deadline (a busy event loop runs the timer late) may be of a start
    // Temporal recorded after it, which refuses itself (workflows/operation.ts refuseLateStart):
    // Temporal's record decides, as it does for the workflow. Unreadable: the start stands.
    if (Date.now() > admitBy.getTime()) {
      const recorded = await client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).describe().catch(() => null);
      if (recorded && recorded.startTime.getTime() > admitBy.getTime()) throw unavailable();
    }
    const uiUrl = `${deps.config.SCALEGATE_UI_URL}/namespaces/${deps.config.TEMPORAL_NAMESPACE}/workflows/${encodeURIComponent(handle.workflowId)}/${handle.firstExecutionRunId}`;
    const started: StartedOperation = { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, kind: options.workflow.name, uiUrl };
    if (!key || !options.request) return started;
    const requestLine = requestLineOf(options.request);
    return sameRequest(key, await deps.operationStarts.record(key, { ...started, request: requestLine }), requestLine);
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      // A retry of a start that went through, racing its own first attempt's record.
      const earlier = options.request ? await earlierStart(deps, options.request) : null;
      if (earlier) return earlier;
      throw new ApiError('operation-in-progress', `an operation on ${options.workflowId} is already running`, {
        workflowId: options.workflowId,
      });
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Where an operation's evidence report is (GET /v1/operations/:workflowId/report). */
export const reportUrlOf = (deps: ApiDeps, workflowId: string): string => `${apiUrlOf(deps.config)}/v1/operations/${encodeURIComponent(workflowId)}/report`;

/** The workflow's static details (Temporal markdown): the report's link, and how a browser signs in to it. */
const reportDetails = (deps: ApiDeps, workflowId: string): string =>
  `[Evidence report](${reportUrlOf(deps, workflowId)}): charts and verdicts. Your browser asks for a sign-in: any user name, your viewer token as the password.`;

function sameRequest(key: string, start: RecordedStart, requestLine: string): StartedOperation {
  if (requestLine && start.request !== requestLine) {
    throw new ApiError('conflict', `Idempotency-Key ${key} was used for ${start.request}; use a new key for ${requestLine}`, { workflowId: start.workflowId });
  }
  const { request: _request, ...started } = start;
  return started;
}
