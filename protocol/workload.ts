// Workloads, their contracts and driver specs, and placements (DESIGN.md §3, §5): one schema per
// message, shared by the API, the workflows (which validate their own JSON input), the agents,
// the CLI and the tests.
import { z } from 'zod';

export const LabelsSchema = z.record(
  z.string().min(1).max(63).regex(/^[A-Za-z0-9][A-Za-z0-9_.\/-]*$/, 'label keys are [A-Za-z0-9_./-]'),
  z.string().max(63),
);
export type Labels = z.infer<typeof LabelsSchema>;

export const RuntimeId = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9][a-z0-9-]*$/, 'runtime ids are lowercase letters, digits and dashes');

export const WorkloadName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9][a-z0-9-]*$/, 'workload names are lowercase letters, digits and dashes');

const unknownable = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum([...values, 'unknown'] as unknown as [T[number] | 'unknown', ...(T[number] | 'unknown')[]]).default('unknown');

export const WORKLOAD_KINDS = ['service', 'consumer', 'stream'] as const;

export const ContractSchema = z
  .object({
    ownership: unknownable(['partitioned', 'shared-queue', 'none'] as const),
    partitions: z.int().min(1).max(100000).optional(),
    state: unknownable(['none', 'local', 'shared', 'checkpointed'] as const),
    ordering: unknownable(['none', 'per-key', 'per-partition', 'global'] as const),
    delivery: unknownable(['at-most-once', 'at-least-once', 'exactly-once'] as const),
    recovery: unknownable(['restart', 'reassign', 'replay-from-checkpoint'] as const),
    downstream: z
      .object({ maxReplicas: z.int().min(1).optional(), maxRatePerSec: z.number().positive().optional() })
      .optional(),
  })
  .refine((c) => c.ownership !== 'partitioned' || c.partitions !== undefined, {
    message: 'contract.partitions is required when ownership is "partitioned"',
    path: ['partitions'],
  });
export type Contract = z.infer<typeof ContractSchema>;
export const UNKNOWN_CONTRACT: Contract = ContractSchema.parse({});

export const ServiceSpecSchema = z.object({
  command: z.array(z.string().min(1)).min(1),
  env: z.record(z.string(), z.string()).default({}),
  readiness: z.union([z.object({ http: z.string().startsWith('/') }), z.object({ tcp: z.literal(true) })]).optional(),
  graceMs: z.int().min(0).max(600000).default(5000),
});
export type ServiceSpec = z.infer<typeof ServiceSpecSchema>;

const SqlIdentifier = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'table names are lowercase SQL identifiers');
export const ConsumerSpecSchema = z.object({
  partitions: z.int().min(1).max(4096),
  source: SqlIdentifier,
  sink: SqlIdentifier,
  workMs: z.number().min(0).max(60000).default(1),
});
export type ConsumerSpec = z.infer<typeof ConsumerSpecSchema>;

export const StreamSpecSchema = z.object({
  partitions: z.int().min(1),
  checkpointIntervalMs: z.int().min(10),
  maxParallelism: z.int().min(1).max(32768).default(128),
  operators: z
    .array(
      z.object({
        id: z.string().min(1),
        kind: z.enum(['source', 'map', 'keyed-aggregate', 'sink']),
        parallelism: z.int().min(1),
      }),
    )
    .min(1),
});
export type StreamSpec = z.infer<typeof StreamSpecSchema>;

export const Replicas = z.union([
  z.literal('all'),
  z
    .int({ message: 'replicas must be an integer ≥ 1 or "all"' })
    .refine((n) => n !== 0, { message: 'replicas 0 is refused: retire (DELETE) or delete the workload instead' })
    .refine((n) => n >= 1, { message: 'replicas must be an integer ≥ 1 or "all"' }),
]);
export type ReplicaCount = z.infer<typeof Replicas>;

const workloadBase = {
  replicas: Replicas,
  selector: LabelsSchema.default({}),
  colocate: z.string().min(1).max(63).optional(),
  contract: ContractSchema.default(UNKNOWN_CONTRACT),
};

/** PUT /v1/workloads/:name body (the name comes from the path). */
export const WorkloadDefinitionSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('service'), ...workloadBase, spec: ServiceSpecSchema }),
  z.object({ kind: z.literal('consumer'), ...workloadBase, spec: ConsumerSpecSchema }),
  z.object({ kind: z.literal('stream'), ...workloadBase, spec: StreamSpecSchema }),
]);
export type WorkloadDefinition = z.infer<typeof WorkloadDefinitionSchema>;
export type Workload = WorkloadDefinition & { name: string; revision: number; retired: boolean };
export type WorkloadKind = Workload['kind'];

export const PortPairSchema = z.object({ public: z.int(), internal: z.int() });
export type PortPair = z.infer<typeof PortPairSchema>;

export const AssignmentSchema = z.object({
  runtimeId: z.string(),
  index: z.int().min(0),
  taskId: z.string(),
  ports: PortPairSchema.optional(),
  /** partitions owned by this replica (consumer workloads) */
  partitions: z.array(z.int()).optional(),
});
export type Assignment = z.infer<typeof AssignmentSchema>;


export interface Placement {
  workload: string;
  /** monotonic; every write is compare-and-set on it */
  fence: number;
  /** generation of the task set; a stop-the-world replan starts a new one */
  generation: number;
  assignments: Assignment[];
}

export interface Unplaced {
  workload: string;
  reason: 'placement-unavailable';
  /** how many replicas could not be placed */
  missing: number;
}
