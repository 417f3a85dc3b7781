// The evidence gates before a replica increase (DESIGN.md §4.1, reference/placement-and-scaling.txt
// "Safe replica checklist"). Pure: the scaleOut workflow gathers the evidence (baseline, probes,
// eligible runtimes) through activities and hands it here.
//
// Every row is always evaluated, even after one has failed, so one evidence-gap report names the
// whole gap at once. An unknown is never turned into a safe-scale recommendation: a row whose
// evidence is missing fails and says which evidence would close it.
import { assertNever } from './assert';
import type { Contract, Workload } from '../protocol';

export const GATE = {
  baseline: 'baseline',
  inputOwnership: 'input-ownership',
  state: 'state',
  ordering: 'ordering',
  delivery: 'delivery',
  recovery: 'recovery',
  capacity: 'capacity',
  connectivity: 'connectivity',
  downstream: 'downstream',
  /** a Kubernetes workload's scale-in: its PodDisruptionBudgets (domain/kubernetes.ts) */
  disruptionBudget: 'disruption-budget',
} as const;
export type GateName = (typeof GATE)[keyof typeof GATE];

/** Rows appear in this order: the order of the evidence-gate flowchart in the reference. */
export const GATE_ORDER: readonly GateName[] = [
  GATE.baseline,
  GATE.inputOwnership,
  GATE.state,
  GATE.ordering,
  GATE.delivery,
  GATE.recovery,
  GATE.capacity,
  GATE.connectivity,
  GATE.downstream,
];

export interface GateRow {
  gate: GateName;
  passed: boolean;
  detail: string;
  /** set on every failed row: the evidence that would close the gap */
  missingEvidence?: string;
}

export interface GateReport {
  passed: boolean;
  rows: GateRow[];
}

export interface ProbeOutcome {
  ok: boolean;
  detail?: string;
}

export interface RuntimeProbe {
  runtimeId: string;
  /** can the runtime reach the workload's sources (broker, table, credentials …) */
  source: ProbeOutcome;
  /** can the runtime reach the workload's destinations (sink, downstream service …) */
  destination: ProbeOutcome;
  /** each endpoint of the workload's `requires`, as this runtime reached it (absent: none declared) */
  requirements?: (ProbeOutcome & { endpoint: string })[];
}

export interface EligibleRuntime {
  id: string;
  freeSlots: number;
  alreadyHostsWorkload: boolean;
}

/**
 * The room the capacity gate judges, counted over the eligible runtimes (fresh READY, matching the
 * selector) where the fleet is read: a scale records two numbers, not a row per runtime (at 1,000
 * runtimes those rows were about 65 KB of every scale-out's history; past ~30,000 they would not
 * fit in a Temporal payload).
 */
export interface FleetCapacity {
  /** eligible runtimes with a free slot that do not host the workload yet: a service's or consumer's room (one task per runtime) */
  runtimesWithRoom: number;
  /** free slots on the eligible runtimes: a stream job's room (its subtasks pack into slots) */
  freeSlots: number;
}

/**
 * Each eligible runtime's room for a workload: its slots less the replicas placed on it, other
 * workloads' (`usedByOthers`, per runtime) and the workload's own (`own`), and whether it hosts the
 * workload already.
 */
export function roomOf(
  eligible: readonly { id: string; slots: number }[],
  usedByOthers: Readonly<Record<string, number>>,
  own: readonly { runtimeId: string }[],
): EligibleRuntime[] {
  const ownOn = new Map<string, number>();
  for (const assignment of own) ownOn.set(assignment.runtimeId, (ownOn.get(assignment.runtimeId) ?? 0) + 1);
  return eligible.map((runtime) => {
    const hosted = ownOn.get(runtime.id) ?? 0;
    return { id: runtime.id, freeSlots: Math.max(0, runtime.slots - (usedByOthers[runtime.id] ?? 0) - hosted), alreadyHostsWorkload: hosted > 0 };
  });
}

export function capacityOf(eligible: readonly EligibleRuntime[]): FleetCapacity {
  let runtimesWithRoom = 0;
  let freeSlots = 0;
  for (const runtime of eligible) {
    if (runtime.freeSlots <= 0) continue;
    freeSlots += runtime.freeSlots;
    if (!runtime.alreadyHostsWorkload) runtimesWithRoom += 1;
  }
  return { runtimesWithRoom, freeSlots };
}

/**
 * What the gatherGateFacts activity answers: the probes of the recipients, the broker's partitions,
 * and the capacity counted when asked (`capacity: 'count'`); nothing of the fleet when the workflow
 * has its plan's count (`'known'`); or, from workers before the count and in the histories they
 * recorded, a row per eligible runtime.
 */
export interface GateFacts {
  probes: RuntimeProbe[];
  broker?: BrokerPartitions;
  capacity?: FleetCapacity;
  eligible?: EligibleRuntime[];
}

/**
 * The room the capacity gate judges: `known`, the count of the plan the gates judge (a plan made by
 * a worker since `preparePlan` counted it), else the facts' count, else their rows counted.
 */
export function capacityFrom(facts: GateFacts, known?: FleetCapacity): FleetCapacity {
  const capacity = known ?? facts.capacity ?? (facts.eligible && capacityOf(facts.eligible));
  if (!capacity) throw new Error('gate facts without the fleet\'s room, and no plan that counted it');
  return capacity;
}

/** Pick over each member of a union, so `kind` still narrows `spec` in the result. */
type DistributivePick<T, K extends keyof T> = T extends unknown ? Pick<T, K> : never;
export type GateWorkload = DistributivePick<Workload, 'name' | 'kind' | 'contract' | 'spec'>;

export interface ScaleOutGateInput {
  workload: GateWorkload;
  currentReplicas: number;
  targetReplicas: number;
  /** the room on fresh READY runtimes matching the selector */
  capacity: FleetCapacity;
  probes: RuntimeProbe[];
  /** the healthy-baseline capture; when absent this evaluation does not judge it */
  baseline?: ProbeOutcome;
  /**
   * The baseline's tasks as their agents reported them: a task not ready (restarting, starting,
   * failed, absent) or crash-looping refuses the baseline, named (DESIGN.md §3 "Supervision").
   * Absent: not judged (runs recorded before patch baseline-tasks-ready).
   */
  baselineTasks?: readonly BaselineTask[];
  /** total input rate expected at the target size, compared with contract.downstream.maxRatePerSec (absent: unknown) */
  expectedRatePerSec?: number;
  /** the unknowns the request accepts instead of being refused for them (ScaleRequest `accept`) */
  accepted?: readonly string[];
  /**
   * Runs recorded before the downstream row refused unknowns (workflows/scale-out.ts, patch
   * `unknown-downstream-refused`) are judged as they were then: an unknown downstream passed.
   */
  unknownDownstreamPasses?: boolean;
  /** the runtimes the plan would start new replicas on: each must pass its probes */
  recipientRuntimeIds: string[];
  /** the broker's own partition count of a Kafka source (or why it could not be read): it, not a declaration, bounds the replicas */
  broker?: BrokerPartitions;
}

export type BrokerPartitions = { topic: string; partitions: number } | { topic: string; error: string };

/** Replicas a scale-out from `current` to `target` adds (0 when it is not an increase). */
export function smallestIncrease(current: number, target: number): number {
  return Math.max(0, target - current);
}

export function evaluateScaleOutGates(input: ScaleOutGateInput): GateReport {
  const rowsByGate: Partial<Record<GateName, GateRow>> = {
    [GATE.baseline]: baselineGate(input),
    [GATE.inputOwnership]: inputOwnershipGate(input),
    [GATE.state]: stateGate(input),
    [GATE.ordering]: orderingGate(input),
    [GATE.delivery]: deliveryGate(input.workload.contract),
    [GATE.recovery]: recoveryGate(input.workload.contract),
    [GATE.capacity]: capacityGate(input),
    [GATE.connectivity]: connectivityGate(input),
    [GATE.downstream]: downstreamGate(input),
  };
  const rows = GATE_ORDER.flatMap((gate) => rowsByGate[gate] ?? []);
  return { passed: rows.every((row) => row.passed), rows };
}

/** One line per failed row, naming the gate, why it failed and the missing evidence; '' if none. */
export function formatEvidenceGap(report: GateReport): string {
  return report.rows
    .filter((row) => !row.passed)
    .map((row) => `${row.gate}: ${row.detail} — missing evidence: ${row.missingEvidence ?? 'unspecified'}`)
    .join('\n');
}

const pass = (gate: GateName, detail: string): GateRow => ({ gate, passed: true, detail });
const fail = (gate: GateName, detail: string, missingEvidence: string): GateRow => ({
  gate,
  passed: false,
  detail,
  missingEvidence,
});

/** One task of the baseline, as captureEvidence read it from its agent (`absent`: no answer). */
export interface BaselineTask {
  taskId: string;
  runtimeId: string;
  state: string;
  crashLooping?: boolean;
  restarts?: number;
}

/** Why each baseline task cannot be scaled from: crash-looping, or not ready. Empty when every one is ready. */
export function unreadyBaselineTasks(tasks: readonly BaselineTask[]): string[] {
  return tasks.flatMap((t) => {
    const restarted = t.restarts ? ` (restarted ${t.restarts} time(s))` : '';
    if (t.crashLooping) return [`task ${t.taskId} on ${t.runtimeId} is crash-looping${restarted}, ${t.state}`];
    if (t.state !== 'ready') return [`task ${t.taskId} on ${t.runtimeId} is ${t.state}, not ready${restarted}`];
    return [];
  });
}

function baselineGate({ baseline, baselineTasks }: ScaleOutGateInput): GateRow {
  const unready = unreadyBaselineTasks(baselineTasks ?? []);
  if (unready.length) {
    // what the evidence says of the same tasks (e.g. not measured: its agent did not answer) goes with it
    const evidence = baseline && !baseline.ok ? `; ${baseline.detail}` : '';
    return fail(
      GATE.baseline,
      `baseline is not healthy: ${unready.join('; ')}${evidence}`,
      'every task of the workload ready and none crash-looping, for a baseline to compare against after the change',
    );
  }
  if (baseline === undefined) return pass(GATE.baseline, 'no baseline supplied to this evaluation');
  if (baseline.ok) return pass(GATE.baseline, withDetail('healthy baseline captured', baseline.detail));
  return fail(
    GATE.baseline,
    withDetail('baseline is not healthy', baseline.detail),
    'a healthy baseline (throughput, latency, backlog, errors) to compare against after the change',
  );
}

function inputOwnershipGate({ workload, targetReplicas, broker }: ScaleOutGateInput): GateRow {
  const { contract } = workload;
  if (broker && 'error' in broker) {
    return fail(GATE.inputOwnership, `broker-unavailable: the partition count of kafka topic ${broker.topic} could not be read: ${broker.error}`, 'the broker\'s partition count of the topic');
  }
  switch (contract.ownership) {
    case 'unknown':
      return fail(
        GATE.inputOwnership,
        'input ownership unknown: need the broker/connector contract for partition or record assignment',
        'broker/connector contract for partition or record assignment',
      );
    case 'partitioned': {
      const partitions = contract.partitions;
      if (partitions === undefined) {
        return fail(
          GATE.inputOwnership,
          'ownership is partitioned but the partition count is not declared',
          'contract.partitions (the source partition count)',
        );
      }
      // A consumer's spec names the partitions it really reads; a contract that disagrees is not proof.
      if (workload.kind === 'consumer' && workload.spec.partitions !== partitions) {
        return fail(
          GATE.inputOwnership,
          `contract declares ${partitions} partitions but the consumer spec reads ${workload.spec.partitions}`,
          'one agreed partition count for the source',
        );
      }
      if (broker && broker.partitions !== partitions) {
        return fail(
          GATE.inputOwnership,
          `kafka topic ${broker.topic} has ${broker.partitions} partitions on the broker; the contract declares ${partitions}`,
          'a declared partition count that is the broker\'s',
        );
      }
      if (targetReplicas > partitions) {
        if (broker) {
          return fail(
            GATE.inputOwnership,
            `target ${targetReplicas} above the ${partitions} partitions kafka topic ${broker.topic} has on the broker would leave replicas idle`,
            `more partitions of topic ${broker.topic} (at least ${targetReplicas}) or a target ≤ ${partitions}`,
          );
        }
        return fail(
          GATE.inputOwnership,
          `target ${targetReplicas} above ${partitions} partitions would leave replicas idle or competing`,
          `more source partitions (at least ${targetReplicas}) or a target ≤ ${partitions}`,
        );
      }
      return pass(GATE.inputOwnership, `target ${targetReplicas} ≤ ${partitions} partitions: each replica owns its own partitions`);
    }
    case 'shared-queue':
      return pass(GATE.inputOwnership, 'shared queue: the broker hands each record to one consumer');
    case 'none':
      // Without input ownership, replicas are only safe when there is no input to compete for:
      // a stateless request-serving service. Consumers and streams always read an input.
      if (workload.kind === 'service' && contract.state === 'none') {
        return pass(GATE.inputOwnership, 'stateless service: no input to own');
      }
      return fail(
        GATE.inputOwnership,
        `ownership "none" is only safe for a stateless service (this is a ${workload.kind} with state "${contract.state}")`,
        'broker/connector contract for partition or record assignment',
      );
    default:
      return assertNever(contract.ownership, 'contract.ownership');
  }
}

function stateGate({ workload, currentReplicas, targetReplicas }: ScaleOutGateInput): GateRow {
  const { state } = workload.contract;
  switch (state) {
    case 'unknown':
      return fail(GATE.state, 'state unknown', 'local/shared/reconstructable state and its checkpoint location');
    case 'local':
      if (targetReplicas > currentReplicas) {
        return fail(
          GATE.state,
          'local state cannot be split across replicas',
          'state moved to shared/durable storage or checkpoints, and proof every runtime can reach it',
        );
      }
      return pass(GATE.state, 'local state, but no replica is added');
    case 'none':
      return pass(GATE.state, 'stateless');
    case 'shared':
      return pass(GATE.state, 'state lives in a shared store every replica reaches');
    case 'checkpointed':
      return pass(GATE.state, 'state is checkpointed and can be redistributed');
    default:
      return assertNever(state, 'contract.state');
  }
}

function orderingGate({ workload, targetReplicas }: ScaleOutGateInput): GateRow {
  const { ordering, ownership } = workload.contract;
  switch (ordering) {
    case 'unknown':
      return fail(GATE.ordering, 'ordering scope unknown', 'required ordering scope and how concurrency preserves it');
    case 'none':
      return pass(GATE.ordering, 'no ordering required');
    case 'global':
      if (targetReplicas > 1) {
        return fail(
          GATE.ordering,
          `global ordering allows a single replica; target is ${targetReplicas}`,
          'a narrower ordering scope (per key or per partition) that concurrency can preserve',
        );
      }
      return pass(GATE.ordering, 'global ordering kept by a single replica');
    case 'per-partition':
    case 'per-key':
      // Order within a partition (and per key, since keys hash to partitions) survives concurrency
      // only when each partition has exactly one owner.
      if (ownership !== 'partitioned') {
        return fail(
          GATE.ordering,
          `${ordering} ordering needs partitioned ownership, but ownership is "${ownership}"`,
          'a partitioned input contract so that each partition (and key) has one owner',
        );
      }
      return pass(GATE.ordering, `${ordering} ordering kept: each partition has one owner`);
    default:
      return assertNever(ordering, 'contract.ordering');
  }
}

function deliveryGate({ delivery }: Contract): GateRow {
  switch (delivery) {
    case 'unknown':
      return fail(GATE.delivery, 'delivery semantics unknown', 'ack, retry, duplicate and loss behaviour');
    case 'at-most-once':
      return pass(GATE.delivery, 'at-most-once: records in flight on a moved replica may be lost');
    case 'at-least-once':
      return pass(GATE.delivery, 'at-least-once: a reassignment may redeliver, expect duplicates');
    case 'exactly-once':
      return pass(GATE.delivery, 'exactly-once: duplicates are suppressed end to end');
    default:
      return assertNever(delivery, 'contract.delivery');
  }
}

function recoveryGate({ recovery }: Contract): GateRow {
  switch (recovery) {
    case 'unknown':
      return fail(GATE.recovery, 'recovery procedure unknown', 'restart, reassignment and scale-in/drain procedure');
    case 'restart':
      return pass(GATE.recovery, 'recovers by restarting the task');
    case 'reassign':
      return pass(GATE.recovery, 'recovers by reassigning input ownership');
    case 'replay-from-checkpoint':
      return pass(GATE.recovery, 'recovers by replaying from the last checkpoint');
    default:
      return assertNever(recovery, 'contract.recovery');
  }
}

function capacityGate(input: ScaleOutGateInput): GateRow {
  const needed = smallestIncrease(input.currentReplicas, input.targetReplicas);
  // Services and consumers run one task per runtime, so only runtimes not hosting the workload yet
  // count; stream jobs pack subtasks into slots, so every free slot does.
  const available = input.workload.kind === 'stream' ? input.capacity.freeSlots : input.capacity.runtimesWithRoom;
  const unit = input.workload.kind === 'stream' ? 'free slots' : 'eligible runtimes with a free slot not already hosting it';
  const detail = `needs ${needed} new replica(s); ${available} ${unit}`;
  if (available >= needed) return pass(GATE.capacity, detail);
  return fail(
    GATE.capacity,
    detail,
    `${needed - available} more fresh READY runtime(s) matching the selector with a free slot`,
  );
}

function connectivityGate(input: ScaleOutGateInput): GateRow {
  const needed = smallestIncrease(input.currentReplicas, input.targetReplicas);
  const recipients = input.recipientRuntimeIds;
  if (needed === 0) return pass(GATE.connectivity, 'no replica is added');
  if (recipients.length === 0) {
    // Nothing was probed, so reachability is unproven (capacity reports why there is no recipient).
    return fail(
      GATE.connectivity,
      'no runtime would receive a new replica, so no reachability was proven',
      'source and destination probes from the runtimes that would host the new replicas',
    );
  }
  const problems: string[] = [];
  const failing: string[] = [];
  for (const runtimeId of recipients) {
    const runtimeProblems = probeProblems(
      input.probes.filter((probe) => probe.runtimeId === runtimeId),
    );
    if (runtimeProblems.length > 0) {
      failing.push(runtimeId);
      problems.push(`${runtimeId}: ${runtimeProblems.join(', ')}`);
    }
  }
  if (failing.length === 0) {
    const required = Math.max(0, ...input.probes.map((probe) => probe.requirements?.length ?? 0));
    const what = required ? `sources, destinations and ${required} required endpoint(s)` : 'sources and destinations';
    return pass(GATE.connectivity, `${what} reachable from ${recipients.join(', ')}`);
  }
  return fail(
    GATE.connectivity,
    problems.join('; '),
    `passing source and destination probes from ${failing.join(', ')}`,
  );
}

/** Every probe of one runtime must pass; several results for one runtime are all held to it. */
function probeProblems(probes: RuntimeProbe[]): string[] {
  if (probes.length === 0) return ['no probe result'];
  const problems: string[] = [];
  for (const probe of probes) {
    if (!probe.source.ok) problems.push(withDetail('source unreachable', probe.source.detail));
    if (!probe.destination.ok) problems.push(withDetail('destination unreachable', probe.destination.detail));
    for (const requirement of probe.requirements ?? []) {
      if (!requirement.ok) problems.push(withDetail(`cannot reach required ${requirement.endpoint}`, requirement.detail));
    }
  }
  return problems;
}

function downstreamGate({ workload, targetReplicas, expectedRatePerSec, accepted, unknownDownstreamPasses }: ScaleOutGateInput): GateRow {
  const downstream = workload.contract.downstream;
  const acceptedUnknown = accepted?.includes('downstream') ?? false;
  /** An unknown is refused, naming what to declare, unless the request accepted it (the row says so; the ledger keeps the row). */
  const unknown = (what: string, declare: string): GateRow => (acceptedUnknown
    ? pass(GATE.downstream, `${what}; accepted by the request (accept: ["downstream"])`)
    : fail(GATE.downstream, what, `${declare}, or accept the unknown for this request: accept: ["downstream"]`));
  if (downstream === undefined) {
    if (unknownDownstreamPasses) return pass(GATE.downstream, 'no downstream limit declared');
    return unknown(
      'downstream unknown: the contract does not say what the output lands on',
      'contract.downstream: its limits ({"maxReplicas": N}, {"maxRatePerSec": R}), or "none" when nothing downstream can be overloaded',
    );
  }
  if (downstream === 'none') return pass(GATE.downstream, 'declared: no downstream to overload');
  const failures: string[] = [];
  const notes: string[] = [];
  let unmeasured: string | null = null;
  const { maxReplicas, maxRatePerSec } = downstream;
  if (maxReplicas !== undefined) {
    if (targetReplicas > maxReplicas) failures.push(`target ${targetReplicas} above downstream maxReplicas ${maxReplicas}`);
    else notes.push(`target ${targetReplicas} ≤ downstream maxReplicas ${maxReplicas}`);
  }
  if (maxRatePerSec !== undefined) {
    if (expectedRatePerSec === undefined) {
      if (unknownDownstreamPasses) notes.push(`downstream maxRatePerSec ${maxRatePerSec} declared; not checked without an expected rate`);
      else unmeasured = `downstream maxRatePerSec ${maxRatePerSec} declared, but no rate is known to compare with (none measured, none expected at ${targetReplicas})`;
    } else if (expectedRatePerSec > maxRatePerSec) {
      failures.push(`expected ${formatRate(expectedRatePerSec)}/s at ${targetReplicas} above downstream maxRatePerSec ${maxRatePerSec}`);
    } else {
      notes.push(`expected ${formatRate(expectedRatePerSec)}/s at ${targetReplicas} ≤ downstream maxRatePerSec ${maxRatePerSec}`);
    }
  }
  if (failures.length > 0) {
    return fail(
      GATE.downstream,
      failures.join('; '),
      'more downstream capacity (a raised downstream limit) or a smaller target',
    );
  }
  if (unmeasured) return unknown([...notes, unmeasured].join('; '), 'a measured rate (a workload whose tasks count their records: consumer or stream) or no maxRatePerSec');
  return pass(GATE.downstream, notes.join('; ') || 'downstream declared without limits');
}

const formatRate = (rate: number): string => (Number.isInteger(rate) ? String(rate) : rate.toFixed(1));

function withDetail(text: string, detail: string | undefined): string {
  return detail ? `${text} (${detail})` : text;
}
