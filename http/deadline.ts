// A bound on how long a request may wait for what it depends on: past it the caller gets 503
// `dependency-unavailable` at once instead of a hang.
import { CodedError } from '../protocol/errors';

/** Races `work` against a deadline; a dependency that does not answer in time is unavailable. */
export async function withinDeadline<T>(what: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CodedError('dependency-unavailable', `${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
