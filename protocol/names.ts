// The names, bounds and replica counts every message is built from, apart from the messages
// themselves (./workload.ts re-exports them). The workflows validate their input with these alone:
// every workflow run evaluates the modules its bundle imports (the SDK's per-run module isolation),
// and the full message schemas cost a scale-out more CPU than its own logic did
// (test/unit/workflow-imports.test.ts keeps them out).
import { z } from 'zod';

/** Every input is bounded before any work is done on it: these are the bounds. */
export const LIMITS = {
  /** the most replicas any request may name; the API may be configured lower (SCALEGATE_MAX_REPLICAS) */
  replicas: 10_000,
  labels: 64,
  argv: 256,
  argLength: 4096,
  envEntries: 256,
  envValueLength: 8192,
  partitions: 4096,
  /** endpoints one workload may require every replica to reach */
  requirements: 16,
  /** metrics one contract may name (each read from every pod, twice, at each judged scale-out) */
  contractMetrics: 16,
} as const;

/** Lowercase DNS label (RFC 1123): what workload names and runtime ids must be. */
export const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

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

/** The unknowns a scale-out request may accept rather than be refused for (`accept`), each a gate row's. */
export const ACCEPTABLE_UNKNOWNS = ['downstream'] as const;

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

/** A Kubernetes workload's object as summaries and details name it: `Deployment default/web on prod` (a name only: the workflows use it). */
export const describeObject = (ref: { kind: string; namespace: string; name: string; cluster: string }): string => `${ref.kind} ${ref.namespace}/${ref.name} on ${ref.cluster}`;
