// One wording for validation problems, used by 422 answers and workflow input failures alike.
import type { z } from 'zod';

/** Formats zod issues as one message naming each bad field, for 422s and workflow failures. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : '(input)'}: ${i.message}`)
    .join('; ');
}

/** A workflow's input checked against its schema: the input as parsed, or the message its refusal fails with. */
export type InputCheck<T> = { ok: true; input: T } | { ok: false; message: string };

/** Checks a workflow's input: where the workflow checks it (parseInput) and where the worker does (checkWorkflowInput), in the same words. */
export function checkInputWith<T>(schema: z.ZodType<T>, input: unknown, workflowType: string): InputCheck<T> {
  const parsed = schema.safeParse(input);
  return parsed.success ? { ok: true, input: parsed.data } : { ok: false, message: `${workflowType}: invalid input: ${describeIssues(parsed.error)}` };
}
