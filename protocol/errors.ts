// Every error code that crosses a process boundary, with its HTTP status and whether a caller
// may retry it. The API, the agents, the agent client in activities/ and the workflows all map
// codes through this one table.
import { z } from 'zod';

export const ERROR_CODES = {
  // request shape and access
  'invalid-json': { status: 400, retryable: false },
  'bad-request': { status: 400, retryable: false },
  unauthorized: { status: 401, retryable: false },
  forbidden: { status: 403, retryable: false },
  /** the bearer is not the credential of the runtime the call names (unknown, another runtime's, or rotated) */
  'invalid-credential': { status: 401, retryable: false },
  /** the runtime's own credential, but its lease lapsed (or it was declared LOST): register with the agent token */
  'credential-expired': { status: 401, retryable: false },
  'not-found': { status: 404, retryable: false },
  /** the path exists, the method does not (the answer's Allow header lists those it takes) */
  'method-not-allowed': { status: 405, retryable: false },
  /** the request took longer to arrive than the server waits for one */
  'request-timeout': { status: 408, retryable: true },
  'body-too-large': { status: 413, retryable: false },
  /** a path segment longer than the router takes (longer than any valid name) */
  'uri-too-long': { status: 414, retryable: false },
  'unsupported-media-type': { status: 415, retryable: false },
  'validation-failed': { status: 422, retryable: false },
  /** the request's headers are larger than the server reads */
  'headers-too-large': { status: 431, retryable: false },
  // conflicts with what is there now
  'operation-in-progress': { status: 409, retryable: false },
  'stale-plan': { status: 409, retryable: false },
  'stale-fence': { status: 409, retryable: false },
  'stale-generation': { status: 409, retryable: false },
  conflict: { status: 409, retryable: false },
  /** the agent token may not re-register a live runtime: present the runtime's own credential */
  'runtime-live': { status: 409, retryable: false },
  /** a PUT would change a live workload's kind (its running replicas are of the old one): retire it first */
  'kind-change': { status: 409, retryable: false },
  /** an Idempotency-Key already started an operation for another request (method, path or body): names that operation */
  'idempotency-key-reused': { status: 422, retryable: false },
  // what an agent's drivers refuse
  'placement-unavailable': { status: 422, retryable: false },
  'invalid-spec': { status: 422, retryable: false },
  'unsupported-kind': { status: 422, retryable: false },
  'restart-required': { status: 409, retryable: false },
  'task-draining': { status: 409, retryable: true },
  'spawn-failed': { status: 422, retryable: false },
  'source-unreachable': { status: 503, retryable: true },
  /** a Kafka topic's partition count on the broker is not the one the workload declares */
  'partitions-mismatch': { status: 422, retryable: false },
  /** the Kafka broker did not answer: nothing was decided on its behalf; retry */
  'broker-unavailable': { status: 503, retryable: true },
  /** a new task's recipient cannot reach an endpoint its workload requires: nothing was started */
  'requirement-unreachable': { status: 503, retryable: true },
  'release-timeout': { status: 504, retryable: true },
  /** the runtime's container engine cannot pull the workload's pinned image (or has no engine): nothing was started */
  'image-unavailable': { status: 503, retryable: false },
  /** the agent's state folder refused a record (read-only, immutable, full): nothing changed; retry */
  'state-unwritable': { status: 503, retryable: true },
  'drain-deadline': { status: 504, retryable: false },
  // workflow failures (ApplicationFailure types)
  'invalid-input': { status: 422, retryable: false },
  'unknown-runtime': { status: 404, retryable: false },
  'task-failed': { status: 422, retryable: false },
  'converge-deadline': { status: 504, retryable: false },
  'still-owned': { status: 409, retryable: false },
  /** a placement that names one task id twice is never written (DESIGN.md §3 "Task identity") */
  'duplicate-task-id': { status: 409, retryable: false },
  // the server side
  unavailable: { status: 503, retryable: true },
  /** PostgreSQL or Temporal did not answer: the request changed nothing it could not finish; retry */
  'dependency-unavailable': { status: 503, retryable: true },
  internal: { status: 500, retryable: true },
} as const satisfies Record<string, { status: number; retryable: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, code);
}

export function statusOf(code: ErrorCode): number {
  return ERROR_CODES[code].status;
}

/** Unknown codes are retryable: a caller cannot know that retrying will not help. */
export function isRetryable(code: string): boolean {
  return isErrorCode(code) ? ERROR_CODES[code].retryable : true;
}

/** The body of every error answer, from the API and the agents alike. */
export interface ErrorBody {
  error: string;
  message: string;
  [detail: string]: unknown;
}

/** ErrorBody as a schema (the OpenAPI document's `Error`): the code, the message, and the code's details. */
export const ErrorBodySchema = z
  .looseObject({
    error: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    /** validation-failed: every bad field, e.g. `body.replicas` */
    issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ title: 'Error', description: 'the code (its HTTP status is fixed by the code), a message for people, and details that depend on the code (e.g. workflowId for operation-in-progress)' });

/** An error that carries a protocol code; thrown by handlers and drivers, mapped to HTTP in http/. */
export class CodedError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CodedError';
  }
  get status(): number {
    return statusOf(this.code);
  }
  toBody(): ErrorBody {
    return { error: this.code, message: this.message, ...this.details };
  }
}
