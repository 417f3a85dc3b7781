// Errors the API returns: `{ error: code, message, ...details }`. The code → status map is the one
// place that decides HTTP statuses.
export const ERROR_STATUS = {
  'invalid-json': 400,
  'bad-request': 400,
  unauthorized: 401,
  forbidden: 403,
  'not-found': 404,
  'operation-in-progress': 409,
  'stale-plan': 409,
  'stale-fence': 409,
  conflict: 409,
  'validation-failed': 422,
  'placement-unavailable': 422,
  unavailable: 503,
  internal: 500,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
  toBody() {
    return { error: this.code, message: this.message, ...this.details };
  }
}
