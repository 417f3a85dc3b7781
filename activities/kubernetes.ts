// The Kubernetes runtime's activities (issue 37): thin calls of the runtime port
// (runtimes/kubernetes.ts) for the workflows' Kubernetes path: the object and its pods, the facts
// its gates judge, the scale write, the drain handshake's marks and the waits. A workload that
// names no Kubernetes object, or a control plane with no cluster access, fails non-retryably.
import { ApplicationFailure } from '@temporalio/activity';
import { kubernetesOf, NODE_NOT_READY_EVENT, type KubernetesRuntime, type ServiceKafka } from '../protocol';
import { groupConvergence } from '../domain/consumer-group';
import { drainAcknowledgements } from '../domain/kubernetes';
import { parseExposition, podFigures, type MetricsReading } from '../domain/pod-metrics';
import { ANNOTATIONS, LOWEST_DELETION_COST, ScaleConflictError, type PodFacts } from '../runtimes/kubernetes';
import { consumerGroupReads, declaredGroup } from './consumer-group';
import { cancellationRequested, heartbeat, lookups, type ActivityDeps } from './ports';
import { setTimeout as sleep } from 'node:timers/promises';

const POLL_MS = 200;

export function kubernetesActivities(deps: ActivityDeps) {
  const { requireWorkload } = lookups(deps);
  const groups = consumerGroupReads(deps);
  const target = async (workload: string): Promise<{ ref: KubernetesRuntime; port: NonNullable<ActivityDeps['kubernetes']> }> => {
    const ref = kubernetesOf(await requireWorkload(workload));
    if (!ref) throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `${workload} names no Kubernetes object` });
    if (!deps.kubernetes) throw ApplicationFailure.create({ type: 'no-cluster-access', nonRetryable: true, message: `the worker has no Kubernetes access (SCALEGATE_KUBECONFIG, or a service account) for ${ref.cluster}` });
    try {
      deps.kubernetes.reach(ref);
    } catch (error) {
      // a cluster no context names: asking again will not make one
      throw ApplicationFailure.create({ type: 'no-cluster-access', nonRetryable: true, message: (error as Error).message });
    }
    return { ref, port: deps.kubernetes };
  };
  /** The declared consumer group's verdict for `members` replicas (domain/consumer-group.ts), or null where the workload declares none. */
  /** A declared consumer group's verdict for `members` replicas (domain/consumer-group.ts), read from the broker; null where none is declared. */
  const groupVerdict = async (declared: ServiceKafka | null, members: number, removed: readonly string[] = []): Promise<{ converged: boolean; detail: string } | null> => {
    if (!declared) return null;
    const facts = await groups.read(declared);
    return 'error' in facts ? { converged: false, detail: `consumer group ${declared.group}: ${facts.error}` } : groupConvergence(facts, members, removed);
  };
  const declaredGroupOf = async (workload: string) => declaredGroup(await requireWorkload(workload));
  /** Polls `probe` until it answers, heartbeating; null at the deadline. */
  const until = async <T>(deadlineMs: number, probe: () => Promise<T | null>): Promise<T | null> => {
    for (;;) {
      const answer = await probe();
      if (answer !== null) return answer;
      if (Date.now() >= deadlineMs || cancellationRequested()) return null;
      heartbeat();
      await sleep(POLL_MS);
    }
  };

  return {
    /**
     * The object's size, resourceVersion, selectors and requests, and its pods; for a workload that
     * declares its Kafka consumer group, the group's verdict over the live pods (one member each,
     * every partition owned), read from the broker.
     */
    async kubernetesObject(input: { workload: string }) {
      const { ref, port } = await target(input.workload);
      const object = await port.readObject(ref);
      const pods = await port.readPods(ref, object.podSelector);
      return { ref, object, pods, group: await groupVerdict(await declaredGroupOf(input.workload), pods.filter((p) => !p.terminating).length) };
    },

    /**
     * What the gates judge: the nodes with their allocatable and requested resources, and the
     * PodDisruptionBudgets over the pods. A node found NotReady is evidence, recorded once per
     * episode as a `kubernetes.node-not-ready` event (GET /v1/state lists it): the cluster moves its
     * pods, scalegate only stops counting it as room.
     */
    async kubernetesGateFacts(input: { workload: string }) {
      const { ref, port } = await target(input.workload);
      const object = await port.readObject(ref);
      const [nodes, budgets] = await Promise.all([port.readNodes(ref), port.readBudgets(ref, object.podSelector)]);
      for (const node of nodes.filter((n) => !n.ready)) {
        const since = node.notReadySince ?? null;
        // one event per NotReady episode: keyed by when its Ready condition last changed (a retry finds the first)
        const idempotencyKey = `${ref.cluster}/${node.name}/${since ?? 'never Ready'}`;
        if (await deps.stores.registry.eventByKey(NODE_NOT_READY_EVENT, idempotencyKey)) continue;
        await deps.stores.registry.emitEvent(NODE_NOT_READY_EVENT, node.name, { cluster: ref.cluster, since, seenBy: input.workload, idempotencyKey });
      }
      return { nodes, budgets };
    },

    /**
     * The `scale` write with the resourceVersion the decision was made on. A conflict (the object
     * moved) is a non-retryable `scale-conflict`: the workflow reads again and decides again.
     */
    async kubernetesScale(input: { workload: string; replicas: number; resourceVersion: string }): Promise<{ resourceVersion: string }> {
      const { ref, port } = await target(input.workload);
      try {
        return await port.writeScale(ref, input.replicas, input.resourceVersion);
      } catch (error) {
        if (error instanceof ScaleConflictError) throw ApplicationFailure.create({ type: 'scale-conflict', nonRetryable: true, message: error.message });
        throw error;
      }
    },

    /** Marks the victims: the lowest pod-deletion-cost and the drain request (its value: the operation). */
    async kubernetesMarkVictims(input: { workload: string; pods: string[]; operation: string }): Promise<string[]> {
      const { ref, port } = await target(input.workload);
      return port.annotatePods(ref, input.pods, { [ANNOTATIONS.deletionCost]: LOWEST_DELETION_COST, [ANNOTATIONS.drainRequested]: input.operation });
    },

    /** Takes every mark off (the cost, the request and the app's acknowledgement): the pods are as before. */
    async kubernetesUnmarkVictims(input: { workload: string; pods: string[] }): Promise<string[]> {
      const { ref, port } = await target(input.workload);
      return port.annotatePods(ref, input.pods, { [ANNOTATIONS.deletionCost]: null, [ANNOTATIONS.drainRequested]: null, [ANNOTATIONS.drained]: null });
    },

    /**
     * Waits (heartbeating) for each victim to acknowledge its drain: its scalegate.dev/drained
     * annotation, or, for a workload declaring its Kafka consumer group, the group without the
     * victims and the survivors owning every partition. At the deadline, says who did not and why.
     */
    async kubernetesAwaitDrained(input: { workload: string; pods: string[]; timeoutMs: number }): Promise<{ acknowledged: string[]; missing: string[]; why?: string | null }> {
      const { ref, port } = await target(input.workload);
      const declared = await declaredGroupOf(input.workload);
      const deadline = Date.now() + input.timeoutMs;
      let answer = drainAcknowledgements(input.pods, [], null);
      await until(deadline, async () => {
        const pods = await port.readPods(ref);
        const survivors = pods.filter((p) => !p.terminating && !input.pods.includes(p.name)).length;
        answer = drainAcknowledgements(input.pods, pods, await groupVerdict(declared, survivors, input.pods));
        return answer.missing.length === 0 ? true : null;
      });
      return answer;
    },

    /**
     * Waits (heartbeating) until the object runs `replicas` Ready pods, none terminating, and none of
     * `gone` is left. At the deadline it fails non-retryably, naming what it saw.
     */
    async kubernetesAwaitConverged(input: { workload: string; replicas: number; gone?: string[]; timeoutMs: number }): Promise<PodFacts[]> {
      const { ref, port } = await target(input.workload);
      const declared = await declaredGroupOf(input.workload);
      const deadline = Date.now() + input.timeoutMs;
      let seen: PodFacts[] = [];
      let group: { converged: boolean; detail: string } | null = null;
      const converged = await until(deadline, async () => {
        seen = await port.readPods(ref);
        const live = seen.filter((p) => !p.terminating);
        const left = seen.filter((p) => input.gone?.includes(p.name));
        if (!(live.length === input.replicas && seen.length === input.replicas && live.every((p) => p.ready) && left.length === 0)) return null;
        // a declared consumer group has converged too: one member per pod, the removed ones gone, every partition owned
        group = await groupVerdict(declared, input.replicas, input.gone);
        return group === null || group.converged ? seen : null;
      });
      if (converged) return converged;
      const pods = seen.map((p) => `${p.name} ${p.terminating ? 'terminating' : p.ready ? 'Ready' : 'not Ready'}`).join(', ') || 'no pod';
      throw ApplicationFailure.create({
        type: 'converge-timeout', nonRetryable: true,
        message: `${ref.kind} ${ref.namespace}/${ref.name} did not converge to ${input.replicas} Ready pod(s) in ${input.timeoutMs} ms: ${pods}${group ? `; ${(group as { detail: string }).detail}` : ''}`,
      });
    },

    /**
     * The contract's metrics from every Ready pod (not terminating), each read twice the endpoint's
     * windowMs apart through the API server's pod proxy: a counter's rate per second, a gauge's
     * value. A pod that cannot be read is named with why, never left out in silence.
     */
    async kubernetesPodMetrics(input: { workload: string }): Promise<MetricsReading> {
      const { ref, port } = await target(input.workload);
      const declared = (await requireWorkload(input.workload)).contract.metrics ?? [];
      if (!ref.metrics || declared.length === 0) {
        throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `${input.workload} names no metrics to read (contract.metrics and runtime.kubernetes.metrics)` });
      }
      const names = declared.map((m) => m.name);
      const pods = (await port.readPods(ref)).filter((p) => !p.terminating && p.ready).map((p) => p.name);
      const read = (pod: string) => port.readPodMetricsText(ref, pod).then((text) => parseExposition(text, names));
      const first = await Promise.all(pods.map((pod) => read(pod).then((values) => ({ values, at: Date.now() }), (error: Error) => ({ error: error.message }))));
      const windowMs = ref.metrics.windowMs;
      await until(Date.now() + windowMs, async () => null); // the window, heartbeating
      const counters = new Set<string>();
      const figures = await Promise.all(pods.map(async (pod, i) => {
        const before = first[i];
        if ('error' in before) return { pod, figures: {}, error: before.error };
        try {
          const values = await read(pod);
          for (const [name, value] of Object.entries(values)) if (value.type === 'counter') counters.add(name);
          return podFigures(pod, before.values, values, Date.now() - before.at);
        } catch (error) {
          return { pod, figures: {}, error: (error as Error).message };
        }
      }));
      return { windowMs, pods: figures, counters: [...counters].sort() };
    },

    /** A completed operation's size as the workload's desired state (it has no placement record). */
    async setDesiredReplicas(input: { workload: string; replicas: number }): Promise<void> {
      await deps.stores.registry.setDesiredReplicas(input.workload, input.replicas);
    },
  };
}
