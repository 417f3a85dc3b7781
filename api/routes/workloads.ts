import { basisMoved } from '../../domain/plan';
import { sourceTopicOf } from '../../protocol';
import { kubernetesOf, PlanParamsSchema, PlanRequestSchema, PlanSchema, PutWorkloadAnswerSchema, redactEnvValues, RolloutRequestSchema, StartedOperationSchema, WorkloadDefinitionSchema, WorkloadParamsSchema, WorkloadViewSchema } from '../../protocol';
import { applyPlan } from '../../workflows/apply-plan';
import { scaleOut } from '../../workflows/scale-out';
import { scaleIn } from '../../workflows/scale-in';
import { chooseScale, isRefusal } from '../../domain/scale-choice';
import { retireWorkload } from '../../workflows/retire-workload';
import { rollout } from '../../workflows/rollout';
import { runsRevisionOf } from '../../lib/revision';
import type { ApiDeps } from '../deps';
import { checkReplicaLimit } from '../limits';
import { ImageResolveError, isLoopback, parseImageName, pinImage } from '../../lib/image-registry';
import { ApiError } from '../../http/errors';
import { CodedError } from '../../protocol/errors';
import { requireActiveWorkload, requireIdle, startOperation, wakeReconcileLoop } from '../operations';
import { defineRoute, ok } from '../../http/route';
import { KindChangeError } from '../../store/registry';

/**
 * A workload reading a Kafka topic (a consumer's or stream job's source, a service's own consumer
 * group) names a topic the broker has, and declares (`field`) the partition count the broker has,
 * or is refused. `declared` undefined: nothing declared to compare.
 */
async function checkBrokerPartitions(deps: ApiDeps, topic: string | null, declared: number | undefined, field: string): Promise<void> {
  if (topic === null) return;
  if (!deps.kafka) throw new ApiError('invalid-spec', `the workload reads kafka topic ${topic}, but the control plane has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)`);
  const partitions = await deps.kafka.partitionCount(topic).catch((error: Error) => {
    throw new ApiError('broker-unavailable', `the Kafka broker did not answer for topic ${topic}: ${error.message}; nothing was defined, retry`);
  });
  if (partitions === 0) throw new ApiError('invalid-spec', `kafka topic ${topic} does not exist on the broker`);
  if (declared !== undefined && partitions !== declared) {
    throw new ApiError('partitions-mismatch', `kafka topic ${topic} has ${partitions} partitions on the broker; ${field} declares ${declared}`);
  }
}

/**
 * A container service's image pinned by digest (a tag resolved at its registry), so every node runs
 * one image. Only registries on loopback (the embedded one) and those SCALEGATE_IMAGE_REGISTRIES
 * names may be pulled from: an image from any other is refused before anyone is asked.
 */
async function pinnedSpec<T extends { image?: string }>(spec: T, allowedRegistries: readonly string[]): Promise<T> {
  if (spec.image === undefined) return spec;
  const { registry } = parseImageName(spec.image);
  if (!isLoopback(registry) && !allowedRegistries.includes(registry)) {
    throw new ApiError('invalid-spec', `image ${spec.image}: registry ${registry} is not one this control plane pulls from (loopback, or SCALEGATE_IMAGE_REGISTRIES: ${allowedRegistries.join(', ') || 'none'}); nothing was defined`);
  }
  const image = await pinImage(spec.image).catch((error: unknown) => {
    if (error instanceof ImageResolveError && error.reason === 'missing') throw new ApiError('invalid-spec', `${error.message}; nothing was defined`);
    throw new ApiError('image-unavailable', `${(error as Error).message}; nothing was defined, retry`);
  });
  return { ...spec, image };
}

export function workloadRoutes(deps: ApiDeps) {
  const requireWorkload = async (name: string) => {
    const workload = await deps.registry.getWorkload(name);
    if (!workload) throw new ApiError('not-found', `no workload ${name}`);
    return workload;
  };

  return [
    defineRoute({
      method: 'PUT', path: '/v1/workloads/:name', access: 'operator',
      summary: 'define or replace a workload; a change of what a replica runs (image digest, command, env, limits) starts a rollout under scale:<name> (202); a live workload\'s kind cannot change (409 kind-change: retire it first)', operationId: 'putWorkload',
      params: WorkloadParamsSchema, body: WorkloadDefinitionSchema, bodyName: 'workload',
      response: {
        schema: PutWorkloadAnswerSchema,
        status: { 201: 'defined', 200: 'replaced (a new revision; what a replica runs is unchanged)', 202: 'what a replica runs changed: the rollout started under scale:<name>, running replicas untouched until it replaces them' },
      }, errors: [409],
      handler: async ({ params, body, request }) => {
        const existed = await deps.registry.getWorkload(params.name);
        // Before the broker is asked: a kind change is refused whatever the new definition says (the store judges it again as it writes).
        if (existed && !existed.retired && existed.kind !== body.kind) throw new KindChangeError(params.name, existed.kind, body.kind);
        checkReplicaLimit(body.replicas, deps.config.SCALEGATE_MAX_REPLICAS);
        if (body.kind === 'consumer' || body.kind === 'stream') await checkBrokerPartitions(deps, sourceTopicOf(body.spec), body.spec.partitions, 'spec.partitions');
        if (body.kind === 'service' && body.spec.kafka) await checkBrokerPartitions(deps, body.spec.kafka.topic, body.contract.partitions, 'contract.partitions');
        const definition = body.kind === 'service' ? { ...body, spec: await pinnedSpec(body.spec, deps.config.SCALEGATE_IMAGE_REGISTRIES) } : body;
        // A change of what a replica runs is a rollout, one operation on scale:<name>: refused (409) while another runs there, nothing written.
        const runs = runsRevisionOf(definition);
        const rollsOut = existed && !existed.retired && runs !== existed.runs && ((await deps.registry.getPlacement(params.name))?.assignments.length ?? 0) > 0;
        if (rollsOut) await requireIdle(deps, `scale:${params.name}`);
        const { workload, change } = await deps.registry.putWorkloadRevision(params.name, definition);
        if (!change || change.placed === 0) {
          // something for the reconcile loop to place (a new workload, a pending one, a changed size or selector): now, not at its next interval
          wakeReconcileLoop(deps, request.log);
          return ok(workload, existed ? 200 : 201);
        }
        const started = await startOperation(deps, {
          request, workflow: rollout, workflowId: `scale:${params.name}`,
          input: { workload: params.name, revision: change.to, reason: `PUT /v1/workloads/${params.name}: ${change.from} → ${change.to}` },
          summary: `rollout ${params.name} ${change.from} → ${change.to}`,
        }).catch((error: unknown) => {
          // Written, but its rollout did not start (another operation took scale:<name> since the check, or Temporal did not answer): say both.
          if (!(error instanceof CodedError)) throw error;
          throw new ApiError(error.code, `the definition of ${params.name} was written (what a replica runs: ${change.from} → ${change.to}, running replicas untouched), but its rollout did not start: ${error.message}; POST /v1/workloads/${params.name}/rollout starts it`, { ...error.details, written: true, revision: change });
        });
        return ok({ ...started, revision: { from: change.from, to: change.to } }, 202);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/workloads/:name/rollout', access: 'operator', startsOperation: true, operationId: 'rolloutWorkload',
      summary: 'roll the replicas not on the workload\'s current revision onto it (after a rollout that ended compensated, failed or cancelled, or a PUT whose rollout could not start)',
      params: WorkloadParamsSchema, body: RolloutRequestSchema, bodyName: 'rollout',
      response: { schema: StartedOperationSchema, status: { 202: 'rollout started under scale:<name>' } }, errors: [404, 409, 422],
      handler: async ({ params, body, request }) => {
        const workload = await requireActiveWorkload(deps, params.name);
        if (!workload.runs) throw new ApiError('unsupported-kind', `${params.name} is a ${workload.kind}: only services and consumers are rolled out`);
        const started = await startOperation(deps, {
          request, body, workflow: rollout, workflowId: `scale:${params.name}`,
          input: { workload: params.name, revision: workload.runs, ...body, reason: body.reason ?? 'requested via API' },
          summary: `rollout ${params.name} → ${workload.runs}`,
        });
        return ok(started, 202);
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/workloads/:name', access: 'viewer', summary: 'a workload with its placement (viewers see env keys, not values)', operationId: 'getWorkload',
      params: WorkloadParamsSchema, response: { schema: WorkloadViewSchema, status: { 200: 'the workload and its placement (null before its first)' } }, errors: [404],
      handler: async ({ params, role }) => {
        const workload = await requireWorkload(params.name);
        const placement = await deps.registry.getPlacement(params.name);
        return ok({ ...(role === 'operator' ? workload : redactEnvValues(workload)), placement });
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/v1/workloads/:name', access: 'operator', startsOperation: true, summary: 'retire a workload: its tasks are stopped by a workflow', operationId: 'retireWorkload',
      params: WorkloadParamsSchema, response: { schema: StartedOperationSchema, status: { 202: 'retireWorkload started under scale:<name>' } }, errors: [404],
      handler: async ({ params , request }) => {
        await requireWorkload(params.name);
        const started = await startOperation(deps, { request,
          workflow: retireWorkload, workflowId: `scale:${params.name}`, input: { workload: params.name },
          summary: `retire ${params.name}`,
        });
        await deps.registry.retireWorkload(params.name);
        return ok(started, 202);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/workloads/:name/plan', access: 'operator', summary: 'plan a replica change: starts, stops, moves, warnings, basis', operationId: 'planWorkload',
      params: WorkloadParamsSchema, body: PlanRequestSchema, response: { schema: PlanSchema, status: { 201: 'the plan, stored for apply' } }, errors: [404, 409, 422],
      handler: async ({ params, body }) => {
        const workload = await requireWorkload(params.name);
        if (workload.retired) throw new ApiError('conflict', `workload ${params.name} is retired; PUT it again first`);
        // A plan places replicas on agents; a Kubernetes object's pods are its cluster's to place.
        const ref = kubernetesOf(workload);
        if (ref) throw new ApiError('unsupported-kind', `${params.name} is the Kubernetes ${ref.kind} ${ref.namespace}/${ref.name}: the cluster places its pods, so there is no plan to review; scale it with POST /v1/workloads/${params.name}/scale`);
        checkReplicaLimit(body.replicas, deps.config.SCALEGATE_MAX_REPLICAS);
        return ok(await deps.planner.plan(workload, body.replicas), 201);
      },
    }),
    defineRoute({
      method: 'POST', path: '/v1/plans/:id/apply', access: 'operator', startsOperation: true, summary: 'apply a plan (409 stale-plan when its basis moved)', operationId: 'applyPlan',
      params: PlanParamsSchema, response: { schema: StartedOperationSchema, status: { 202: 'scaleOut, scaleIn or applyPlan started under scale:<name>' } }, errors: [404],
      handler: async ({ params , request }) => {
        const plan = await deps.plans.get(params.id);
        if (!plan) throw new ApiError('not-found', `no plan ${params.id}`);
        const workload = await requireWorkload(plan.workload);
        const placement = await deps.registry.getPlacement(plan.workload);
        const now = { registryRevision: workload.revision, placementFence: placement?.fence ?? 0 };
        if (plan.appliedWorkflow || basisMoved(plan.basis, now)) {
          throw new ApiError('stale-plan', plan.appliedWorkflow
            ? `plan ${plan.id} was already applied by ${plan.appliedWorkflow}; plan again`
            : `the basis of plan ${plan.id} moved (revision ${plan.basis.registryRevision} → ${now.registryRevision}, fence ${plan.basis.placementFence} → ${now.placementFence}); plan again`,
          { basis: plan.basis, current: now });
        }
        // plan/apply is the scale procedure (DESIGN.md §3): a plan that raises replicas passes the
        // scale-out gates and comparison, one that lowers them drains like a scale-in.
        const current = placement?.assignments.length ?? 0;
        const choice = chooseScale({ door: 'plan', workload: plan.workload, kind: workload.kind, current, target: plan.target.length, unplaced: plan.unplaced?.missing });
        if (isRefusal(choice)) throw new ApiError(choice.refused, choice.message);
        const started = choice.workflow === 'applyPlan'
          ? await startOperation(deps, { request,
            workflow: applyPlan, workflowId: choice.workflowId, input: { planId: plan.id },
            summary: `apply plan ${plan.workload} ${plan.fromReplicas} → ${plan.target.length}`,
          })
          : await startOperation(deps, { request,
            workflow: choice.workflow === 'scaleOut' ? scaleOut : scaleIn, workflowId: choice.workflowId,
            input: { workload: plan.workload, replicas: plan.target.length, planId: plan.id, reason: `plan ${plan.id} applied` },
            summary: `apply plan ${plan.workload} ${current} → ${plan.target.length} (${choice.workflow})`,
          });
        await deps.plans.markApplied(plan.id, started.workflowId);
        return ok(started, 202);
      },
    }),
  ];
}
