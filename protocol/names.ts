// The names, bounds and replica counts every message is built from, apart from the messages
// themselves (./workload.ts re-exports them). The bounds and words without a schema are
// ./bounds.ts's, which the workflows import instead: every workflow run evaluates the modules its
// bundle imports (the SDK's per-run module isolation), and building these schemas cost each
// scale-out run more CPU than its own logic (test/unit/workflow-imports.test.ts keeps them out).
import { z } from 'zod';
import { DNS_LABEL, LIMITS } from './bounds';

export { ACCEPTABLE_UNKNOWNS, describeObject, DNS_LABEL, LIMITS } from './bounds';

export const RuntimeId = z
  .string()
  .min(1)
  .max(63)
  .regex(DNS_LABEL, 'runtime ids are DNS labels: lowercase letters, digits and inner dashes');

export const WorkloadName = z
  .string()
  .min(1)
  .max(63)
  .regex(DNS_LABEL, 'workload names are DNS labels: lowercase letters, digits and inner dashes');

/** A replica count, 1 to LIMITS.replicas; `notInteger` is what a value of another type is told. */
const replicaNumber = (notInteger: z.core.$ZodErrorMap | string, atLeastOne: string) => z
  .int({ error: notInteger })
  .refine((n) => n !== 0, { message: 'replicas 0 is refused: retire (DELETE) or delete the workload instead' })
  .refine((n) => n >= 1, { message: atLeastOne })
  .refine((n) => n <= LIMITS.replicas, { message: `replicas must be at most ${LIMITS.replicas}` })
  // the refinements above, as the OpenAPI document states them (a refine is not JSON Schema)
  .meta({ minimum: 1, maximum: LIMITS.replicas });

export const Replicas = z.union([
  z.literal('all'),
  replicaNumber('replicas must be an integer ≥ 1 or "all"', 'replicas must be an integer ≥ 1 or "all"'),
]);
/** A scale request's replicas: a count; "all" is a workload definition's (PUT). */
export const ScaleReplicas = replicaNumber(
  (issue) => (issue.input === 'all' ? 'scale takes a replica count; "all" is a workload definition (PUT)' : 'replicas must be an integer ≥ 1'),
  'replicas must be an integer ≥ 1',
);
export type ReplicaCount = z.infer<typeof Replicas>;

/**
 * JSON Schema that an object has at least one of `names` (for a refine's `.meta()`, so the OpenAPI
 * document states it); each alternative names its property, as Redocly's lint asks.
 */
export const oneOfPresent = (...names: string[]) => ({ anyOf: names.map((name) => requiredSchema(name)) });
/** JSON Schema that an object has `name`. */
export const requiredSchema = (name: string, schema: Record<string, unknown> = {}) => ({ required: [name], properties: { [name]: schema } });

/**
 * A stepped scale-out (domain/steps.ts): n adds n replicas, "P%" reaches P % of the increase,
 * "rest" the target (implied last). On a scale request, a workload (its scale-outs' default) or a
 * tier policy (its autoscaler's scale-outs).
 */
export const StepsSchema = z
  .array(z.union([z.int().min(1).max(LIMITS.replicas), z.string().regex(/^(100|[1-9]?[0-9])%$|^rest$/, 'a step is a replica count, "P%" of the increase, or "rest"')]))
  .min(1)
  .max(10);
