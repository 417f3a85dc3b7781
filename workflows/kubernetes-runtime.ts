// What the scale operations know of a Kubernetes workload (issue 37): the patch that routes them
// through the runtime port, the status they show, and how they name the object. Apart from
// kubernetes-scale.ts so that scale-operation.ts can read it without an import cycle.
import type { Activities } from '../activities';
import type { MetricsReading } from '../domain/pod-metrics';
import type { KubernetesRuntime, Workload } from '../protocol';

export type KubernetesRead = Awaited<ReturnType<Activities['kubernetesObject']>>;

/** The Kubernetes object a workload scales (null: it runs on scalegate's agents). protocol/workload.ts's twin, kept out of the workflow bundle. */
export const kubernetesRefOf = (workload: Workload): KubernetesRuntime | null => (workload.kind === 'service' ? workload.runtime?.kubernetes ?? null : null);

/** What the status shows of a Kubernetes operation: the object, the drain handshake and what the cluster deleted. */
export interface KubernetesStatus {
  object: string;
  resourceVersion: string;
  /** scale writes refused because the object had moved, each read again and decided again */
  conflicts: number;
  victims: string[];
  reasons: Record<string, string>;
  marked: string[];
  acknowledged: string[];
  /** victims that did not acknowledge by the deadline */
  missing: string[];
  /** what was still awaited at the deadline (the annotations, the consumer group's state) */
  awaited?: string | null;
  /** lowered anyway, by the request's `force` */
  forced: string[];
  unmarked: string[];
  /** the pods gone after the change (a scale-in's must be exactly its victims) */
  deleted: string[];
  /** the contract's metrics read from the pods before a scale-out's write and after its soak (absent: it names none) */
  metrics?: { baseline: MetricsReading; after: MetricsReading | null };
}

export { describeObject } from '../protocol/bounds';
