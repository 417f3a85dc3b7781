// What an error says, for a log line or a message: its message, or what it is when it is no Error.
export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** SQLSTATE classes and codes that mean "the server is not there", not "your query is wrong". */
const UNAVAILABLE_SQLSTATES = /^(08|57P0[1-4]|53300|53400)/;
const UNAVAILABLE_MESSAGES = [
  /timeout exceeded when trying to connect/i,
  /Connection terminated/i,
  /Query read timeout/i,
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|EPIPE/,
  /Client has encountered a connection error/i,
  /Failed to connect|Connection refused|UNAVAILABLE|DEADLINE_EXCEEDED|Deadline exceeded/i,
];

/**
 * Whether `error` is one pg or the Temporal client raise when their server is unreachable, frozen,
 * starting or restarting (worth waiting out), rather than one about the request itself.
 */
export function isServerUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  const text = `${error.name} ${error.message} ${String((error as { cause?: Error }).cause?.message ?? '')}`;
  return (typeof code === 'string' && UNAVAILABLE_SQLSTATES.test(code))
    || (typeof code === 'number' && (code === 4 || code === 14)) // gRPC DEADLINE_EXCEEDED, UNAVAILABLE
    || UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(text));
}
