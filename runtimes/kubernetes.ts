// The runtime port's Kubernetes implementation (DESIGN.md §3 "Runtimes", §5, issue 37): the
// object's size and pods, the nodes and PodDisruptionBudgets the gates read, the `scale`
// subresource written with the expected resourceVersion, and the drain handshake's annotations.
// Every call reads or writes the API server; the decisions are domain/kubernetes.ts's.
import type { DisruptionBudgetFacts, NodeFacts, PodEvidence, PodRequests } from '../domain/kubernetes';
import { cpuMilli, parseQuantity } from '../domain/kubernetes';
import { KubernetesApiError, type KubernetesClient } from '../lib/kubernetes';
import type { KubernetesRuntime } from '../protocol';

/** The annotations of the drain handshake (docs/runbooks.md says what an app does with them). */
export const ANNOTATIONS = {
  /** set by scalegate on a victim: drain, then acknowledge; its value is the operation's workflow id */
  drainRequested: 'scalegate.dev/drain-requested',
  /** set by the app (or its sidecar) once drained: any value */
  drained: 'scalegate.dev/drained',
  /** reported by the app: the work it has in flight, what victim choice reads */
  inFlight: 'scalegate.dev/in-flight',
  /** the ReplicaSet controller deletes the pods of lowest cost first */
  deletionCost: 'controller.kubernetes.io/pod-deletion-cost',
} as const;
/** The lowest pod-deletion-cost (an int32). */
export const LOWEST_DELETION_COST = '-2147483648';

export interface ObjectFacts {
  replicas: number;
  readyReplicas: number;
  resourceVersion: string;
  podSelector: Record<string, string>;
  nodeSelector: Record<string, string>;
  requests: PodRequests;
  /** the controller has seen the newest spec (status.observedGeneration ≥ metadata.generation) */
  observed: boolean;
}

export interface PodFacts extends PodEvidence {
  drainRequested: string | null;
  drained: boolean;
  /** being deleted (metadata.deletionTimestamp) */
  terminating: boolean;
  ordinal?: number;
}

export class ScaleConflictError extends Error {
  constructor(readonly ref: KubernetesRuntime, message: string) {
    super(message);
    this.name = 'ScaleConflictError';
  }
}

// What the port reads of the API server's objects (their JSON, unchecked: only these fields are read).
interface Metadata {
  name: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
}
type Conditions = { type: string; status: string; lastTransitionTime?: string }[];
interface Container {
  resources?: { requests?: Record<string, string> };
}
/** A Deployment or a StatefulSet. */
interface ScaledObject {
  metadata: Metadata;
  spec: { replicas?: number; selector?: { matchLabels?: Record<string, string> }; template: { spec: { containers?: Container[]; nodeSelector?: Record<string, string> } } };
  status?: { readyReplicas?: number; observedGeneration?: number };
}
interface Pod {
  metadata: Metadata;
  spec: { nodeName?: string; containers?: Container[] };
  status?: { conditions?: Conditions; containerStatuses?: { restartCount?: number }[] };
}
interface Node {
  metadata: Metadata;
  spec?: { unschedulable?: boolean };
  status?: { conditions?: Conditions; allocatable?: { cpu?: string; memory?: string; pods?: string } };
}
interface PodDisruptionBudget {
  metadata: Metadata;
  spec: { selector?: { matchLabels?: Record<string, string> }; minAvailable?: number | string; maxUnavailable?: number | string };
  status?: { disruptionsAllowed?: number; expectedPods?: number };
}
interface List<T> {
  items: T[];
}

const objectPath = (ref: KubernetesRuntime) => `/apis/apps/v1/namespaces/${ref.namespace}/${ref.kind === 'Deployment' ? 'deployments' : 'statefulsets'}/${ref.name}`;
const labelSelector = (labels: Record<string, string>) => encodeURIComponent(Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(','));
const isReady = (conditions: Conditions | undefined) => conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

function loadOf(annotations: Record<string, string>): number | null {
  const value = annotations[ANNOTATIONS.inFlight];
  if (value === undefined) return null;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

export function kubernetesRuntime(clientFor: (cluster: string) => KubernetesClient) {
  const client = (ref: KubernetesRuntime) => clientFor(ref.cluster);

  async function readObject(ref: KubernetesRuntime): Promise<ObjectFacts> {
    const object = await client(ref).request<ScaledObject>(`GET`, objectPath(ref));
    const containers = object.spec.template.spec.containers ?? [];
    return {
      replicas: object.spec.replicas ?? 1,
      readyReplicas: object.status?.readyReplicas ?? 0,
      resourceVersion: object.metadata.resourceVersion,
      podSelector: object.spec.selector?.matchLabels ?? {},
      nodeSelector: object.spec.template.spec.nodeSelector ?? {},
      requests: {
        cpuMilli: containers.reduce((sum, c) => sum + cpuMilli(c.resources?.requests?.cpu), 0),
        memoryBytes: containers.reduce((sum, c) => sum + parseQuantity(c.resources?.requests?.memory), 0),
      },
      observed: (object.status?.observedGeneration ?? 0) >= (object.metadata.generation ?? 0),
    };
  }

  async function readPods(ref: KubernetesRuntime, selector?: Record<string, string>): Promise<PodFacts[]> {
    const labels = selector ?? (await readObject(ref)).podSelector;
    const list = await client(ref).request<List<Pod>>('GET', `/api/v1/namespaces/${ref.namespace}/pods?labelSelector=${labelSelector(labels)}`);
    return list.items.map((pod) => {
      const annotations = pod.metadata.annotations ?? {};
      const ordinal = ref.kind === 'StatefulSet' ? Number(/-([0-9]+)$/.exec(pod.metadata.name)?.[1]) : undefined;
      return {
        name: pod.metadata.name, uid: pod.metadata.uid, node: pod.spec.nodeName ?? null,
        ready: isReady(pod.status?.conditions) && !pod.metadata.deletionTimestamp,
        restarts: (pod.status?.containerStatuses ?? []).reduce((sum, c) => sum + (c.restartCount ?? 0), 0),
        load: loadOf(annotations),
        drainRequested: annotations[ANNOTATIONS.drainRequested] ?? null,
        drained: annotations[ANNOTATIONS.drained] !== undefined,
        terminating: !!pod.metadata.deletionTimestamp,
        ...(ordinal !== undefined && Number.isFinite(ordinal) ? { ordinal } : {}),
      };
    }).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Every node, with what the pods bound to it (not finished) request. */
  async function readNodes(ref: KubernetesRuntime): Promise<NodeFacts[]> {
    const [nodes, pods] = await Promise.all([
      client(ref).request<List<Node>>('GET', '/api/v1/nodes'),
      client(ref).request<List<Pod>>('GET', `/api/v1/pods?fieldSelector=${encodeURIComponent('status.phase!=Succeeded,status.phase!=Failed')}`),
    ]);
    const requested: Record<string, NodeFacts['requested']> = {};
    for (const pod of pods.items) {
      const node = pod.spec.nodeName;
      if (!node) continue;
      const sum = (requested[node] ??= { cpuMilli: 0, memoryBytes: 0, pods: 0 });
      sum.pods += 1;
      for (const c of pod.spec.containers ?? []) {
        sum.cpuMilli += cpuMilli(c.resources?.requests?.cpu);
        sum.memoryBytes += parseQuantity(c.resources?.requests?.memory);
      }
    }
    return nodes.items.map((node) => ({
      name: node.metadata.name,
      ready: isReady(node.status?.conditions),
      unschedulable: node.spec?.unschedulable === true,
      labels: node.metadata.labels ?? {},
      allocatable: {
        cpuMilli: cpuMilli(node.status?.allocatable?.cpu), memoryBytes: parseQuantity(node.status?.allocatable?.memory), pods: parseQuantity(node.status?.allocatable?.pods),
      },
      requested: requested[node.metadata.name] ?? { cpuMilli: 0, memoryBytes: 0, pods: 0 },
      ...(isReady(node.status?.conditions) ? {} : { notReadySince: node.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime ?? null }),
    }));
  }

  /** The PodDisruptionBudgets of the namespace whose selector matches the object's pods. */
  async function readBudgets(ref: KubernetesRuntime, podLabels: Record<string, string>): Promise<DisruptionBudgetFacts[]> {
    const list = await client(ref).request<List<PodDisruptionBudget>>('GET', `/apis/policy/v1/namespaces/${ref.namespace}/poddisruptionbudgets`);
    return list.items
      .filter((pdb) => Object.entries(pdb.spec.selector?.matchLabels ?? {}).every(([k, v]) => podLabels[k] === v))
      .map((pdb) => ({
        name: pdb.metadata.name,
        ...(pdb.spec.minAvailable !== undefined ? { minAvailable: pdb.spec.minAvailable } : {}),
        ...(pdb.spec.maxUnavailable !== undefined ? { maxUnavailable: pdb.spec.maxUnavailable } : {}),
        disruptionsAllowed: pdb.status?.disruptionsAllowed ?? 0,
        expectedPods: pdb.status?.expectedPods ?? 0,
      }));
  }

  /**
   * Writes the `scale` subresource, carrying the resourceVersion the decision was made on: a write
   * that finds the object moved is refused by the API server (409), never applied to a size nobody decided on.
   */
  async function writeScale(ref: KubernetesRuntime, replicas: number, resourceVersion: string): Promise<{ resourceVersion: string }> {
    try {
      const scale = await client(ref).request<{ metadata: { resourceVersion: string } }>('PUT', `${objectPath(ref)}/scale`, {
        apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: { name: ref.name, namespace: ref.namespace, resourceVersion }, spec: { replicas },
      });
      return { resourceVersion: scale.metadata.resourceVersion };
    } catch (error) {
      if (error instanceof KubernetesApiError && error.status === 409) throw new ScaleConflictError(ref, error.message);
      throw error;
    }
  }

  /** Sets (a string) or removes (null) annotations of the named pods; a pod already gone is skipped. */
  async function annotatePods(ref: KubernetesRuntime, pods: string[], annotations: Record<string, string | null>): Promise<string[]> {
    const done: string[] = [];
    await Promise.all(pods.map(async (pod) => {
      try {
        await client(ref).request('PATCH', `/api/v1/namespaces/${ref.namespace}/pods/${pod}`, { metadata: { annotations } }, 'application/merge-patch+json');
        done.push(pod);
      } catch (error) {
        if (!(error instanceof KubernetesApiError && error.status === 404)) throw error;
      }
    }));
    return done.sort();
  }

  /**
   * What one pod serves at the object's metrics endpoint (its text, at most 1 MiB), through the API
   * server's pod proxy: the control plane needs no route to the pods' network, only `get` on pods/proxy.
   */
  async function readPodMetricsText(ref: KubernetesRuntime, pod: string): Promise<string> {
    if (!ref.metrics) throw new Error(`${ref.kind} ${ref.namespace}/${ref.name} names no metrics endpoint (runtime.kubernetes.metrics)`);
    return client(ref).getText(`/api/v1/namespaces/${ref.namespace}/pods/${pod}:${ref.metrics.port}/proxy${ref.metrics.path}`);
  }

  /** Whether the control plane can reach `ref.cluster` at all (its kubeconfig context or service account): throws why not. */
  function reach(ref: KubernetesRuntime): void {
    client(ref);
  }

  return { reach, readObject, readPods, readNodes, readBudgets, writeScale, annotatePods, readPodMetricsText };
}
export type KubernetesRuntimePort = ReturnType<typeof kubernetesRuntime>;
