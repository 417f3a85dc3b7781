// Tier routes (DESIGN.md §6): the autoscaler policy of a tier, load signals to its autoscale:<tier>
// workflow (signal-with-start), and what the autoscaler is doing. The policy is stored with a
// revision and delivered to the workflow as a `policy` signal (also signal-with-start, so a policy
// and a first observation racing each other still leave the workflow on the newest revision).
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { cronProblem } from '../../domain/change-windows';
import { TierListSchema, TierParamsSchema, TierPolicyAnswerSchema, TierPolicySchema, TierSignalAnswerSchema, TierSignalSchema, TierViewSchema, type StoredTierPolicy } from '../../protocol/tiers';
import { sourceTopicOf, type Workload } from '../../protocol';
import { createTierStore } from '../../store/tiers';
import { autoscaler, autoscalerStatusQuery, observeSignal, policySignal, type AutoscalerStatus } from '../../workflows/autoscaler';
import type { ApiDeps } from '../deps';
import { ApiError } from '../../http/errors';
import { defineRoute, ok } from '../../http/route';

export const autoscalerWorkflowId = (tier: string) => `autoscale:${tier}`;

/** Whether a workload has a Kafka lag to observe: a topic as its source, or a service's own consumer group. */
const readsKafka = (workload: Workload): boolean => (workload.kind === 'service' ? workload.spec.kafka !== undefined : sourceTopicOf(workload.spec) !== null);

export function tierRoutes(deps: ApiDeps) {
  const tiers = createTierStore(deps.db);
  const client = () => deps.temporal.client().catch(() => {
    throw new ApiError('unavailable', 'Temporal is not reachable; try again');
  });
  const requirePolicy = async (tier: string) => {
    const stored = await tiers.getPolicy(tier);
    if (!stored) throw new ApiError('not-found', `tier ${tier} has no policy; PUT /v1/tiers/${tier}/policy first`);
    return stored;
  };
  const signalWithStart = async (stored: StoredTierPolicy, signal: 'observe' | 'policy', args: unknown) => {
    const c = await client();
    const options = {
      taskQueue: deps.config.SCALEGATE_TASK_QUEUE,
      workflowId: autoscalerWorkflowId(stored.tier),
      args: [{ tier: stored.tier, policy: stored.policy, revision: stored.revision }] as [unknown],
      staticSummary: `autoscale ${stored.tier}`,
    };
    return signal === 'observe'
      ? c.workflow.signalWithStart(autoscaler, { ...options, signal: observeSignal, signalArgs: [args] })
      : c.workflow.signalWithStart(autoscaler, { ...options, signal: policySignal, signalArgs: [args as { policy: unknown; revision: number }] });
  };
  /** Running scale:<workload> operations of the tier's workloads, whoever started them. */
  const runningOperations = async (c: Client, workloads: string[], ours: AutoscalerStatus['runningOperations']) => {
    const found = await Promise.all(workloads.map(async (workload) => {
      const workflowId = `scale:${workload}`;
      const d = await c.workflow.getHandle(workflowId).describe().catch(() => null);
      if (!d || d.status.name !== 'RUNNING') return null;
      const mine = ours.find((o) => o.workload === workload);
      return { workload, workflowId, runId: d.runId, kind: d.type, startedAt: d.startTime.toISOString(), by: mine ? 'autoscaler' as const : 'other' as const, ...(mine ? { from: mine.from, to: mine.to } : {}) };
    }));
    return found.filter((o) => o !== null);
  };

  return [
    defineRoute({
      method: 'PUT', path: '/v1/tiers/:tier/policy', access: 'operator', summary: 'define or replace a tier\'s autoscaler policy (a new revision; delivered to autoscale:<tier> as a signal)',
      operationId: 'putTierPolicy', params: TierParamsSchema, body: TierPolicySchema, bodyName: 'policy',
      response: { schema: TierPolicyAnswerSchema, status: { 201: 'defined (revision 1)', 200: 'replaced (the next revision)' } },
      handler: async ({ params, body }) => {
        const cronIssues = body.changeWindows.flatMap((w, i) => {
          const problem = cronProblem(w.cron);
          return problem ? [{ path: `body.changeWindows.${i}.cron`, message: `not a cron expression: ${problem}` }] : [];
        });
        const observed = body.observe ? await deps.registry.getWorkload(body.observe.kafkaLag.workload) : null;
        if (observed && !readsKafka(observed)) {
          cronIssues.push({ path: 'body.observe.kafkaLag.workload', message: `${observed.name} reads no Kafka topic (a consumer's or stream job's source, or a service's spec.kafka): it has no lag to observe` });
        }
        if (cronIssues.length) {
          throw new ApiError('validation-failed', `invalid policy: ${cronIssues.map((i) => `${i.path.slice(5)}: ${i.message}`).join('; ')}`, { issues: cronIssues });
        }
        const { created, ...stored } = await tiers.putPolicy(params.tier, body);
        await signalWithStart(stored, 'policy', { policy: stored.policy, revision: stored.revision });
        return ok({ ...stored, workflowId: autoscalerWorkflowId(params.tier) }, created ? 201 : 200);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/tiers/:tier/signals', access: 'operator-or-agent',
      summary: 'a load observation for a tier: signal-with-start of autoscale:<tier> (202 {workflowId})', operationId: 'signalTier',
      params: TierParamsSchema, body: TierSignalSchema, response: { schema: TierSignalAnswerSchema, status: { 202: 'delivered to autoscale:<tier>' } }, errors: [404],
      handler: async ({ params, body }) => {
        const stored = await requirePolicy(params.tier);
        await signalWithStart(stored, 'observe', body);
        return ok({ workflowId: autoscalerWorkflowId(params.tier) }, 202);
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/tiers', access: 'viewer', summary: 'every tier with a policy, by name', operationId: 'listTiers',
      response: { schema: TierListSchema, status: { 200: 'the tiers (none: an empty list)' } },
      handler: async (_ctx) => ok({ tiers: (await tiers.listPolicies()).map((stored) => ({ ...stored, workflowId: autoscalerWorkflowId(stored.tier) })) }),
    }),
    defineRoute({
      method: 'GET', path: '/v1/tiers/:tier', access: 'viewer',
      summary: 'a tier: policy, latest observations, last decision and its reason, running operation', operationId: 'getTier',
      params: TierParamsSchema, response: { schema: TierViewSchema, status: { 200: 'the tier' } }, errors: [404],
      handler: async ({ params }) => {
        const stored = await requirePolicy(params.tier);
        const c = await client();
        const workflowId = autoscalerWorkflowId(params.tier);
        const handle = c.workflow.getHandle(workflowId);
        let temporalStatus: string | null = null;
        let status: AutoscalerStatus | null = null;
        try {
          temporalStatus = (await handle.describe()).status.name;
          if (temporalStatus === 'RUNNING') status = await handle.query(autoscalerStatusQuery).catch(() => null);
        } catch (error) {
          if (!(error instanceof WorkflowNotFoundError)) throw error;
        }
        const operations = await runningOperations(c, stored.policy.workloads, status?.runningOperations ?? []);
        const autoscalerInfo = { workflowId, status: temporalStatus?.toLowerCase() ?? 'not-started', phase: status?.phase ?? null, runs: status?.run.runs ?? null };
        if (status) {
          const decision = status.lastDecision;
          return ok({
            tier: params.tier, revision: stored.revision, policy: stored.policy, updatedAt: stored.updatedAt, autoscaler: autoscalerInfo, source: 'workflow',
            observations: status.observations, latest: status.latest,
            lastDecision: decision && {
              at: new Date(decision.atMs).toISOString(), workload: decision.workload, from: decision.from, to: decision.to, decision: decision.label,
              reason: decision.reason, observation: decision.observation, desiredPerSignal: decision.desiredPerSignal, operation: decision.operation, outcome: decision.outcome,
            },
            decisions: status.decisions, runningOperations: operations, waiting: status.waiting, counts: status.counts,
            pull: status.pull ? {
              workload: status.pull.workload, intervalMs: status.pull.intervalMs, error: status.pull.error, lastLag: status.pull.lastLag,
              lastAt: status.pull.lastAtMs === null ? null : new Date(status.pull.lastAtMs).toISOString(), nextAt: new Date(status.pull.nextAtMs).toISOString(),
            } : null,
          });
        }
        // Not running (or not answering): the ledger has the last decision and its inputs.
        const [row] = await tiers.recentDecisions(params.tier, 1);
        const inputs = (row?.inputs ?? {}) as Record<string, unknown>;
        return ok({
          tier: params.tier, revision: stored.revision, policy: stored.policy, updatedAt: stored.updatedAt, autoscaler: autoscalerInfo, source: 'ledger',
          observations: (inputs.observations as unknown[] | undefined) ?? [], latest: inputs.observation ?? null,
          lastDecision: row ? {
            at: row.at, workload: row.workload, from: row.fromReplicas, to: row.toReplicas, decision: inputs.decision ?? null, reason: row.reason,
            observation: inputs.observation ?? null, desiredPerSignal: inputs.desiredPerSignal ?? [], operation: inputs.operation ?? null, outcome: row.outcome,
          } : null,
          decisions: null, runningOperations: operations, waiting: [], counts: null,
        });
      },
    }),
  ];
}
