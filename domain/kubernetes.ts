// The Kubernetes runtime's rules (DESIGN.md §5 "Kubernetes workloads", issue 37), pure: the gates
// that read the cluster (capacity on the Ready nodes matching the object's node selector, the
// PodDisruptionBudgets), the choice of a scale-in's victims, and the resource quantities they
// compare. The runtime port (runtimes/kubernetes.ts) reads the cluster; these decide.
import type { ComparisonRow, EvidenceComparison, EvidenceSnapshot } from './evidence';
import { GATE, type GateRow } from './gates';

/** What one pod of the object asks for: CPU in millicores, memory in bytes (its containers' requests summed). */
export interface PodRequests {
  cpuMilli: number;
  memoryBytes: number;
}

export interface NodeFacts {
  name: string;
  ready: boolean;
  /** cordoned (spec.unschedulable) */
  unschedulable: boolean;
  labels: Record<string, string>;
  allocatable: { cpuMilli: number; memoryBytes: number; pods: number };
  /** what the pods bound to it (not finished) request */
  requested: { cpuMilli: number; memoryBytes: number; pods: number };
  /** when a node not Ready stopped being Ready (its Ready condition's last transition; null: it never reported one) */
  notReadySince?: string | null;
}

export interface DisruptionBudgetFacts {
  name: string;
  /** as written: an integer or a percentage ("50%") */
  minAvailable?: number | string;
  maxUnavailable?: number | string;
  /** the controller's own count: how many of its pods may be disrupted now */
  disruptionsAllowed: number;
  /** the pods it covers (status.expectedPods) */
  expectedPods: number;
}

const UNITS: Record<string, number> = {
  '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** A Kubernetes resource quantity ("500m", "2", "128Mi", "1e3") as a number of base units. */
export function parseQuantity(quantity: string | number | undefined): number {
  if (quantity === undefined) return 0;
  if (typeof quantity === 'number') return quantity;
  const match = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(quantity.trim());
  if (!match || !(match[2] in UNITS)) throw new Error(`not a Kubernetes quantity: "${quantity}"`);
  return Number(match[1]) * UNITS[match[2]];
}

export const cpuMilli = (quantity: string | number | undefined): number => Math.round(parseQuantity(quantity) * 1000);

/** "500m CPU, 128Mi" for a message. */
export function formatRequests(requests: PodRequests): string {
  const memory = requests.memoryBytes >= 2 ** 30 && requests.memoryBytes % 2 ** 30 === 0 ? `${requests.memoryBytes / 2 ** 30}Gi` : `${Math.round(requests.memoryBytes / 2 ** 20)}Mi`;
  return `${requests.cpuMilli}m CPU, ${memory} memory`;
}

const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([key, value]) => labels[key] === value);

/** How many more pods of `requests` fit on one node (CPU, memory and its pod count each bound it). */
function roomOn(node: NodeFacts, requests: PodRequests): number {
  const free = {
    cpu: node.allocatable.cpuMilli - node.requested.cpuMilli,
    memory: node.allocatable.memoryBytes - node.requested.memoryBytes,
    pods: node.allocatable.pods - node.requested.pods,
  };
  const bounds = [free.pods];
  if (requests.cpuMilli > 0) bounds.push(Math.floor(free.cpu / requests.cpuMilli));
  if (requests.memoryBytes > 0) bounds.push(Math.floor(free.memory / requests.memoryBytes));
  return Math.max(0, Math.min(...bounds));
}

/**
 * The capacity gate of a scale-out of a Kubernetes object: the new pods must fit on fresh Ready,
 * schedulable nodes that match its node selector. A NotReady node is evidence, never room (the
 * cluster moves its pods, not scalegate): it is named and not counted. A refusal names what is
 * missing: pods without room, and the CPU, memory or pod slots short.
 */
export function kubernetesCapacityGate(input: {
  nodes: NodeFacts[];
  nodeSelector: Record<string, string>;
  requests: PodRequests;
  /** the pods the object has now, and the count it goes to */
  current: number;
  target: number;
}): GateRow {
  const adds = Math.max(0, input.target - input.current);
  const selected = input.nodes.filter((node) => matches(input.nodeSelector, node.labels));
  const eligible = selected.filter((node) => node.ready && !node.unschedulable);
  const left = selected.filter((node) => !eligible.includes(node)).map((node) => `${node.name} (${node.ready ? 'cordoned' : 'NotReady'})`);
  const room = eligible.reduce((sum, node) => sum + roomOn(node, input.requests), 0);
  const where = `${eligible.length} Ready node(s)${Object.keys(input.nodeSelector).length ? ` matching ${JSON.stringify(input.nodeSelector)}` : ''}`;
  const notCounted = left.length ? `; not counted: ${left.join(', ')}` : '';
  const detail = `${adds} new pod(s) of ${formatRequests(input.requests)}: room for ${room} on ${where}${notCounted}`;
  if (room >= adds) return { gate: GATE.capacity, passed: true, detail };
  const short = adds - room;
  const free = eligible.reduce((sum, node) => ({
    cpu: sum.cpu + Math.max(0, node.allocatable.cpuMilli - node.requested.cpuMilli),
    memory: sum.memory + Math.max(0, node.allocatable.memoryBytes - node.requested.memoryBytes),
    pods: sum.pods + Math.max(0, node.allocatable.pods - node.requested.pods),
  }), { cpu: 0, memory: 0, pods: 0 });
  const missing = [
    input.requests.cpuMilli * adds > free.cpu ? `${input.requests.cpuMilli * adds - free.cpu}m CPU` : null,
    input.requests.memoryBytes * adds > free.memory ? `${Math.ceil((input.requests.memoryBytes * adds - free.memory) / 2 ** 20)}Mi memory` : null,
    adds > free.pods ? `${adds - free.pods} pod slot(s)` : null,
  ].filter((part): part is string => part !== null);
  return {
    gate: GATE.capacity, passed: false,
    detail: `${detail}: ${short} pod(s) without room; missing ${missing.length ? missing.join(', ') : `room for ${short} whole pod(s) on one node`}`,
    missingEvidence: `allocatable room for ${short} more pod(s) of ${formatRequests(input.requests)} on Ready nodes matching the object's node selector`,
  };
}

/** An integer or a percentage of `total` (minAvailable rounds up, maxUnavailable down, as the disruption controller does). */
function resolveBudget(value: number | string, total: number, round: 'up' | 'down'): number {
  if (typeof value === 'number') return value;
  const percent = /^([0-9]+)%$/.exec(value);
  if (!percent) return Number(value);
  const exact = (Number(percent[1]) * total) / 100;
  return round === 'up' ? Math.ceil(exact) : Math.floor(exact);
}

/**
 * The PodDisruptionBudget gate of a scale-in: lowering the replicas deletes `victims` pods, which
 * the API server's eviction path would have checked against the budgets (the ReplicaSet controller
 * does not). Refused, naming the budget, when the pods left would be fewer than its minAvailable,
 * or when more pods go than its maxUnavailable allows now.
 */
export function disruptionBudgetGate(input: { budgets: DisruptionBudgetFacts[]; current: number; target: number }): GateRow {
  const victims = Math.max(0, input.current - input.target);
  const broken: string[] = [];
  for (const budget of input.budgets) {
    const covered = Math.max(budget.expectedPods, input.current);
    if (budget.minAvailable !== undefined) {
      const min = resolveBudget(budget.minAvailable, covered, 'up');
      if (input.target < min) broken.push(`PodDisruptionBudget ${budget.name} (minAvailable ${budget.minAvailable}: at least ${min} pod(s), ${input.target} would be left)`);
    }
    if (budget.maxUnavailable !== undefined) {
      const max = resolveBudget(budget.maxUnavailable, covered, 'down');
      const allowed = Math.min(max, budget.disruptionsAllowed);
      if (victims > allowed) broken.push(`PodDisruptionBudget ${budget.name} (maxUnavailable ${budget.maxUnavailable}: ${allowed} disruption(s) allowed now, ${victims} pod(s) would go)`);
    }
  }
  const names = input.budgets.map((b) => b.name).join(', ');
  if (broken.length === 0) {
    return { gate: GATE.disruptionBudget, passed: true, detail: input.budgets.length ? `${victims} pod(s) go; ${names} hold(s)` : 'no PodDisruptionBudget covers the pods' };
  }
  return {
    gate: GATE.disruptionBudget, passed: false,
    detail: `scale-in ${input.current} → ${input.target} would break ${broken.join('; ')}`,
    missingEvidence: 'a target the budget allows, or a budget changed by its owner',
  };
}

export interface PodFacts {
  name: string;
  /** work in flight the pod reports (its load annotation); null: it reports none */
  load: number | null;
  ready: boolean;
  /** a StatefulSet pod's ordinal */
  ordinal?: number;
}

export interface VictimChoice {
  victims: string[];
  reasons: Record<string, string>;
}

/**
 * The pods a scale-in removes (DESIGN.md §4.2): idle first (reporting no work in flight), then the
 * least loaded, never by age; among equals, by name, so the choice is reproducible. A pod that is
 * not Ready goes before all of them (it serves nothing). A StatefulSet removes its highest ordinals
 * whatever is chosen (its controller's rule, which a deletion cost cannot change): those are the victims.
 */
export function chooseKubernetesVictims(input: { pods: PodFacts[]; remove: number; kind: 'Deployment' | 'StatefulSet' }): VictimChoice {
  const remove = Math.max(0, Math.min(input.remove, input.pods.length));
  if (input.kind === 'StatefulSet') {
    const byOrdinal = [...input.pods].sort((a, b) => (b.ordinal ?? 0) - (a.ordinal ?? 0)).slice(0, remove);
    return { victims: byOrdinal.map((p) => p.name), reasons: Object.fromEntries(byOrdinal.map((p) => [p.name, `ordinal ${p.ordinal}: a StatefulSet removes its highest ordinals`])) };
  }
  const rank = (pod: PodFacts) => (!pod.ready ? 0 : pod.load === 0 ? 1 : 2);
  const load = (pod: PodFacts) => pod.load ?? Number.POSITIVE_INFINITY;
  const chosen = [...input.pods]
    .sort((a, b) => rank(a) - rank(b) || load(a) - load(b) || a.name.localeCompare(b.name))
    .slice(0, remove);
  const reason = (pod: PodFacts) => (!pod.ready ? 'not Ready' : pod.load === 0 ? 'idle: nothing in flight' : pod.load === null ? 'reports no load (chosen last)' : `least loaded: ${pod.load} in flight`);
  return { victims: chosen.map((p) => p.name), reasons: Object.fromEntries(chosen.map((p) => [p.name, reason(p)])) };
}

/** A pod as evidence: its name is the task id, its node the runtime, its uid the incarnation. */
export interface PodEvidence {
  name: string;
  node: string | null;
  uid: string;
  ready: boolean;
  restarts: number;
  load: number | null;
}

/** The object's pods as an evidence snapshot (readiness and restarts are what a pod of its own tells). */
export function podSnapshot(pods: PodEvidence[], atMs: number): EvidenceSnapshot {
  return {
    atMs, processed: 0, ratePerSec: 0, latencyP50Ms: null, latencyP95Ms: null, backlog: 0, errors: 0,
    ready: pods.filter((p) => p.ready).length,
    tasks: pods.map((p) => ({
      taskId: p.name, runtimeId: p.node ?? '(unscheduled)', incarnation: p.uid, state: p.ready ? 'ready' : 'not-ready',
      processed: 0, errors: 0, backlog: 0, ownedPartitions: 0, inFlight: p.load ?? 0, ratePerSec: 0, restarts: p.restarts,
    })),
  };
}

/**
 * The comparison after a change of a Kubernetes object's size: every pod it should have is Ready,
 * no pod that was there before restarted since (a restart count that grew), for a workload that
 * declares its Kafka consumer group, the group after the change (`group`: one member per pod,
 * every partition owned; null where none is declared), and the metrics its contract names
 * (`metricRows`, domain/pod-metrics.ts; null where it names none: then the app's throughput,
 * latency and errors are not judged).
 */
export function compareKubernetesPods(
  baseline: EvidenceSnapshot, after: EvidenceSnapshot, expected: number, group: { converged: boolean; detail: string } | null = null,
  metricRows: ComparisonRow[] | null = null,
): EvidenceComparison {
  const restartsBefore = Object.fromEntries(baseline.tasks.map((t) => [t.taskId, t.restarts ?? 0]));
  const restarted = after.tasks.filter((t) => t.taskId in restartsBefore && (t.restarts ?? 0) > restartsBefore[t.taskId]);
  const sum = (snapshot: EvidenceSnapshot) => snapshot.tasks.reduce((total, t) => total + (t.restarts ?? 0), 0);
  const rows: ComparisonRow[] = [
    {
      check: 'pods ready', verdict: after.ready >= expected ? 'pass' : 'regression', baseline: baseline.ready, after: after.ready,
      detail: `${after.ready} of ${expected} pod(s) Ready`,
    },
    {
      check: 'restarts', verdict: restarted.length ? 'regression' : 'pass', baseline: sum(baseline), after: sum(after),
      detail: restarted.length ? `restarted since the baseline: ${restarted.map((t) => `${t.taskId} (${restartsBefore[t.taskId]} → ${t.restarts})`).join(', ')}` : 'no pod restarted since the baseline',
    },
    ...(group ? [{ check: 'consumer group', verdict: group.converged ? 'pass' as const : 'regression' as const, baseline: null, after: null, detail: group.detail }] : []),
    ...(metricRows ?? [{ check: 'throughput, latency, errors', verdict: 'not judged' as const, baseline: null, after: null, detail: 'its contract names no metrics (contract.metrics) to read from its pods' }]),
  ];
  const failed = rows.filter((row) => row.verdict === 'regression');
  return {
    verdict: failed.length ? 'regression' : 'pass', reasons: failed.map((row) => `${row.check}: ${row.detail}`), rows,
    deltas: { processed: 0, errors: 0, backlog: 0, latencyP95Ms: null, ratePerSec: 0 }, conservation: null,
  };
}

/**
 * Which victims acknowledged their drain: each that set its annotation, or, for a workload that
 * declares its Kafka consumer group, every victim once the group shows the drain done (the victims
 * left it and the survivors own every partition: `group`, from domain/consumer-group.ts's
 * groupConvergence over the survivors). `why` says what is still awaited.
 */
export function drainAcknowledgements(
  victims: readonly string[], pods: readonly { name: string; drained: boolean }[], group: { converged: boolean; detail: string } | null,
): { acknowledged: string[]; missing: string[]; why: string | null } {
  const annotated = new Set(pods.filter((p) => p.drained).map((p) => p.name));
  const acknowledged = victims.filter((name) => annotated.has(name) || group?.converged === true);
  const missing = victims.filter((name) => !acknowledged.includes(name));
  const why = missing.length ? `no scalegate.dev/drained on ${missing.join(', ')}${group ? `; ${group.detail}` : ''}` : null;
  return { acknowledged, missing, why };
}
