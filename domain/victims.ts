// Victim choice for a scale-in (DESIGN.md §4.2, reference/placement-and-scaling.txt "Scale in",
// reference/fleet-reconcile-loop.txt "Why is scaling in harder"): idle replicas first, else the
// least loaded. Never by age ("age is not load") and never only because CPU is low, so `startedAt`
// and `cpu` are accepted (callers pass what they observe) but deliberately never read.
import { assertNever } from './assert';

export interface ReplicaLoad {
  taskId: string;
  runtimeId: string;
  index: number;
  /** input partitions this replica owns (0 for services and for consumers that own none) */
  ownedPartitions: number;
  /** requests/records being processed right now */
  inFlight: number;
  /** recent work rate, e.g. processed records/s or QPS */
  load: number;
  /** ignored on purpose: low CPU alone is never a reason to stop a replica */
  cpu?: number;
  /** ignored on purpose: age is not load */
  startedAt?: string;
}

export interface ChooseVictimsInput {
  replicas: ReplicaLoad[];
  removeCount: number;
  /** never go below this many replicas; default 1 (0 replicas is a retire, not a scale-in) */
  minReplicas?: number;
}

export interface VictimChoice {
  /** in removal order */
  victims: string[];
  /** why each victim was chosen, by task id */
  reasons: Record<string, string>;
  /** set when fewer than removeCount victims were chosen because of minReplicas */
  refused?: string;
}

export const DEFAULT_MIN_REPLICAS = 1;

/**
 * How idle a replica is; lower is removed first.
 * - fullyIdle: owns no partitions, nothing in flight, no load: nobody notices it going.
 * - idle: nothing in flight and either owns no partitions (its load figure lags a revocation) or
 *   has no load (a partitioned consumer whose partitions are quiet): its hand-over is cheap.
 * - busy: everything else, ordered by load.
 */
const IDLENESS = { fullyIdle: 0, idle: 1, busy: 2 } as const;
type Idleness = (typeof IDLENESS)[keyof typeof IDLENESS];

function idlenessOf(replica: ReplicaLoad): Idleness {
  if (replica.inFlight !== 0) return IDLENESS.busy;
  if (replica.ownedPartitions === 0 && replica.load === 0) return IDLENESS.fullyIdle;
  if (replica.ownedPartitions === 0 || replica.load === 0) return IDLENESS.idle;
  return IDLENESS.busy;
}

/** Removal order: idle before busy, then least load, then fewest in flight, then highest index. */
function compareForRemoval(a: ReplicaLoad, b: ReplicaLoad): number {
  return (
    idlenessOf(a) - idlenessOf(b) ||
    a.load - b.load ||
    a.inFlight - b.inFlight ||
    // Highest index first keeps the surviving indices compact (0..n-1).
    b.index - a.index
  );
}

function reasonFor(replica: ReplicaLoad): string {
  const figures = `owns ${replica.ownedPartitions} partition(s), ${replica.inFlight} in flight, load ${replica.load}`;
  const idleness = idlenessOf(replica);
  switch (idleness) {
    case IDLENESS.fullyIdle:
      return `idle: ${figures}`;
    case IDLENESS.idle:
      return `idle (nothing in flight): ${figures}`;
    case IDLENESS.busy:
      return `least loaded: ${figures}`;
    default:
      return assertNever(idleness, 'idleness');
  }
}

export function chooseVictims(input: ChooseVictimsInput): VictimChoice {
  const minReplicas = Math.max(0, input.minReplicas ?? DEFAULT_MIN_REPLICAS);
  const requested = Math.max(0, Math.floor(input.removeCount));
  const removable = Math.max(0, input.replicas.length - minReplicas);
  const count = Math.min(requested, removable);

  const victims = [...input.replicas].sort(compareForRemoval).slice(0, count);
  // fromEntries defines own properties, so no task id can collide with Object.prototype
  const reasons: Record<string, string> = Object.fromEntries(victims.map((victim) => [victim.taskId, reasonFor(victim)]));

  const choice: VictimChoice = { victims: victims.map((victim) => victim.taskId), reasons };
  if (count < requested) {
    choice.refused =
      `removing ${requested} of ${input.replicas.length} replicas would go below minReplicas ${minReplicas}: ` +
      `removing only ${count}`;
  }
  return choice;
}
