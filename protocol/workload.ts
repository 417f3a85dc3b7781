// Workloads, their contracts and driver specs, and placements (DESIGN.md §3, §5): one schema per
// message, shared by the API, the workflows (which validate their own JSON input), the agents,
// the CLI and the tests.
import { z } from 'zod';
import { DNS_LABEL, LIMITS, oneOfPresent, Replicas, requiredSchema, StepsSchema, WorkloadName, type ReplicaCount } from './names';

// The names, bounds and counts the workflows validate with live in ./names (see there why).
export { ACCEPTABLE_UNKNOWNS, describeObject, LIMITS, Replicas, RuntimeId, StepsSchema, WorkloadName, type ReplicaCount } from './names';

export const LabelsSchema = z
  .record(
    z.string().min(1).max(63).regex(/^[A-Za-z0-9][A-Za-z0-9_.\/-]*$/, 'label keys are [A-Za-z0-9_./-]'),
    z.string().max(63),
  )
  .refine((labels) => Object.keys(labels).length <= LIMITS.labels, { message: `at most ${LIMITS.labels} labels` })
  .meta({ maxProperties: LIMITS.labels });
export type Labels = z.infer<typeof LabelsSchema>;

const unknownable = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum([...values, 'unknown'] as unknown as [T[number] | 'unknown', ...(T[number] | 'unknown')[]]).default('unknown');

export const WORKLOAD_KINDS = ['service', 'consumer', 'stream'] as const;

/**
 * A figure each replica serves that a scale-out is judged on (issue 37; a Kubernetes workload's
 * pods, read through the API server's pod proxy before the change and after it). A counter (typed
 * so by the pod, or a name ending `_total`) is judged as its rate per second a pod, a gauge as its
 * value a pod; `better` says which way is worse, `tolerance` how far, relative to the baseline, it
 * may move that way (default 0.2: 20 %).
 */
export const ContractMetricSchema = z.strictObject({
  name: z.string().min(1).max(200).regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'a metric name is a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)'),
  better: z.enum(['lower', 'higher']),
  tolerance: z.number().min(0).max(10).default(0.2),
});
export type ContractMetric = z.infer<typeof ContractMetricSchema>;

export const ContractSchema = z
  .strictObject({
    ownership: unknownable(['partitioned', 'shared-queue', 'none'] as const),
    partitions: z.int().min(1).max(100000).optional(),
    state: unknownable(['none', 'local', 'shared', 'checkpointed'] as const),
    ordering: unknownable(['none', 'per-key', 'per-partition', 'global'] as const),
    delivery: unknownable(['at-most-once', 'at-least-once', 'exactly-once'] as const),
    recovery: unknownable(['restart', 'reassign', 'replay-from-checkpoint'] as const),
    /**
     * What the workload's output lands on, and what it takes: its limits, or "none" when nothing
     * downstream can be overloaded. Absent is unknown, and a scale-out refuses an unknown
     * (DESIGN.md §3) unless the request accepts it (`accept: ["downstream"]`).
     */
    downstream: z
      .union([
        z.literal('none'),
        z.strictObject({ maxReplicas: z.int().min(1).max(LIMITS.replicas).optional(), maxRatePerSec: z.number().positive().max(1e9).optional() })
          .refine((d) => d.maxReplicas !== undefined || d.maxRatePerSec !== undefined, {
            message: 'a downstream declares maxReplicas, maxRatePerSec or both ("none" when there is no downstream to overload)',
          })
          .meta(oneOfPresent('maxReplicas', 'maxRatePerSec')),
      ])
      .optional(),
    /** what the replicas serve that a scale-out is judged on (a Kubernetes workload's: runtime.kubernetes.metrics says where) */
    metrics: z
      .array(ContractMetricSchema)
      .min(1)
      .max(LIMITS.contractMetrics)
      .refine((metrics) => new Set(metrics.map((m) => m.name)).size === metrics.length, 'each metric is named once')
      .optional(),
  })
  .refine((c) => c.ownership !== 'partitioned' || c.partitions !== undefined, {
    message: 'contract.partitions is required when ownership is "partitioned"',
    path: ['partitions'],
  })
  .meta({ if: requiredSchema('ownership', { const: 'partitioned' }), then: requiredSchema('partitions') });
export type Contract = z.infer<typeof ContractSchema>;
export const UNKNOWN_CONTRACT: Contract = ContractSchema.parse({});

/** An absolute URL path: a slash, then unreserved, sub-delims, ':', '@', '/' or %-escapes; no spaces, no query. */
const UrlPath = z
  .string()
  .max(1024)
  .regex(/^\/([A-Za-z0-9\-._~!$&'()*+,;=:@\/]|%[0-9A-Fa-f]{2})*$/, 'a URL path: starts with "/", no spaces or query, %-escape anything else');

const EnvSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'environment names are [A-Za-z_][A-Za-z0-9_]*'),
    z.string().max(LIMITS.envValueLength),
  )
  .refine((env) => Object.keys(env).length <= LIMITS.envEntries, { message: `at most ${LIMITS.envEntries} environment entries` })
  .meta({ maxProperties: LIMITS.envEntries });

/** Kafka's own rule for topic names: 1..249 of [A-Za-z0-9._-]. */
const KafkaTopic = z.string().min(1).max(249).regex(/^[A-Za-z0-9._-]+$/, 'Kafka topic names are 1..249 of [A-Za-z0-9._-]');

/**
 * A service that consumes a topic in a consumer group of its own (DESIGN.md §5 "A user's own
 * consumer group"): the broker's group is its evidence. One group member per replica.
 */
export const ServiceKafkaSchema = z.strictObject({
  topic: KafkaTopic,
  group: z.string().min(1).max(249).regex(/^[A-Za-z0-9._-]+$/, 'consumer group ids here are 1..249 of [A-Za-z0-9._-]'),
});
export type ServiceKafka = z.infer<typeof ServiceKafkaSchema>;

/**
 * A container image: `repository[:tag][@sha256:<digest>]`, the repository optionally behind a
 * registry host (`127.0.0.1:5000/orders`). A tag is resolved to its digest when the workload is
 * defined, so every node runs exactly one image (DESIGN.md §5 "container").
 */
export const ImageRefSchema = z
  .string()
  .min(1)
  .max(512)
  .regex(
    /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]{1,5})?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/,
    'an image is repository[:tag][@sha256:<64 hex>], lowercase, optionally behind a registry host',
  );
/** The digest an image reference pins (`sha256:…`), or null when it names only a tag. */
export const imageDigestOf = (image: string): string | null => /@(sha256:[a-f0-9]{64})$/.exec(image)?.[1] ?? null;

/** A container's limits, enforced by its engine. */
export const ContainerLimitsSchema = z.strictObject({
  cpus: z.number().min(0.01).max(256).optional(),
  memoryMiB: z.int().min(6).max(1_048_576).optional(),
});

export const ServiceSpecSchema = z
  .strictObject({
    /** the process to run; for a container, the image's command unless given */
    command: z.array(z.string().min(1).max(LIMITS.argLength)).min(1).max(LIMITS.argv).optional(),
    /** run each replica as a container of this image on the runtime's engine (the container driver) */
    image: ImageRefSchema.optional(),
    limits: ContainerLimitsSchema.optional(),
    env: EnvSchema.default({}),
    readiness: z.union([z.strictObject({ http: UrlPath }), z.strictObject({ tcp: z.literal(true) })]).optional(),
    graceMs: z.int().min(0).max(600000).default(5000),
    kafka: ServiceKafkaSchema.optional(),
  })
  .refine((spec) => spec.limits === undefined || spec.image !== undefined, { message: 'limits are a container engine\'s: they need an image', path: ['limits'] });
/** What an agent runs: a service spec with a command or an image (a Kubernetes workload's spec has neither: its pods are the cluster's). */
export const AgentServiceSpecSchema = ServiceSpecSchema
  .refine((spec) => spec.command !== undefined || spec.image !== undefined, { message: 'a service runs a command or an image: give one', path: ['command'] });
/** A service spec that runs a container. */
export const isContainerSpec = (spec: ServiceSpec): spec is ServiceSpec & { image: string } => spec.image !== undefined;
export type ServiceSpec = z.infer<typeof ServiceSpecSchema>;

/**
 * The control plane's own tables (every table store/migrations creates): a workload may never
 * read or write them, and the agents' database role is granted none of them (migration 009).
 */
export const CONTROL_PLANE_TABLES = [
  'runtimes', 'ledger', 'workloads', 'placements', 'unplaced', 'plans', 'events', 'reconcile_state', 'schema_migrations',
  'control_plane_liveness', 'tier_policies', 'operation_starts', 'workload_revisions',
] as const;

const WorkloadTable = z
  .string()
  .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'table names are lowercase SQL identifiers')
  .refine((name) => !(CONTROL_PLANE_TABLES as readonly string[]).includes(name) && !/^(scalegate_|pg_)/.test(name), {
    message: 'names a control-plane or system table (scalegate_*, pg_*, or one of the registry tables)',
  })
  .meta({ not: { anyOf: [{ enum: [...CONTROL_PLANE_TABLES] }, { pattern: '^(scalegate_|pg_)' }] } });

// A fresh object per use: zod's refine moves `message` into `error` on the object it is handed.
const sourceIsNotSink = () => ({ message: 'source and sink must be different tables', path: ['sink'] });

/** A Kafka topic where a source table can stand (DESIGN.md §5 "Kafka sources"): `{"kafka": {"topic": "orders"}}`. */
export const KafkaSourceSchema = z.strictObject({ kafka: z.strictObject({ topic: KafkaTopic }) });
export type KafkaSource = z.infer<typeof KafkaSourceSchema>;

/** The source table a spec reads, or null when it reads a Kafka topic. */
export const sourceTableOf = (spec: { source: string | KafkaSource }): string | null => (typeof spec.source === 'string' ? spec.source : null);
/** The Kafka topic a spec reads, or null when it reads a table. */
export const sourceTopicOf = (spec: { source: string | KafkaSource }): string | null => (typeof spec.source === 'string' ? null : spec.source.kafka.topic);

/** What a consumer or a stream source reads: a table, or a Kafka topic. */
const SourceSchema = z.union([WorkloadTable, KafkaSourceSchema]);

export const ConsumerSpecSchema = z
  .strictObject({
    partitions: z.int().min(1).max(LIMITS.partitions),
    source: SourceSchema,
    sink: WorkloadTable,
    workMs: z.number().min(0).max(60000).default(1),
  })
  .refine((spec) => spec.source !== spec.sink, sourceIsNotSink());
export type ConsumerSpec = z.infer<typeof ConsumerSpecSchema>;

/** The operator chain a stream job runs (DESIGN.md §5): one source, one keyed aggregate, one sink, in this order. */
export const STREAM_OPERATOR_CHAIN = ['source', 'keyed-aggregate', 'sink'] as const;

const OperatorId = z.string().min(1).max(63).regex(DNS_LABEL, 'operator ids are DNS labels');

export const StreamSpecSchema = z
  .strictObject({
    source: SourceSchema,
    sink: WorkloadTable,
    partitions: z.int().min(1).max(LIMITS.partitions),
    checkpointIntervalMs: z.int().min(10).max(3_600_000),
    maxParallelism: z.int().min(1).max(32768).default(128),
    operators: z
      .array(
        z.strictObject({
          id: OperatorId,
          kind: z.enum(STREAM_OPERATOR_CHAIN),
          parallelism: z.int().min(1).max(32768),
          /**
           * The job-global index of the operator's subtask 0. Absent: operators take contiguous blocks
           * in spec order. A hot rescale appends the rescaled operator's new subtasks past every index
           * in use (append-only identity) and records where here; a stop-the-world replan lays the job
           * out contiguously again.
           */
          base: z.int().min(0).max(1_000_000).optional(),
        }),
      )
      .min(1)
      .max(16),
  })
  .superRefine((spec, ctx) => {
    if (spec.source === spec.sink) ctx.addIssue({ code: 'custom', ...sourceIsNotSink() });
    const kinds = spec.operators.map((op) => op.kind);
    if (kinds.join(' → ') !== STREAM_OPERATOR_CHAIN.join(' → ')) {
      ctx.addIssue({ code: 'custom', path: ['operators'], message: `operators must be ${STREAM_OPERATOR_CHAIN.join(' → ')}, got ${kinds.join(' → ') || 'none'}` });
    }
    const ids = new Set<string>();
    spec.operators.forEach((op, i) => {
      if (ids.has(op.id)) ctx.addIssue({ code: 'custom', path: ['operators', i, 'id'], message: `operator id "${op.id}" is used twice` });
      ids.add(op.id);
      if (op.parallelism > spec.maxParallelism) {
        ctx.addIssue({ code: 'custom', path: ['operators', i, 'parallelism'], message: `parallelism ${op.parallelism} of "${op.id}" is above maxParallelism ${spec.maxParallelism}` });
      }
      const base = op.base;
      if (base !== undefined) {
        const overlapping = spec.operators.find((other, j) => j !== i && other.base !== undefined && other.base < base + op.parallelism && base < other.base + other.parallelism);
        if (overlapping) ctx.addIssue({ code: 'custom', path: ['operators', i, 'base'], message: `the subtask indices of "${op.id}" overlap those of "${overlapping.id}"` });
      }
      if (spec.operators.some((other) => other.base !== undefined) && base === undefined) {
        ctx.addIssue({ code: 'custom', path: ['operators', i, 'base'], message: 'either every operator names its base or none does' });
      }
      if (op.kind === 'source' && op.parallelism > spec.partitions) {
        ctx.addIssue({ code: 'custom', path: ['operators', i, 'parallelism'], message: `source parallelism ${op.parallelism} is above the ${spec.partitions} partitions it reads` });
      }
    });
  });
export type StreamSpec = z.infer<typeof StreamSpecSchema>;

/** host:port of a TCP endpoint: a DNS name, an IPv4 address or a bracketed IPv6 one. */
const TcpEndpoint = z
  .string()
  .max(300)
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?):([1-9][0-9]{0,4})$/, 'a TCP endpoint is host:port (a DNS name, an IPv4 address or [IPv6])')
  .refine((endpoint) => Number(endpoint.slice(endpoint.lastIndexOf(':') + 1)) <= 65535, 'the port is at most 65535');

/**
 * What every replica must reach (DESIGN.md §5 "Connectivity"): each recipient agent probes them
 * for the scale-out's connectivity gate, which names the runtime that cannot reach one.
 */
export const RequirementSchema = z.union([
  z.strictObject({ tcp: TcpEndpoint }),
  z.strictObject({ http: z.url({ protocol: /^https?$/ }).max(2048) }),
]);
export type Requirement = z.infer<typeof RequirementSchema>;
export const RequiresSchema = z.array(RequirementSchema).max(LIMITS.requirements);

/**
 * Where a workload's replicas run when not on scalegate's agents (DESIGN.md §3 "Runtimes"): a
 * Kubernetes Deployment or StatefulSet, whose pods the cluster's scheduler places while scalegate
 * gates and sequences every change of its size. `cluster` names a context of SCALEGATE_KUBECONFIG
 * (or is any name where the control plane uses its pod's service account).
 */
export const KubernetesRuntimeSchema = z.strictObject({
  cluster: z.string().min(1).max(253).regex(/^[A-Za-z0-9][A-Za-z0-9_.@:\/-]*$/, 'a cluster is a kubeconfig context name'),
  namespace: z.string().min(1).max(63).regex(DNS_LABEL, 'a namespace is a DNS label'),
  kind: z.enum(['Deployment', 'StatefulSet']),
  name: z.string().min(1).max(253).regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'an object name is a DNS subdomain'),
  /**
   * Where each pod serves its metrics in Prometheus's text format: read through the API server's
   * pod proxy (GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path>), twice `windowMs` apart,
   * for the metrics the contract names.
   */
  metrics: z
    .strictObject({
      port: z.int().min(1).max(65535),
      path: z.string().min(1).max(256).regex(/^\/[A-Za-z0-9._~\/-]*$/, 'a path starts with / and holds no query').default('/metrics'),
      windowMs: z.int().min(500).max(300_000).default(5_000),
    })
    .optional(),
});
export type KubernetesRuntime = z.infer<typeof KubernetesRuntimeSchema>;
export const WorkloadRuntimeSchema = z.strictObject({ kubernetes: KubernetesRuntimeSchema });

const workloadBase = {
  replicas: Replicas,
  requires: RequiresSchema.optional(),
  selector: LabelsSchema.default({}),
  colocate: z.string().min(1).max(63).regex(DNS_LABEL, 'colocation groups are DNS labels').optional(),
  contract: ContractSchema.default(UNKNOWN_CONTRACT),
};

/**
 * PUT /v1/workloads/:name body (the name comes from the path). Unknown fields are refused. A stream
 * job's size lives in its operators' parallelism: its `replicas` is optional, ignored if given, and
 * set to its subtask count (what placement places).
 */
/** Services and consumers grow by replicas: their scale-outs may go in steps (a stream job is rescaled instead). */
/**
 * How a change of what a replica runs is rolled out (DESIGN.md §3 "Versions and rollouts"): the
 * rollout a PUT starts takes these; POST /v1/workloads/:name/rollout may say otherwise.
 */
export const RolloutPolicySchema = z.strictObject({
  /** replicas per step after the canary step of one (default: half of the replicas to replace, rounded up) */
  batchSize: z.int().min(1).max(LIMITS.replicas).optional(),
  /** how long each step is watched before it is compared with the old revision's baseline (ms, default 5000) */
  soakMs: z.int().min(0).max(3_600_000).optional(),
  /** how long a step's new replicas may take to become ready (ms, default 60000) */
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).optional(),
});
export type RolloutPolicy = z.infer<typeof RolloutPolicySchema>;
const scalesInSteps = { steps: StepsSchema.optional(), rollout: RolloutPolicySchema.optional() };
// A Kubernetes workload (`runtime`) needs no spec: what its pods run is the object's pod template.
const ServiceDefinition = z.strictObject({ kind: z.literal('service'), ...workloadBase, ...scalesInSteps, runtime: WorkloadRuntimeSchema.optional(), spec: ServiceSpecSchema.prefault({}) });
const ConsumerDefinition = z.strictObject({ kind: z.literal('consumer'), ...workloadBase, ...scalesInSteps, spec: ConsumerSpecSchema });
const StreamDefinition = z.strictObject({ kind: z.literal('stream'), ...workloadBase, replicas: Replicas.optional(), spec: StreamSpecSchema });

export const WorkloadDefinitionSchema = z
  .discriminatedUnion('kind', [ServiceDefinition, ConsumerDefinition, StreamDefinition])
  .superRefine((definition, ctx) => {
    if (definition.contract.metrics && !(definition.kind === 'service' && definition.runtime?.kubernetes.metrics)) {
      ctx.addIssue({
        code: 'custom', path: ['contract', 'metrics'],
        message: 'contract.metrics are read from a Kubernetes workload\'s pods: name where they serve them (runtime.kubernetes.metrics: {"port": …})',
      });
    }
    if (definition.kind !== 'service') return;
    if (definition.runtime) {
      if (definition.spec.command !== undefined || definition.spec.image !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['spec'], message: 'a Kubernetes workload runs its pod template: give no command or image' });
      }
      if (definition.replicas === 'all') ctx.addIssue({ code: 'custom', path: ['replicas'], message: 'a Kubernetes workload has a replica count, not "all"' });
    } else if (definition.spec.command === undefined && definition.spec.image === undefined) {
      ctx.addIssue({ code: 'custom', path: ['spec', 'command'], message: 'a service runs a command or an image: give one' });
    }
  })
  .transform((definition) =>
    definition.kind === 'stream'
      ? { ...definition, replicas: definition.spec.operators.reduce((sum, op) => sum + op.parallelism, 0) as ReplicaCount }
      : definition,
  );
export type WorkloadDefinition = z.infer<typeof WorkloadDefinitionSchema>;
export type Workload = WorkloadDefinition & {
  name: string; revision: number; retired: boolean;
  /** the revision a replica of it runs now (lib/revision.ts): services and consumers; a stream job's layout is not rolled out */
  runs?: string;
};
export type WorkloadKind = Workload['kind'];
/** The Kubernetes object a workload scales, or null for one that runs on scalegate's agents. */
export const kubernetesOf = (workload: Pick<Workload, 'kind'> & { runtime?: { kubernetes: KubernetesRuntime } }): KubernetesRuntime | null =>
  (workload.kind === 'service' ? workload.runtime?.kubernetes ?? null : null);

/** What the registry keeps beside a definition. */
const registered = {
  name: WorkloadName, revision: z.int(), retired: z.boolean(),
  /** what a replica runs now (a digest of its spec, image pinned): a change of it is rolled out (DESIGN.md §3 "Versions and rollouts") */
  runs: z.string().optional(),
};

/** A workload as the API answers it (PUT and GET /v1/workloads/:name): its definition, defaults filled, and its registry fields. */
export const WorkloadSchema = z
  .discriminatedUnion('kind', [
    ServiceDefinition.extend(registered),
    ConsumerDefinition.extend(registered),
    // a stored stream job's replicas is its subtask count
    StreamDefinition.extend({ ...registered, replicas: Replicas }),
  ])
  .meta({ title: 'Workload' });

export const PortPairSchema = z.object({ public: z.int(), internal: z.int() });
export type PortPair = z.infer<typeof PortPairSchema>;

export const AssignmentSchema = z.object({
  runtimeId: z.string(),
  index: z.int().min(0),
  taskId: z.string(),
  ports: PortPairSchema.optional(),
  /** partitions owned by this replica (consumer workloads) */
  partitions: z.array(z.int()).optional(),
  /**
   * The revision this replica runs (DESIGN.md §3 "Versions and rollouts"): a digest of what a replica
   * runs (a service's or consumer's spec, image pinned). Absent on placements written before
   * revisions were recorded: those replicas run the workload's current one.
   */
  revision: z.string().optional(),
});
export type Assignment = z.infer<typeof AssignmentSchema>;

export const PlacementSchema = z.object({
  workload: z.string(),
  /** monotonic; every write is compare-and-set on it */
  fence: z.int(),
  /** generation of the task set; a stop-the-world replan starts a new one */
  generation: z.int(),
  assignments: z.array(AssignmentSchema),
});
export type Placement = z.infer<typeof PlacementSchema>;

export const UnplacedSchema = z.object({
  workload: z.string(),
  reason: z.literal('placement-unavailable'),
  /** how many replicas could not be placed */
  missing: z.int(),
});
export type Unplaced = z.infer<typeof UnplacedSchema>;

/** GET /v1/workloads/:name: the workload (a viewer sees its task environment's keys, not their values) and its placement. */
export const WorkloadViewSchema = z.intersection(WorkloadSchema, z.object({ placement: PlacementSchema.nullable() })).meta({ title: 'WorkloadView' });

/** What a viewer may read of a workload: its task environment's keys, never their values (secrets live there). */
export function redactEnvValues(workload: Workload): Workload {
  if (workload.kind !== 'service') return workload;
  const env = Object.fromEntries(Object.keys(workload.spec.env).map((key) => [key, REDACTED]));
  return { ...workload, spec: { ...workload.spec, env } };
}
export const REDACTED = '(redacted)';
