// What the API answers while PostgreSQL or Temporal is down: 503 `dependency-unavailable`, fast,
// never a 500 and never a hang. Recognises the errors pg and the Temporal client raise when their
// server is unreachable, frozen or restarting.
import { isServerUnavailable } from '../lib/errors';
import { CodedError } from '../protocol';

export function dependencyFailure(error: Error): CodedError | null {
  return isServerUnavailable(error) ? new CodedError('dependency-unavailable', `PostgreSQL or Temporal is unavailable (${error.message.slice(0, 200)}); retry once it is back`) : null;
}
