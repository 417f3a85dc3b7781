// The bounds and words every schema and every workflow share, without a schema: the workflows
// import them from here, so a workflow run evaluates no zod (protocol/names.ts builds the schemas
// from them; test/unit/workflow-imports.test.ts holds that the workflows' graph imports no zod).

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

/** The unknowns a scale-out request may accept rather than be refused for (`accept`), each a gate row's. */
export const ACCEPTABLE_UNKNOWNS = ['downstream'] as const;

/** How long a replan or scale waits for its new tasks to be ready, unless the request says. */
export const DEFAULT_CONVERGE_TIMEOUT_MS = 60_000;

/** The longest reason a replan takes (its input schema's bound; a longer compensation reason is cut to it). */
export const REPLAN_REASON_MAX = 500;

/** A Kubernetes workload's object as summaries and details name it: `Deployment default/web on prod` (a name only: the workflows use it). */
export const describeObject = (ref: { kind: string; namespace: string; name: string; cluster: string }): string => `${ref.kind} ${ref.namespace}/${ref.name} on ${ref.cluster}`;
