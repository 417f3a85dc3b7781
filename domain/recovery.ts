// Lease sweeping and runtime recovery (DESIGN.md §3 "Static stability", §4.4), pure:
//
// - the lease sweeper's guards and decision: after the control plane itself was away (the API or
//   the sweeper) nothing is declared LOST until one lease has passed; when more than half of a
//   zone's fresh runtimes expire at once it is a mass expiry (held, recovered by nobody but an
//   operator); otherwise each expired runtime is declared LOST and recovered;
// - recoverRuntime's decision per workload assigned to the lost runtime, from the workload's kind,
//   contract and stored owner: a service replica is replaced on an eligible survivor (rendezvous);
//   a consumer replica moves to an eligible runtime that does not host the workload yet, or else its
//   partitions are handed to the surviving replicas, which take them from the committed offsets under
//   the new placement fence (so a late commit by the lost owner is refused); nothing eligible →
//   unplaced with `placement-unavailable`. Only the lost runtime's assignments are recomputed: every
//   other assignment of the fleet stays exactly where it is.
//
// Rendezvous hashing uses node:crypto (domain/placement.ts): workflows import this file's types
// only, activities run it.
import type { Assignment, Contract, Labels, Placement, ReplicaCount, Runtime, RuntimeStatus, Unplaced, Workload, WorkloadKind } from '../protocol';
import { beginPlacementPass, rankEligibleExcept, requirePassOf, taskIdFor, type PlacementPass } from './placement';
import { buildPlan, type Plan } from './plan';

// ---------------------------------------------------------------------------------------------
// The lease sweeper

/** The label that names a runtime's failure domain; runtimes without it share one zone, "". */
export const ZONE_LABEL = 'zone';

export function zoneOf(labels: Labels): string {
  return Object.prototype.hasOwnProperty.call(labels, ZONE_LABEL) ? labels[ZONE_LABEL] : '';
}

/**
 * The API records its liveness every leaseTtl/3. A gap longer than half a lease means it was away:
 * agents' heartbeats could not land, so a lease that ran out meanwhile says nothing about the agent
 * (a lease runs out only after about two thirds of a lease without a heartbeat).
 */
export function apiOutageAfterMs(leaseTtlMs: number): number {
  return Math.floor(leaseTtlMs / 2);
}

/** The sweeper passes every leaseTtl/3; a gap longer than the lease since its last pass is its own outage. */
export function sweeperOutageAfterMs(leaseTtlMs: number): number {
  return leaseTtlMs;
}

/** Why the sweeper declares nothing LOST in this pass. */
export type GuardCode = 'api-never-seen' | 'api-unavailable' | 'api-resumed' | 'sweeper-resumed';

export interface SweepGuard {
  code: GuardCode;
  detail: string;
}

/**
 * May the sweeper judge leases now? Not while the API is away (its liveness is older than
 * apiOutageAfterMs), and not until one lease has passed since the API or the sweeper itself came
 * back from a gap: the agents get one lease to heartbeat first. Times are ms on one clock (the database's).
 */
export function controlPlaneGuard(input: {
  nowMs: number;
  leaseTtlMs: number;
  api: { atMs: number; resumedAtMs: number } | null;
  sweeper: { resumedAtMs: number };
}): SweepGuard | null {
  const { nowMs, leaseTtlMs, api, sweeper } = input;
  if (!api) return { code: 'api-never-seen', detail: 'no API has recorded its liveness yet: heartbeats cannot have landed' };
  const apiSilentMs = nowMs - api.atMs;
  if (apiSilentMs > apiOutageAfterMs(leaseTtlMs)) {
    return { code: 'api-unavailable', detail: `the API last recorded its liveness ${apiSilentMs} ms ago (outage after ${apiOutageAfterMs(leaseTtlMs)} ms): heartbeats cannot land` };
  }
  const sinceApi = nowMs - api.resumedAtMs;
  if (sinceApi < leaseTtlMs) {
    return { code: 'api-resumed', detail: `the API came back ${sinceApi} ms ago: waiting one lease (${leaseTtlMs} ms) for heartbeats` };
  }
  const sinceSweeper = nowMs - sweeper.resumedAtMs;
  if (sinceSweeper < leaseTtlMs) {
    return { code: 'sweeper-resumed', detail: `the lease sweeper came back ${sinceSweeper} ms ago (first pass, or a gap longer than the lease): waiting one lease (${leaseTtlMs} ms) for heartbeats` };
  }
  return null;
}

/** A runtime as the sweeper judges it; `leaseExpiresAtMs` on the same clock as `nowMs`. */
export interface SweptRuntime {
  id: string;
  labels: Labels;
  status: RuntimeStatus;
  fence: number;
  leaseExpiresAtMs: number;
  /** held by an earlier mass expiry: neither declared nor counted */
  held: boolean;
}

export interface MassExpiry {
  zone: string;
  /** the zone's runtimes not LOST and not held */
  population: number;
  /** whose lease ran out */
  expired: string[];
  /** whose lease ran out or is about to (no heartbeat for two intervals): held together */
  suspects: string[];
}

export interface SweepDecision {
  guard: SweepGuard | null;
  /** declare LOST (compare-and-set on the fence) and recover */
  declare: { id: string; fence: number }[];
  /** zones in a mass expiry: hold their suspects, record a `mass-expiry` event, recover none */
  massExpiry: MassExpiry[];
  /** expired runtimes the guard keeps from being declared in this pass */
  waiting: string[];
}

/**
 * One sweep. Per zone (label `zone`), among its runtimes not LOST and not held: when some lease ran
 * out, the suspects are the runtimes whose lease ran out or has less than a third of a lease left
 * (they missed two heartbeats: a healthy runtime renews every third of a lease). At least two
 * suspects and more than half of the zone is a mass expiry; otherwise each expired runtime is
 * declared. "At once" is judged by the suspects, so runtimes that stopped together but whose last
 * heartbeats were a beat apart are still seen together.
 */
export function decideSweep(input: { nowMs: number; leaseTtlMs: number; runtimes: readonly SweptRuntime[]; guard: SweepGuard | null }): SweepDecision {
  const { nowMs, leaseTtlMs, guard } = input;
  const judged = input.runtimes.filter((r) => r.status !== 'LOST' && !r.held);
  const expired = (r: SweptRuntime) => r.leaseExpiresAtMs <= nowMs;
  const decision: SweepDecision = { guard, declare: [], massExpiry: [], waiting: [] };
  if (guard) {
    decision.waiting = judged.filter(expired).map((r) => r.id).sort();
    return decision;
  }
  const byZone = new Map<string, SweptRuntime[]>();
  for (const runtime of judged) {
    const zone = zoneOf(runtime.labels);
    byZone.set(zone, [...(byZone.get(zone) ?? []), runtime]);
  }
  for (const zone of [...byZone.keys()].sort()) {
    const members = byZone.get(zone)!;
    const gone = members.filter(expired);
    if (gone.length === 0) continue;
    const suspects = members.filter((r) => r.leaseExpiresAtMs - nowMs < leaseTtlMs / 3);
    if (suspects.length >= 2 && suspects.length * 2 > members.length) {
      decision.massExpiry.push({ zone, population: members.length, expired: gone.map((r) => r.id).sort(), suspects: suspects.map((r) => r.id).sort() });
      continue;
    }
    decision.declare.push(...gone.map((r) => ({ id: r.id, fence: r.fence })));
  }
  decision.declare.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return decision;
}

// ---------------------------------------------------------------------------------------------
// recoverRuntime's decision

/** What happens to one replica (assignment) the lost runtime held. */
export type ReplicaAction =
  /** a service replica restarted on a survivor (a new task) */
  | 'replaced'
  /** a consumer replica moved to a runtime that did not host the workload: a new task takes its partitions */
  | 'moved'
  /** a consumer replica dropped; its partitions go to the surviving replicas */
  | 'handed-over'
  /** no eligible runtime: dropped and recorded unplaced (placement-unavailable) */
  | 'unplaced'
  /** a replica of an `all` workload: one per eligible runtime, and the lost one is not eligible */
  | 'dropped'
  /** a stream subtask: it cannot rejoin its dataflow; the whole job replans from its last completed checkpoint */
  | 'replanned'
  /** left where it is (e.g. a retired workload, which its retirement stops) */
  | 'left';

export interface ReplicaRecovery {
  index: number;
  /** the task the lost runtime held */
  lostTaskId: string;
  action: ReplicaAction;
  /** the new task (replaced, moved) */
  to: { runtimeId: string; taskId: string } | null;
  /** the partitions the lost replica owned (consumers) */
  partitions: number[];
  /** handed-over: which survivor took which of them */
  handedTo: { taskId: string; runtimeId: string; partitions: number[] }[];
  reason: string;
}

export interface WorkloadRecovery {
  workload: string;
  kind: WorkloadKind;
  replicas: ReplicaCount;
  /** assignments before and after */
  fromReplicas: number;
  toReplicas: number;
  contract: Pick<Contract, 'ownership' | 'state' | 'delivery' | 'recovery'>;
  /**
   * The stored owner: the lost runtime's tasks (the placement's assignments) and, for a consumer,
   * the partitions the offsets table still names one of them owner of (null: not read).
   */
  storedOwner: { runtimeId: string; tasks: string[]; ownedPartitions: number[] | null };
  /** the placement fence the decision was made on (the write is compare-and-set on it) */
  onFence: number;
  /** the workload's assignments after the recovery; null: nothing to write */
  target: Assignment[] | null;
  /** the tasks whose readiness shows the recovery converged: new tasks, and survivors that took partitions */
  converge: { runtimeId: string; taskId: string }[];
  unplaced: Unplaced | null;
  decisions: ReplicaRecovery[];
  warnings: string[];
  /** one line for the Web UI, the ledger and the operator */
  summary: string;
}

export interface RecoveryInput {
  /** the lost runtime */
  runtimeId: string;
  runtimes: readonly Runtime[];
  placements: readonly Placement[];
  workloads: readonly Workload[];
  nowMs: number;
  /** consumers: partitions whose stored owner (offsets table) is one of the lost runtime's tasks, by workload */
  storedOwners?: Readonly<Record<string, readonly number[]>>;
  /** only these workloads (a retry of one); default every workload assigned to the lost runtime */
  only?: readonly string[];
  /** a pass begun on `runtimes` at `nowMs`, shared with the plans that follow (its cached rendezvous keys) */
  pass?: PlacementPass;
}

/**
 * The task id of a replacement: the replica's usual id plus `-r<fence>`, the placement fence the
 * recovery writes. Never the lost task's id: the lost owner and its replacement must be told apart
 * by the agents and by the consumer's owner fencing (the offsets table names tasks).
 */
export function replacementTaskId(workload: string, index: number, generation: number, writtenFence: number): string {
  return `${taskIdFor(workload, index, generation)}-r${writtenFence}`;
}

const byIndex = (a: Assignment, b: Assignment) => a.index - b.index;
const list = (values: readonly number[]) => (values.length ? values.join(',') : 'none');

/** The decision for every workload with an assignment on the lost runtime, by workload name. */
export function decideRecovery(input: RecoveryInput): WorkloadRecovery[] {
  return decideAffected(input, findAffected(input)).map(({ decision }) => decision);
}

/**
 * recoverRuntime's decisions and the plan of each decided target (null: nothing to write), through
 * buildPlan like every other change, on the one snapshot. Its cost follows the lost runtime's
 * work: one scan of the snapshot finds the affected workloads and every runtime's used slots;
 * only those workloads are then sorted, ranked and planned, eligibility computed once per selector.
 */
export function planRecovery(input: RecoveryInput): { decisions: WorkloadRecovery[]; plans: (Plan | null)[] } {
  const decided = decideAffected(input, findAffected(input));
  const plans = decided.map(({ decision, workload, placement }) => {
    if (!decision.target) return null;
    const plan = buildPlan({
      workload, replicas: workload.replicas, runtimes: input.runtimes, placements: input.placements, workloads: input.workloads,
      nowMs: input.nowMs, pass: input.pass, placement,
      decided: { assignments: decision.target, onFence: decision.onFence, warnings: decision.warnings },
    });
    // A decided target carries no unplaced entry of its own: the recovery's shortfall is recorded with the write.
    plan.unplaced = decision.unplaced;
    return plan;
  });
  return { decisions: decided.map(({ decision }) => decision), plans };
}

interface Affected {
  /** the placements holding the lost runtime (of `only`), by workload name */
  placements: Placement[];
  workloads: Map<string, Workload>;
  /** slots every workload holds on each runtime */
  used: Record<string, number>;
}

/** One scan of the snapshot: the lost runtime's placements, their workloads, and every runtime's used slots. */
function findAffected(input: RecoveryInput): Affected {
  const only = input.only ? new Set(input.only) : null;
  const used: Record<string, number> = Object.create(null) as Record<string, number>;
  const placements: Placement[] = [];
  for (const placement of input.placements) {
    let holdsLost = false;
    for (const a of placement.assignments) {
      used[a.runtimeId] = (used[a.runtimeId] ?? 0) + 1;
      if (a.runtimeId === input.runtimeId) holdsLost = true;
    }
    if (holdsLost && (!only || only.has(placement.workload))) placements.push(placement);
  }
  placements.sort((a, b) => (a.workload < b.workload ? -1 : a.workload > b.workload ? 1 : 0));
  const names = new Set(placements.map((p) => p.workload));
  const workloads = new Map<string, Workload>();
  if (names.size > 0) for (const workload of input.workloads) if (names.has(workload.name)) workloads.set(workload.name, workload);
  return { placements, workloads, used };
}

function decideAffected(input: RecoveryInput, affected: Affected): { decision: WorkloadRecovery; workload: Workload; placement: Placement }[] {
  const { runtimeId: lost, nowMs } = input;
  if (affected.placements.length === 0) return [];
  const { used } = affected;
  const runtimes = new Map(input.runtimes.map((r) => [r.id, r]));
  const live = (id: string) => {
    const runtime = runtimes.get(id);
    return id !== lost && runtime !== undefined && runtime.status !== 'LOST' && Date.parse(runtime.leaseExpiresAt) > nowMs;
  };
  if (input.pass) requirePassOf(input.pass, input.runtimes, nowMs);
  const pass = input.pass ?? beginPlacementPass(input.runtimes, nowMs);
  // Runtimes without a free slot, kept up to date as replacements take slots.
  const full = new Set<string>([lost]);
  for (const runtime of input.runtimes) if (runtime.slots - (used[runtime.id] ?? 0) <= 0) full.add(runtime.id);

  const decided: { decision: WorkloadRecovery; workload: Workload; placement: Placement }[] = [];
  for (const placement of affected.placements) {
    const lostAssignments = placement.assignments.filter((a) => a.runtimeId === lost).sort(byIndex);
    const workload = affected.workloads.get(placement.workload);
    if (!workload) continue;
    const decision = decideWorkload({ workload, placement, lostAssignments, lost, live, used, full, pass, storedOwned: input.storedOwners?.[workload.name] });
    decided.push({ decision, workload, placement });
  }
  return decided;
}

function decideWorkload(input: {
  workload: Workload;
  placement: Placement;
  lostAssignments: Assignment[];
  lost: string;
  live: (runtimeId: string) => boolean;
  used: Record<string, number>;
  /** runtimes without a free slot, and the lost one */
  full: Set<string>;
  pass: PlacementPass;
  storedOwned: readonly number[] | undefined;
}): WorkloadRecovery {
  const { workload, placement, lostAssignments, lost, live, used, full } = input;
  const writtenFence = placement.fence + 1;
  const { ownership, state, delivery, recovery } = workload.contract;
  const warnings: string[] = [];
  const result: WorkloadRecovery = {
    workload: workload.name, kind: workload.kind, replicas: workload.replicas,
    fromReplicas: placement.assignments.length, toReplicas: placement.assignments.length,
    contract: { ownership, state, delivery, recovery },
    storedOwner: { runtimeId: lost, tasks: lostAssignments.map((a) => a.taskId), ownedPartitions: input.storedOwned ? [...input.storedOwned].sort((a, b) => a - b) : null },
    onFence: placement.fence, target: null, converge: [], unplaced: null, decisions: [], warnings, summary: '',
  };
  const leave = (action: ReplicaAction, reason: string) => {
    result.decisions = lostAssignments.map((a) => ({ index: a.index, lostTaskId: a.taskId, action, to: null, partitions: a.partitions ?? [], handedTo: [], reason }));
    result.summary = `${workload.name}: ${reason}`;
    return result;
  };

  if (workload.retired) return leave('left', 'retired: its retirement stops its tasks, nothing to recover');
  if (workload.kind === 'stream') {
    return leave('replanned', `a lost stream subtask cannot rejoin its dataflow: the job is replanned from its last completed checkpoint (replan:${workload.name})`);
  }

  if (recovery === 'unknown') warnings.push('contract.recovery is unknown: the lost replica is replaced to restore the count the workload had (a recovery never scales)');
  if (workload.kind === 'service' && state === 'local') warnings.push(`contract.state is local: the state of the lost replica stayed on ${lost}`);
  if (workload.colocate) warnings.push(`colocation group ${workload.colocate}: the replacement is placed by rendezvous, not beside the group (a replan places the group together again)`);

  // Survivors keep their runtime, task id and ports; only the lost runtime's assignments are decided.
  const kept = placement.assignments.filter((a) => a.runtimeId !== lost).map((a) => ({ ...a, ...(a.partitions ? { partitions: [...a.partitions] } : {}) }));
  const hosts = new Set(placement.assignments.map((a) => a.runtimeId));
  const consumer = workload.kind === 'consumer';
  const owned = new Set(result.storedOwner.ownedPartitions ?? []);
  const fromCommitted = (partitions: number[]) => {
    const stillOwned = partitions.filter((p) => owned.has(p));
    const stored = result.storedOwner.ownedPartitions === null
      ? ''
      : stillOwned.length
        ? `; the offsets table still names the lost task owner of [${list(stillOwned)}]: the takeover fences it out`
        : '; the offsets table names the lost task owner of none of them';
    return `from the committed offsets under placement fence ${writtenFence}, so a late commit by the lost owner is refused (owner fence)${stored}`;
  };

  for (const lostAssignment of lostAssignments) {
    const partitions = [...(lostAssignment.partitions ?? [])].sort((a, b) => a - b);
    const decision: ReplicaRecovery = { index: lostAssignment.index, lostTaskId: lostAssignment.taskId, action: 'unplaced', to: null, partitions, handedTo: [], reason: '' };
    result.decisions.push(decision);
    if (workload.replicas === 'all') {
      decision.action = 'dropped';
      decision.reason = `replicas "all": one replica per eligible runtime, and ${lost} is not eligible any more`;
    } else {
      // Rendezvous among the survivors: fresh READY, matching the selector, not hosting the workload, with a free slot.
      const { ranked: [winner], candidates } = rankEligibleExcept(input.pass, workload.name, workload.selector, 1, [full, hosts]);
      if (winner) {
        const best = winner.id;
        const taskId = replacementTaskId(workload.name, lostAssignment.index, placement.generation, writtenFence);
        kept.push({ runtimeId: best, index: lostAssignment.index, taskId, ...(consumer ? { partitions } : {}) });
        hosts.add(best);
        used[best] = (used[best] ?? 0) + 1;
        if (winner.slots - used[best] <= 0) full.add(best);
        decision.to = { runtimeId: best, taskId };
        result.converge.push({ runtimeId: best, taskId });
        if (consumer) {
          decision.action = 'moved';
          decision.reason = `moved to ${best} (rendezvous among ${candidates} eligible runtime(s) not hosting ${workload.name}): ${taskId} takes partitions [${list(partitions)}] ${fromCommitted(partitions)}`;
        } else {
          decision.action = 'replaced';
          decision.reason = `replaced on ${best} (rendezvous among ${candidates} eligible runtime(s) not hosting ${workload.name}) by ${taskId}`;
        }
        continue;
      }
      decision.action = 'unplaced';
      decision.reason = `no eligible runtime (fresh READY, selector ${JSON.stringify(workload.selector)}, not hosting ${workload.name}, a free slot): placement-unavailable`;
    }
    if (consumer && partitions.length) {
      // Hand the partitions to the surviving replicas (live runtimes only): each to the one owning fewest, ties by index.
      const survivors = kept.filter((a) => live(a.runtimeId)).sort(byIndex);
      if (survivors.length === 0) {
        decision.reason += `; no surviving replica to take partitions [${list(partitions)}]: they wait, unowned, for capacity`;
        continue;
      }
      const gained = new Map<string, number[]>();
      for (const partition of partitions) {
        const to = survivors.reduce((best, s) => ((s.partitions?.length ?? 0) < (best.partitions?.length ?? 0) ? s : best));
        to.partitions = [...(to.partitions ?? []), partition].sort((a, b) => a - b);
        gained.set(to.taskId, [...(gained.get(to.taskId) ?? []), partition]);
      }
      decision.handedTo = survivors
        .filter((s) => gained.has(s.taskId))
        .map((s) => ({ taskId: s.taskId, runtimeId: s.runtimeId, partitions: gained.get(s.taskId)! }));
      for (const h of decision.handedTo) if (!result.converge.some((c) => c.taskId === h.taskId)) result.converge.push({ runtimeId: h.runtimeId, taskId: h.taskId });
      if (decision.action === 'unplaced') decision.action = 'handed-over';
      decision.reason += `; partitions [${list(partitions)}] handed to ${decision.handedTo.map((h) => `${h.taskId} [${list(h.partitions)}]`).join(', ')} ${fromCommitted(partitions)}`;
    }
  }

  const target = kept.sort(byIndex);
  result.target = target;
  result.toReplicas = target.length;
  const missing = workload.replicas === 'all' ? (target.length === 0 ? 1 : 0) : workload.replicas - target.length;
  if (missing > 0) {
    result.unplaced = { workload: workload.name, reason: 'placement-unavailable', missing };
    warnings.push(`capacity short: ${missing} replica(s) unplaced (placement-unavailable); the reconcile loop places them when an eligible runtime joins`);
  }
  const said = result.decisions.map((d) => {
    if (d.action === 'replaced' || d.action === 'moved') return `replica ${d.index} ${d.action} to ${d.to!.runtimeId} (${d.to!.taskId})`;
    if (d.action === 'handed-over') return `replica ${d.index} dropped, partitions [${list(d.partitions)}] handed to ${d.handedTo.map((h) => h.taskId).join(', ')}`;
    if (d.action === 'dropped') return `replica ${d.index} dropped (replicas "all")${d.handedTo.length ? `, partitions [${list(d.partitions)}] handed to ${d.handedTo.map((h) => h.taskId).join(', ')}` : ''}`;
    return `replica ${d.index} unplaced`;
  });
  result.summary = `${workload.name}: ${said.join('; ')}${result.unplaced ? `; ${result.unplaced.missing} unplaced (placement-unavailable)` : ''}`;
  return result;
}
