// What the API answers while PostgreSQL or Temporal is down: 503 `dependency-unavailable`, fast,
// never a 500 and never a hang. Recognises the errors pg and the Temporal client raise when their
// server is unreachable, frozen or restarting.
import { CodedError } from '../protocol';

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

export function dependencyFailure(error: Error): CodedError | null {
  const code = (error as { code?: unknown }).code;
  const text = `${error.name} ${error.message} ${String((error as { cause?: Error }).cause?.message ?? '')}`;
  const unavailable =
    (typeof code === 'string' && UNAVAILABLE_SQLSTATES.test(code)) ||
    (typeof code === 'number' && (code === 4 || code === 14)) || // gRPC DEADLINE_EXCEEDED, UNAVAILABLE
    UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(text));
  return unavailable ? new CodedError('dependency-unavailable', `PostgreSQL or Temporal is unavailable (${error.message.slice(0, 200)}); retry once it is back`) : null;
}
