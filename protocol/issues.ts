// One wording for validation problems, used by 422 answers and workflow input failures alike.
import type { z } from 'zod';

/** Formats zod issues as one message naming each bad field, for 422s and workflow failures. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : '(input)'}: ${i.message}`)
    .join('; ');
}
