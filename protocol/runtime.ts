// Runtimes (nodes with an agent) as the API sees them: registration, heartbeats and the task
// reports they carry (DESIGN.md §3, §6).
import { z } from 'zod';
import { LabelsSchema, RuntimeId } from './workload';

export const RUNTIME_STATUSES = ['READY', 'CORDONED', 'LOST'] as const;
export type RuntimeStatus = (typeof RUNTIME_STATUSES)[number];

export const RegisterRuntimeSchema = z.strictObject({
  id: RuntimeId,
  endpoint: z.url({ protocol: /^https?$/ }).max(2048),
  labels: LabelsSchema.default({}),
  slots: z.int().min(1).max(1024).default(4),
});
export type RegisterRuntime = z.infer<typeof RegisterRuntimeSchema>;

/** What an agent reports about one task it hosts (DESIGN.md §5: every task reports these). */
export const TaskReportSchema = z.object({
  taskId: z.string().min(1).max(200),
  workload: z.string().min(1).max(63),
  incarnation: z.string().min(1).max(200),
  /** `restarting`: its process exited on its own and the agent starts it again after a backoff (DESIGN.md §3 "Supervision") */
  state: z.enum(['starting', 'ready', 'draining', 'stopped', 'failed', 'restarting']),
  /** `restarts`: how often the agent restarted it after an exit nobody asked for */
  counts: z.record(z.string().max(63), z.number()).default({}),
  latencyMs: z.object({ p50: z.number(), p95: z.number() }).optional(),
  backlog: z.number().optional(),
  errors: z.number().default(0),
  /** errors within the agent's error window (SCALEGATE_ERROR_WINDOW_MS): the current error rate the baseline gate reads */
  recentErrors: z.number().optional(),
  /** restarted too often within the agent's crash-loop window: not ready, whatever its state says */
  crashLooping: z.boolean().optional(),
  /** how its last run ended (a supervised task that exited at least once) */
  lastExit: z.object({ code: z.int().nullable(), signal: z.string().max(32).nullable(), at: z.string().max(64) }).optional(),
  /** while `restarting`: when the agent starts it again (ISO-8601) */
  nextRestartAt: z.string().max(64).optional(),
});
export type TaskReport = z.infer<typeof TaskReportSchema>;

export const HeartbeatSchema = z.strictObject({
  fence: z.int().min(1),
  tasks: z.array(TaskReportSchema).max(10_000).default([]),
});
export type Heartbeat = z.infer<typeof HeartbeatSchema>;

/** Bytes of randomness in a runtime credential (DESIGN.md §3 "Credentials"); sent base64url. */
export const RUNTIME_CREDENTIAL_BYTES = 32;

/** A runtime credential as the control plane issues it: base64url of at least 32 random bytes. */
export const RuntimeCredentialSchema = z.string().regex(/^[A-Za-z0-9_-]{43,512}$/, 'a base64url runtime credential');

/**
 * Answer of POST /v1/runtimes: the runtime, its fence and the lease terms. A registration with the
 * agent token (201) carries the runtime's new `credential`, once; a resume with the runtime's own
 * credential (200, `resumed: true`) keeps fence and credential and carries neither secret.
 */
export const LeaseTermsSchema = z.object({
  leaseTtlMs: z.int(),
  /** how often the runtime should heartbeat: a third of the lease */
  heartbeatIntervalMs: z.int(),
});

export const RegisterAnswerSchema = z.object({
  fence: z.int(),
  ...LeaseTermsSchema.shape,
  credential: RuntimeCredentialSchema.optional(),
  resumed: z.boolean().default(false),
});
export type RegisterAnswer = z.infer<typeof RegisterAnswerSchema>;

/**
 * Heartbeat answers, 200 or 409 `stale-fence`, list the reported tasks the runtime must stop:
 * `revoked` is only the reported tasks no placement assigns to that runtime (a recovery moved them
 * elsewhere, or they were never placed there), never simply everything reported. A 409 (the runtime
 * was declared LOST, or registered again elsewhere) also says `currentFence` and `status`: the
 * runtime keeps every task not revoked and registers again (docs/agent-protocol.md).
 */
export const HeartbeatAnswerSchema = z
  .object({
    revoked: z.array(z.string()).default([]),
    currentFence: z.int().nullable().optional(),
    status: z.enum(RUNTIME_STATUSES).nullable().optional(),
  })
  .loose();
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswerSchema>;

/** A runtime (a node with an agent) as placement and the API see it. */
export const RuntimeSchema = z.object({
  id: z.string(),
  endpoint: z.string(),
  labels: z.record(z.string(), z.string()),
  slots: z.int(),
  status: z.enum(RUNTIME_STATUSES),
  /** ISO-8601 instant */
  leaseExpiresAt: z.string(),
  fence: z.int(),
});
export type Runtime = z.infer<typeof RuntimeSchema>;

/** What the control plane keeps about a runtime beside `Runtime` (the API answers it too). */
const runtimeRecord = {
  lastHeartbeatAt: z.string().nullable(),
  /** when it was last declared LOST */
  lostAt: z.string().nullable(),
  /** set while a mass expiry holds it (not declared LOST, not recovered automatically) */
  heldAt: z.string().nullable(),
};

/** POST /v1/runtimes/:id/cordon and /uncordon: the runtime with the task reports of its last heartbeat. */
export const RuntimeViewSchema = RuntimeSchema.extend({ ...runtimeRecord, tasks: z.array(TaskReportSchema) }).meta({ title: 'Runtime' });
/** A runtime in GET /v1/state: how many tasks it reported instead of the reports. */
export const RuntimeSummarySchema = RuntimeSchema.extend({ ...runtimeRecord, tasks: z.int() });

/**
 * POST /v1/runtimes: the runtime and its lease terms; a new registration (201) carries its
 * `credential`, once; a resume (200) has `resumed: true` and no credential.
 */
export const RegistrationSchema = RuntimeViewSchema.extend(RegisterAnswerSchema.shape).meta({ title: 'Registration' });

/** POST /v1/runtimes/:id/heartbeat (200): the renewed lease and the reported tasks no placement assigns to the runtime. */
export const HeartbeatRenewalSchema = z
  .object({
    leaseExpiresAt: z.string(),
    fence: z.int(),
    status: z.enum(RUNTIME_STATUSES),
    revoked: z.array(z.string()),
    ...LeaseTermsSchema.shape,
  })
  .meta({ title: 'HeartbeatRenewal' });
