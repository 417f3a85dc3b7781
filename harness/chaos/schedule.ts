// The chaos schedule (issue 20): a seeded, replayable interleaving of operations and faults. Pure:
// the same seed and step count always give the same schedule (`--seed S` replays a failure).
//
// Operations go through the API as an operator would (scale, plan/apply, hot and not-hot
// rescales, recover, a tier signal, cancel, abort, retire and define again). Faults hit the
// processes and servers: SIGKILL or SIGSTOP of an agent, a worker or an API process, PostgreSQL or
// Temporal paused, an agent's state folder made unwritable. Every fault is undone after its duration (a killed process is started again, a
// stopped one continued), so the run ends on a whole stack that must have converged.

export const CHAOS_AGENTS = ['chaos-a', 'chaos-b', 'chaos-c'] as const;
export const CHAOS_SERVICE = 'chaos-web';
export const CHAOS_CONSUMER = 'chaos-orders';
export const CHAOS_JOB = 'chaos-clicks';
export const CHAOS_TIER = 'chaos';
export const CHAOS_WORKLOADS: readonly string[] = [CHAOS_SERVICE, CHAOS_CONSUMER, CHAOS_JOB];
/** The consumer's and the stream job's source and sink tables. */
export const CHAOS_TABLES = {
  orders: { source: 'chaos_orders_in', sink: 'chaos_orders_out', partitions: 4 },
  clicks: { source: 'chaos_clicks_in', sink: 'chaos_clicks_out', partitions: 4 },
};

export type ChaosProcess = 'agent' | 'worker' | 'api';

export type ChaosAction =
  | { kind: 'scale'; workload: typeof CHAOS_SERVICE | typeof CHAOS_CONSUMER; replicas: number }
  | { kind: 'plan-apply'; workload: typeof CHAOS_SERVICE | typeof CHAOS_CONSUMER; replicas: number }
  | { kind: 'rescale'; job: typeof CHAOS_JOB; operator: 'agg'; parallelism: number }
  | { kind: 'recover'; runtime: string }
  | { kind: 'tier-signal'; qps: number }
  | { kind: 'cancel'; workload: string }
  | { kind: 'abort'; workload: string }
  | { kind: 'redefine'; workload: typeof CHAOS_SERVICE }
  | { kind: 'kill'; process: ChaosProcess; index: number; signal: 'SIGKILL' | 'SIGSTOP'; durationMs: number }
  | { kind: 'pause'; server: 'postgres' | 'temporal'; durationMs: number }
  /** an agent's state folder made unwritable (chattr +i: root too is refused), made writable again after */
  | { kind: 'unwritable'; index: number; durationMs: number }
  // Network nemeses (issue 35), on the multi-host stack only (harness/hosts.ts), each healed after its duration:
  /** a node's link cut: from everything, or one way, or from the control plane only (harness/hosts.ts Cut) */
  | { kind: 'partition'; index: number; cut: NetworkCut; durationMs: number }
  /** a node's link slowed and made lossy (200 ms ± 100 ms, 5 % loss) */
  | { kind: 'slow-link'; index: number; durationMs: number }
  /** a node's agent's wall clock skewed (libfaketime) */
  | { kind: 'clock-skew'; index: number; seconds: number; durationMs: number }
  /** the control plane (API, workers) cut from PostgreSQL or Temporal while the nodes run on */
  | { kind: 'cut-store'; store: 'postgres' | 'temporal'; durationMs: number };

/** isolate: both ways from everything; inbound: the control plane cannot reach the node; to-api: the node cannot reach the API; control-plane: neither reaches the other */
export const NETWORK_CUTS = ['isolate', 'inbound', 'to-api', 'control-plane'] as const;
export type NetworkCut = (typeof NETWORK_CUTS)[number];

export interface ChaosStep {
  index: number;
  action: ChaosAction;
  /** the pause before the next step */
  gapMs: number;
}

/** mulberry32: a small, well-mixed 32-bit PRNG; plenty for a schedule, and the same everywhere. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Weighted<T> = [weight: number, make: () => T];

function pick<T>(random: () => number, choices: Weighted<T>[]): T {
  const total = choices.reduce((sum, [w]) => sum + w, 0);
  let roll = random() * total;
  for (const [weight, make] of choices) {
    roll -= weight;
    if (roll < 0) return make();
  }
  return choices[choices.length - 1][1]();
}

export interface ScheduleOptions {
  /** leave out the faults (operations only) */
  faults?: boolean;
  /** network nemeses too (the multi-host stack): they replace some of the faults, drawn from a stream of their own */
  network?: boolean;
}

export function buildSchedule(seed: number, steps: number, options: ScheduleOptions = {}): ChaosStep[] {
  const random = prng(seed);
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  const one = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const sized = () => one([CHAOS_SERVICE, CHAOS_CONSUMER] as const);
  const anyWorkload = () => one(CHAOS_WORKLOADS);
  const operations: Weighted<ChaosAction>[] = [
    [5, () => ({ kind: 'scale', workload: sized(), replicas: int(1, 3) })],
    [2, () => ({ kind: 'plan-apply', workload: sized(), replicas: int(1, 3) })],
    // 1 ↔ 2 ↔ 4 are hot (integer factors); 3 is not, and goes through the replan.
    [3, () => ({ kind: 'rescale', job: CHAOS_JOB, operator: 'agg', parallelism: one([1, 2, 4, 3]) })],
    [1, () => ({ kind: 'recover', runtime: one(CHAOS_AGENTS) })],
    [2, () => ({ kind: 'tier-signal', qps: one([50, 150, 250]) })],
    [1, () => ({ kind: 'cancel', workload: anyWorkload() })],
    [1, () => ({ kind: 'abort', workload: anyWorkload() })],
    [1, () => ({ kind: 'redefine', workload: CHAOS_SERVICE })],
  ];
  const faults: Weighted<ChaosAction>[] = [
    [3, () => ({ kind: 'kill', process: 'agent', index: int(0, CHAOS_AGENTS.length - 1), signal: one(['SIGKILL', 'SIGSTOP'] as const), durationMs: int(1_000, 8_000) })],
    [2, () => ({ kind: 'kill', process: 'worker', index: int(0, 1), signal: one(['SIGKILL', 'SIGSTOP'] as const), durationMs: int(1_000, 6_000) })],
    [2, () => ({ kind: 'kill', process: 'api', index: int(0, 1), signal: one(['SIGKILL', 'SIGSTOP'] as const), durationMs: int(1_000, 6_000) })],
    [1, () => ({ kind: 'pause', server: one(['postgres', 'temporal'] as const), durationMs: int(1_000, 5_000) })],
  ];
  // The state-folder fault draws from a stream of its own, so adding it left every other step of
  // every seed as it was (the same operations, faults and gaps, with some faults replaced).
  const folders = prng(seed ^ 0x9e3779b9);
  // So do the network nemeses: without them every seed's schedule is what it was.
  const links = prng(seed ^ 0x85ebca6b);
  const linkInt = (min: number, max: number) => min + Math.floor(links() * (max - min + 1));
  const node = () => linkInt(0, CHAOS_AGENTS.length - 1);
  const nemeses: Weighted<ChaosAction>[] = [
    // 2-10 s: shorter and longer than the chaos lease (3 s), so some nodes are declared LOST and healed
    [4, () => ({ kind: 'partition', index: node(), cut: NETWORK_CUTS[linkInt(0, NETWORK_CUTS.length - 1)]!, durationMs: linkInt(2_000, 10_000) })],
    [2, () => ({ kind: 'slow-link', index: node(), durationMs: linkInt(2_000, 8_000) })],
    [2, () => ({ kind: 'clock-skew', index: node(), seconds: links() < 0.5 ? -30 : 30, durationMs: linkInt(3_000, 10_000) })],
    [1, () => ({ kind: 'cut-store', store: links() < 0.5 ? 'postgres' : 'temporal', durationMs: linkInt(1_000, 5_000) })],
  ];
  const schedule: ChaosStep[] = [];
  for (let index = 0; index < steps; index++) {
    const fault = options.faults !== false && random() < 0.4;
    let action = pick(random, fault ? faults : operations);
    if (fault && folders() < 0.15) {
      action = { kind: 'unwritable', index: Math.floor(folders() * CHAOS_AGENTS.length), durationMs: 1_000 + Math.floor(folders() * 7_000) };
    }
    if (fault && options.network && links() < 0.6) action = pick(links, nemeses);
    schedule.push({ index, action, gapMs: int(300, 2_500) });
  }
  return schedule;
}

/** One line per step, for a failure's report. */
export function describeStep(step: ChaosStep): string {
  const a = step.action;
  switch (a.kind) {
    case 'scale':
    case 'plan-apply':
      return `${a.kind} ${a.workload} → ${a.replicas}`;
    case 'rescale':
      return `rescale ${a.job}/${a.operator} → ${a.parallelism}`;
    case 'recover':
      return `recover ${a.runtime}`;
    case 'tier-signal':
      return `tier ${CHAOS_TIER} qps ${a.qps}`;
    case 'cancel':
    case 'abort':
    case 'redefine':
      return `${a.kind} ${a.workload}`;
    case 'kill':
      return `${a.signal} ${a.process} ${a.index} for ${a.durationMs} ms`;
    case 'pause':
      return `pause ${a.server} for ${a.durationMs} ms`;
    case 'unwritable':
      return `state folder of agent ${a.index} unwritable for ${a.durationMs} ms`;
    case 'partition':
      return `partition (${a.cut}) of agent ${a.index}'s host for ${a.durationMs} ms`;
    case 'slow-link':
      return `slow, lossy link of agent ${a.index}'s host for ${a.durationMs} ms`;
    case 'clock-skew':
      return `clock of agent ${a.index} skewed ${a.seconds > 0 ? '+' : ''}${a.seconds} s for ${a.durationMs} ms`;
    case 'cut-store':
      return `control plane cut from ${a.store} for ${a.durationMs} ms`;
  }
}
