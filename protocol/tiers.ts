// Tiers (DESIGN.md §4.6, §6): the autoscaler policy of a tier (PUT /v1/tiers/:tier/policy) and the
// load observation an autoscaler signal carries (POST /v1/tiers/:tier/signals, or the `observe`
// signal of the `autoscale:<tier>` workflow). Strict objects: an unknown field is refused by name.
// Cron expressions are checked here for shape only; the API parses them with cron-parser
// (domain/change-windows.ts `cronProblem`) and answers 422 naming the field.
import { z } from 'zod';
import { LIMITS, oneOfPresent, requiredSchema, StepsSchema, WorkloadName } from './names';

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
export const TierName = z.string().min(1).max(63).regex(DNS_LABEL, 'tier names are DNS labels: lowercase letters, digits and inner dashes');
export const TierParamsSchema = z.object({ tier: TierName });

export const MAX_CHANGE_WINDOW_MS = 7 * 24 * 3_600_000;
const MAX_WINDOW_MS = 24 * 3_600_000;

const positive = (what: string) => z.number().positive({ message: `${what} must be > 0` }).max(1e12);

export const TierTargetsSchema = z
  .object({
    qpsPerInstance: positive('qpsPerInstance').optional(),
    activeUsersPerInstance: positive('activeUsersPerInstance').optional(),
    /** average CPU utilisation per replica to aim for, a fraction (0.6 = 60 %) */
    cpuUtilization: positive('cpuUtilization').max(1, { message: 'cpuUtilization is a fraction ≤ 1' }).optional(),
    queueDepthPerInstance: positive('queueDepthPerInstance').optional(),
  })
  .strict()
  .refine((t) => Object.values(t).some((v) => v !== undefined), { message: 'at least one target is required' })
  .meta({ minProperties: 1 });

export const ChangeWindowPolicySchema = z
  .object({
    /** five-field cron (minute hour day-of-month month day-of-week), UTC */
    cron: z.string().min(9).max(200).regex(/^\S+(\s+\S+){4,5}$/, 'a cron expression has 5 (or 6, with seconds) fields'),
    durationMs: z.int().min(1000).max(MAX_CHANGE_WINDOW_MS, { message: 'a change window lasts at most 7 days' }),
    forbid: z.literal('scale-in').default('scale-in'),
  })
  .strict();
export type ChangeWindowPolicy = z.infer<typeof ChangeWindowPolicySchema>;

/**
 * A signal the autoscaler pulls itself (issue 21): a workload's Kafka lag (a consumer's or stream
 * job's topic, or a service's own consumer group), read every intervalMs and taken as the tier's
 * queueDepth, as KEDA's Kafka scaler does; every decision still goes through the gates and drains.
 */
export const TierObserveSchema = z
  .object({
    kafkaLag: z.object({
      workload: WorkloadName,
      intervalMs: z.int().min(1_000).max(3_600_000).default(15_000),
    }).strict(),
  })
  .strict();
export type TierObserve = z.infer<typeof TierObserveSchema>;

export const TierPolicySchema = z
  .object({
    workloads: z.array(WorkloadName).min(1).max(50).refine((w) => new Set(w).size === w.length, { message: 'workloads are listed once each' }).meta({ uniqueItems: true }),
    minReplicas: z.int().min(1, { message: 'minReplicas must be ≥ 1 (0 is a retire)' }).max(LIMITS.replicas).default(1),
    maxReplicas: z.int().min(1).max(LIMITS.replicas).default(20),
    targets: TierTargetsSchema,
    /** a signal whose load per replica is within ±tolerance of its target asks for no change */
    tolerance: z.number().min(0).max(1).default(0.1),
    scaleUpStabilizationMs: z.int().min(0).max(MAX_WINDOW_MS).default(0),
    scaleDownStabilizationMs: z.int().min(0).max(MAX_WINDOW_MS).default(300_000),
    cooldownMs: z.int().min(0).max(MAX_WINDOW_MS).default(30_000),
    maxStep: z.int().min(1).max(LIMITS.replicas).default(4),
    changeWindows: z.array(ChangeWindowPolicySchema).max(20).default([]),
    /** passed to the scaleOut children: how long to watch the new size before comparing (scalegate addition) */
    soakMs: z.int().min(0).max(3_600_000).default(5_000),
    /** passed to the scaleIn children (scalegate addition) */
    drainTimeoutMs: z.int().min(100).max(3_600_000).default(60_000),
    /** signals the autoscaler pulls itself, besides those sent to it */
    observe: TierObserveSchema.optional(),
    /** passed to the scaleOut children: grow in these steps, each compared before the next (else the workload's own) */
    steps: StepsSchema.optional(),
  })
  .strict()
  .refine((p) => p.minReplicas <= p.maxReplicas, { message: 'minReplicas must be ≤ maxReplicas', path: ['maxReplicas'] })
  .refine((p) => !p.observe || p.targets.queueDepthPerInstance !== undefined, {
    message: 'a pulled Kafka lag is the tier\'s queueDepth: set targets.queueDepthPerInstance', path: ['observe', 'kafkaLag'],
  })
  .refine((p) => !p.observe || p.workloads.includes(p.observe.kafkaLag.workload), {
    message: 'observe.kafkaLag.workload must be one of the tier\'s workloads', path: ['observe', 'kafkaLag', 'workload'],
  })
  // The refinements JSON Schema can say; minReplicas ≤ maxReplicas and observe.kafkaLag.workload
  // being one of `workloads` compare two fields, which it cannot: the description says them.
  .meta({
    dependentSchemas: { observe: requiredSchema('targets', requiredSchema('queueDepthPerInstance')) },
    description: 'minReplicas ≤ maxReplicas (absent: 1 and 20); with observe, targets.queueDepthPerInstance is set and observe.kafkaLag.workload is one of workloads (else 422 validation-failed)',
  });
export type TierPolicy = z.infer<typeof TierPolicySchema>;
export type TierPolicyInput = z.input<typeof TierPolicySchema>;

const load = (what: string) => z.number().min(0, { message: `${what} must be ≥ 0` }).max(1e12);

/** One load observation for a tier (the body of POST /v1/tiers/:tier/signals and of the `observe` signal). */
export const TierSignalSchema = z
  .object({
    qps: load('qps').optional(),
    activeUsers: load('activeUsers').optional(),
    /** average CPU utilisation across the tier's replicas, a fraction (may exceed 1 when overloaded) */
    cpuUtilization: load('cpuUtilization').max(100).optional(),
    queueDepth: load('queueDepth').optional(),
    /** when it was observed (ISO 8601); the newest observation wins, in arrival order on a tie */
    at: z.iso.datetime({ offset: true }).optional(),
  })
  .strict()
  .refine((s) => s.qps !== undefined || s.activeUsers !== undefined || s.cpuUtilization !== undefined || s.queueDepth !== undefined, {
    message: 'a signal carries at least one of qps, activeUsers, cpuUtilization, queueDepth',
  })
  .meta(oneOfPresent('qps', 'activeUsers', 'cpuUtilization', 'queueDepth'));
export type TierSignal = z.infer<typeof TierSignalSchema>;

/** Answer of PUT /v1/tiers/:tier/policy and part of GET /v1/tiers/:tier. */
export interface StoredTierPolicy {
  tier: string;
  revision: number;
  policy: TierPolicy;
  updatedAt: string;
}

const storedTierPolicy = {
  tier: z.string(),
  /** one more on every PUT (1 for a new tier) */
  revision: z.int(),
  /** the policy, defaults filled */
  policy: TierPolicySchema,
  updatedAt: z.string(),
};

/** PUT /v1/tiers/:tier/policy (201 new, 200 replaced): the stored revision, delivered to autoscale:<tier>. */
export const TierPolicyAnswerSchema = z
  .object({ ...storedTierPolicy, workflowId: z.string().describe('autoscale:<tier>') })
  .meta({ title: 'TierPolicyAnswer' });

/** GET /v1/tiers: every tier with a policy, by name; `GET /v1/tiers/:tier` has what its autoscaler does. */
export const TierListSchema = z
  .object({ tiers: z.array(z.object({ ...storedTierPolicy, workflowId: z.string().describe('autoscale:<tier>') })) })
  .meta({ title: 'TierList' });

/** POST /v1/tiers/:tier/signals (202): the autoscaler workflow the observation went to. */
export const TierSignalAnswerSchema = z.object({ workflowId: z.string().describe('autoscale:<tier>') }).meta({ title: 'TierSignalAnswer' });

/**
 * GET /v1/tiers/:tier: the policy, what the autoscaler is doing and its last decision. `source` says
 * where the figures come from: the running workflow's `status` query, or (when it does not run)
 * the newest `autoscale` ledger row, which has no per-workload decisions, waits or counts.
 */
export const TierViewSchema = z
  .object({
    ...storedTierPolicy,
    autoscaler: z.object({
      workflowId: z.string(),
      /** Temporal's status in lowercase (running, completed, ...), or not-started */
      status: z.string(),
      phase: z.string().nullable(),
      /** runs across continue-as-new */
      runs: z.int().nullable(),
    }),
    source: z.enum(['workflow', 'ledger']),
    observations: z.array(z.unknown()),
    latest: z.unknown().describe('the newest observation, or null'),
    lastDecision: z
      .object({
        at: z.string(),
        workload: z.string().nullable(),
        from: z.number().nullable(),
        to: z.number().nullable(),
        decision: z.unknown().describe('e.g. "no-change: within tolerance", "scale-out"'),
        reason: z.string().nullable(),
        observation: z.unknown(),
        desiredPerSignal: z.unknown().describe('per signal: observed, desired, withinTolerance'),
        operation: z.unknown().describe('the workflow id of the operation it started, or null'),
        outcome: z.string().nullable(),
      })
      .nullable(),
    /** the last decision per workload (null from the ledger) */
    decisions: z.record(z.string(), z.unknown()).nullable(),
    runningOperations: z.array(z.object({
      workload: z.string(),
      workflowId: z.string(),
      runId: z.string(),
      kind: z.string(),
      startedAt: z.string(),
      by: z.enum(['autoscaler', 'other']),
      from: z.number().optional(),
      to: z.number().optional(),
    })),
    waiting: z.array(z.object({ workload: z.string(), reason: z.string(), untilMs: z.number() })),
    counts: z.object({ signals: z.int(), decisions: z.int(), suppressedRows: z.int(), rejectedSignals: z.int() }).nullable(),
    /** the pulled Kafka lag (policy.observe): its last reading or why it failed; null without one, or from the ledger */
    pull: z.object({
      workload: z.string(), intervalMs: z.int(), lastAt: z.string().nullable(), lastLag: z.number().nullable(), nextAt: z.string().nullable(), error: z.string().nullable(),
    }).nullable().optional(),
  })
  .meta({ title: 'Tier' });
