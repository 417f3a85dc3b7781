// Starting operations: one workflow per target at a time (the workflow id is the target), so a
// second request for a busy target is refused with the running workflow's id.
import { randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { ApiDeps } from './deps';
import { ApiError } from '../http/errors';
import { apiUrlOf } from './config';
import { canonicalSha256 } from '../lib/canonical-json';
import { workloadOfWorkflowId } from '../lib/log';
import { messageOf } from '../lib/errors';
import { wakeSignal } from '../workflows/reconcile';

import { ADMIT_BY_MEMO, IDEMPOTENCY_KEY, START_ID_MEMO, type StartedOperation, type Workload } from '../protocol';
import type { RecordedStart } from '../store/operation-starts';
export type { StartedOperation };

/** The workload an operation is asked for: defined and not retired, else 404. */
export async function requireActiveWorkload(deps: ApiDeps, name: string): Promise<Workload> {
  const workload = await deps.registry.getWorkload(name);
  if (!workload || workload.retired) throw new ApiError('not-found', `no active workload ${name}`);
  return workload;
}

/**
 * Refuses (409 operation-in-progress, naming it) while an operation runs on `workflowId`: for a
 * request that must know before it writes anything (a PUT whose rollout runs there).
 */
export async function requireIdle(deps: ApiDeps, workflowId: string): Promise<void> {
  const client = await deps.temporal.client().catch(() => {
    throw new ApiError('unavailable', `Temporal did not answer whether an operation runs on ${workflowId}; nothing was written, try again`);
  });
  const described = await client.workflow.getHandle(workflowId).describe().catch((error: unknown) => {
    if (error instanceof WorkflowNotFoundError) return null;
    throw new ApiError('unavailable', `Temporal did not answer whether an operation runs on ${workflowId} (${(error as Error).message}); nothing was written, try again`);
  });
  if (described?.status.name === 'RUNNING') {
    throw new ApiError('operation-in-progress', `${described.type} ${workflowId} is running; nothing was written`, { workflowId, runId: described.runId });
  }
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

/** What a start route's handler passes on of its request: the headers (its Idempotency-Key), method, path and logger. */
export type StartRequest = {
  headers: Record<string, string | string[] | undefined>; method: string; url: string;
  log?: { info(fields: object, message: string): void };
};
const requestLineOf = (request: StartRequest) => `${request.method} ${request.url.split('?')[0]}`;

/**
 * What a request with an Idempotency-Key asks, as the key is bound to it: the method and path, and
 * the sha256 of its validated body's canonical JSON (so the order of its fields, white space or a
 * default spelled out change nothing; another value does). Null: no key.
 */
export interface KeyedAsk { key: string; request: string; bodySha256: string }
export function keyedAskOf(request: StartRequest, body: unknown): KeyedAsk | null {
  const key = idempotencyKeyOf(request.headers);
  return key ? { key, request: requestLineOf(request), bodySha256: canonicalSha256(body) } : null;
}

/**
 * The operation this request's Idempotency-Key already started (null: none, or no key); the key
 * used for another method, path or body is a 422 idempotency-key-reused naming that operation.
 * @param body the request's validated body (undefined for a route without one)
 */
export async function earlierStart(deps: ApiDeps, request: StartRequest, body: unknown): Promise<StartedOperation | null> {
  const ask = keyedAskOf(request, body);
  if (!ask) return null;
  const earlier = await deps.operationStarts.get(ask.key);
  if (!earlier) return null;
  const started = sameRequest(earlier, ask);
  logStart(request, started, ask.key, 'operation start answered again: the Idempotency-Key started it');
  return started;
}

/** The API's line for a start it accepted (or answered again), scoped like its request lines; the key is no secret, no token is in it. */
function logStart(request: StartRequest, started: StartedOperation, key: string | undefined, message: string): void {
  request.log?.info({
    workflow: started.workflowId, run: started.runId, kind: started.kind, workload: workloadOfWorkflowId(started.workflowId),
    idempotencyKey: key ?? null, request: requestLineOf(request),
  }, message);
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
    workflow: (input: unknown) => Promise<unknown>; workflowId: string; input: unknown; summary: string;
    /** the request's headers (its Idempotency-Key) and what it was, e.g. "POST /v1/workloads/web/scale" */
    request?: StartRequest;
    /** the request's validated body, which an Idempotency-Key is bound to (the route's `body`; none: undefined) */
    body?: unknown;
  },
): Promise<StartedOperation> {
  const ask = options.request ? keyedAskOf(options.request, options.body) : null;
  const key = ask?.key;
  const admitWithinMs = Math.max(1_000, deps.config.SCALEGATE_REQUEST_DEADLINE_MS - ADMISSION_MARGIN_MS);
  const admitBy = new Date(Date.now() + admitWithinMs);
  const unavailable = () => new ApiError('unavailable', `Temporal did not take the start of ${options.workflowId} within ${admitWithinMs} ms; nothing was started (a start that arrives later is refused). Try again${key ? ' with the same Idempotency-Key' : ''}`);
  const client = await deps.temporal.client().catch(() => {
    throw unavailable();
  });
  let timer: NodeJS.Timeout | undefined;
  const startId = randomUUID();
  try {
    const start = client.workflow.start(options.workflow, {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: options.workflowId,
      args: [options.input],
      staticSummary: options.summary,
      // the Web UI shows this under the workflow's details: a link to this run's evidence page
      staticDetails: reportDetails(deps, options.workflowId, startId),
      memo: { [ADMIT_BY_MEMO]: admitBy.toISOString(), [START_ID_MEMO]: startId },
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
    const uiUrl = uiUrlOf(deps, handle.workflowId, handle.firstExecutionRunId);
    const started: StartedOperation = { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, kind: options.workflow.name, uiUrl };
    // Every start accepted is in the log with its key, so a start whose answer its client never
    // read (it gave up, or the line broke) is recognisable; `GET /v1/operations` lists it too.
    if (options.request) logStart(options.request, started, key, 'operation started');
    if (!ask) return started;
    return sameRequest(await deps.operationStarts.record(ask.key, { ...started, request: ask.request, bodySha256: ask.bodySha256 }), ask);
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      // A retry of a start that went through, racing its own first attempt's record.
      const earlier = options.request ? await earlierStart(deps, options.request, options.body) : null;
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

/** The run in the Temporal Web UI. */
export const uiUrlOf = (deps: ApiDeps, workflowId: string, runId: string): string =>
  `${deps.config.SCALEGATE_UI_URL}/namespaces/${deps.config.TEMPORAL_NAMESPACE}/workflows/${encodeURIComponent(workflowId)}/${runId}`;

/**
 * Where a run's evidence report is (GET /v1/operations/:workflowId/report?runId=): every link names
 * its run, so an older run's link opens that run, never the newest of the id. A start's own link is
 * written before Temporal names the run: it names it by the start's id (memo scalegateStartId).
 */
export const reportUrlOf = (deps: ApiDeps, workflowId: string, run: { runId: string } | { start: string }): string =>
  `${apiUrlOf(deps.config)}/v1/operations/${encodeURIComponent(workflowId)}/report?${new URLSearchParams(run)}`;

/** The workflow's static details (Temporal markdown): the run's report link, and how a browser signs in to it. */
const reportDetails = (deps: ApiDeps, workflowId: string, startId: string): string =>
  `[Evidence report](${reportUrlOf(deps, workflowId, { start: startId })}): charts and verdicts of this run. Your browser asks for a sign-in: any user name, your viewer token as the password.`;

/**
 * The operation a key's first request started, if `ask` is that request again: the same method,
 * path and body (a start recorded before bodies were, migration 011, is bound to its method and
 * path only). Else 422 idempotency-key-reused, naming the first operation: a key means one request.
 */
export function sameRequest(start: RecordedStart, ask: KeyedAsk): StartedOperation {
  const { request, bodySha256, ...started } = start;
  const otherBody = bodySha256 !== null && bodySha256 !== ask.bodySha256;
  if (request !== ask.request || otherBody) {
    const what = request !== ask.request ? `${request}, not ${ask.request}` : `${request} with another body`;
    throw new ApiError('idempotency-key-reused',
      `Idempotency-Key ${ask.key} already started ${started.kind} ${started.workflowId} (run ${started.runId}) for ${what}; nothing was started. Use a new key for a new request`,
      { workflowId: started.workflowId, runId: started.runId, kind: started.kind });
  }
  return started;
}

const WAKE_DEADLINE_MS = 5_000;

/**
 * Asks the reconcile loop for its next pass now (workflows/reconcile.ts `wake`), after a write that
 * gives it something to place: a workload defined, a runtime registered. Not awaited by the request
 * and never failing it: a wake that does not reach the loop (not started yet, Temporal away) only
 * leaves the placement to the loop's next interval.
 */
export function wakeReconcileLoop(deps: ApiDeps, log: { warn(fields: object, message: string): void }): void {
  void (async () => {
    const client = await deps.temporal.client();
    // bounded: during an outage of Temporal a wake gives up rather than wait for it
    await client.connection.withDeadline(Date.now() + WAKE_DEADLINE_MS, () => client.workflow.getHandle(`reconcile:${deps.config.SCALEGATE_TASK_QUEUE}`).signal(wakeSignal));
  })().catch((error: unknown) => {
    if (!(error instanceof WorkflowNotFoundError)) log.warn({ error: messageOf(error) }, 'the reconcile loop was not woken: it places at its next interval');
  });
}
