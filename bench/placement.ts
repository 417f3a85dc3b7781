// Placement benchmark: `npx tsx bench/placement.ts` prints one JSON object.
//
// 1. A full placement pass (computePlacement for every workload, replicas 3, selectors drawn at
//    random over zone=a/b/c) against the time to compute as many sha256 digests as the pass
//    computes — hashing is the irreducible cost of rendezvous placement, so the ratio says how
//    much the rest of the pass adds.
//    The reconcile skip path (1,000 vs 10,000 workloads) is measured where it runs, on PostgreSQL:
//    bench/reconcile.ts.
// 2. The pure-TS sha256 against node:crypto, as a reference figure.
// Each figure is the median of 5 runs after one warm-up run.
import { createHash } from 'node:crypto';
import os from 'node:os';
import {
  beginPlacementPass,
  computePlacement,
  type PlacementWorkload,
} from '../domain/placement';
import { sha256 } from '../domain/sha256';
import type { Placement, Runtime } from '../protocol';
import { seededRandom } from './seeded-random';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const ZONES = ['a', 'b', 'c'] as const;
const REPLICAS = 3;
const MEASURED_RUNS = 5;


function makeFleet(count: number, leaseMs: number): Runtime[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `rt-${String(i).padStart(4, '0')}`,
    endpoint: `http://10.0.${i >> 8}.${i & 255}:7400`,
    labels: { zone: ZONES[i % ZONES.length], rack: `r${i % 40}` },
    slots: 64,
    status: 'READY' as const,
    leaseExpiresAt: new Date(leaseMs).toISOString(),
    fence: 1,
  }));
}

function makeWorkloads(count: number): PlacementWorkload[] {
  const random = seededRandom(count);
  const kinds = ['service', 'consumer', 'stream'] as const;
  return Array.from({ length: count }, (_, i): PlacementWorkload => {
    const kind = kinds[i % kinds.length];
    const zone = ZONES[Math.floor(random() * ZONES.length)];
    const spec = kind === 'consumer' ? { partitions: 8, source: 'orders', sink: 'orders_out' } : {};
    return { name: `wl-${String(i).padStart(5, '0')}`, kind, replicas: REPLICAS, selector: { zone }, spec };
  });
}

interface PassOutcome {
  placements: Placement[];
  digests: number;
  placed: number;
  unplaced: number;
}

/** One reconcile pass from scratch: every workload placed, slots accumulated as a real pass would. */
function placementPass(workloads: PlacementWorkload[], runtimes: Runtime[]): PassOutcome {
  const pass = beginPlacementPass(runtimes, NOW);
  const usedSlots: Record<string, number> = {};
  const placements: Placement[] = [];
  let placed = 0;
  let unplaced = 0;
  for (const workload of workloads) {
    const result = computePlacement({ workload, runtimes, nowMs: NOW, pass, usedSlots });
    for (const assignment of result.assignments) usedSlots[assignment.runtimeId] = (usedSlots[assignment.runtimeId] ?? 0) + 1;
    placed += result.assignments.length;
    unplaced += result.unplaced?.missing ?? 0;
    placements.push({ workload: workload.name, fence: 1, generation: 1, assignments: result.assignments });
  }
  return { placements, digests: pass.digestsComputed, placed, unplaced };
}

/** sha256() hex digests of the same (name, runtime) strings the pass scores, `digests` of them. */
function referenceDigests(workloads: PlacementWorkload[], runtimes: Runtime[], digests: number): number {
  const idsByZone: Record<string, string[]> = {};
  for (const runtime of runtimes) (idsByZone[runtime.labels.zone] ??= []).push(runtime.id);
  let computed = 0;
  let sink = 0; // consumed so the digests cannot be optimised away
  for (const workload of workloads) {
    for (const id of idsByZone[workload.selector.zone]) {
      if (computed === digests) return sink;
      sink ^= sha256(`${workload.name}\n${id}`).charCodeAt(63);
      computed++;
    }
  }
  if (computed !== digests) throw new Error(`reference computed ${computed} digests, the pass ${digests}`);
  return sink;
}

function timeMs(run: () => unknown): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** One warm-up, then the median of MEASURED_RUNS runs, in milliseconds; also the warm-up's result. */
function measure<T>(run: () => T): { medianMs: number; warmUp: T } {
  const warmUp = run();
  const samples = Array.from({ length: MEASURED_RUNS }, () => timeMs(run)).sort((a, b) => a - b);
  return { medianMs: samples[Math.floor(samples.length / 2)], warmUp };
}
const medianMs = (run: () => unknown): number => measure(run).medianMs;

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

function benchCase(workloadCount: number, runtimeCount: number) {
  const workloads = makeWorkloads(workloadCount);
  const runtimes = makeFleet(runtimeCount, NOW + 45_000);
  const { medianMs: passMs, warmUp: outcome } = measure(() => placementPass(workloads, runtimes));
  const referenceMs = medianMs(() => referenceDigests(workloads, runtimes, outcome.digests));


  return {
    workloads: workloadCount,
    runtimes: runtimeCount,
    replicas: REPLICAS,
    placed: outcome.placed,
    unplaced: outcome.unplaced,
    digestsPerPass: outcome.digests,
    placementPassMs: round(passMs),
    sha256ReferenceMs: round(referenceMs),
    passToSha256Ratio: round(passMs / referenceMs),
  };
}

function sha256VersusNodeCrypto() {
  const inputs = Array.from({ length: 100_000 }, (_, i) => `wl-${String(i % 10_000).padStart(5, '0')}\nrt-${String(i % 1000).padStart(4, '0')}`);
  const pureMs = medianMs(() => inputs.forEach((input) => sha256(input)));
  const nodeMs = medianMs(() => inputs.forEach((input) => createHash('sha256').update(input).digest('hex')));
  const largeInput = 'x'.repeat(4 * 1024 * 1024);
  const pureLargeMs = medianMs(() => sha256(largeInput));
  const nodeLargeMs = medianMs(() => createHash('sha256').update(largeInput).digest('hex'));
  return {
    shortDigests: inputs.length,
    pureShortMs: round(pureMs),
    nodeCryptoShortMs: round(nodeMs),
    pureToNodeShortRatio: round(pureMs / nodeMs),
    largeInputBytes: largeInput.length,
    pureLargeMBps: round(largeInput.length / 1e6 / (pureLargeMs / 1000), 1),
    nodeCryptoLargeMBps: round(largeInput.length / 1e6 / (nodeLargeMs / 1000), 1),
    pureToNodeLargeTimeRatio: round(pureLargeMs / nodeLargeMs),
  };
}

function main(): void {
  const started = process.hrtime.bigint();
  const small = benchCase(1_000, 100);
  const large = benchCase(10_000, 1_000);
  const sha = sha256VersusNodeCrypto();
  const totalMs = Number(process.hrtime.bigint() - started) / 1e6;
  const report = {
    bench: 'placement',
    node: process.version,
    cpus: os.cpus().length,
    method: `median of ${MEASURED_RUNS} runs after 1 warm-up, process.hrtime.bigint`,
    note: 'the reference builds sha256() hex strings; the pass compares the same digests as 32-bit words (no hex), so its ratio can fall below 1',
    placementPass: [small, large],
    skipPath: 'measured on PostgreSQL by bench/reconcile.ts (npm run bench:reconcile)',
    sha256VersusNodeCrypto: sha,
    totalBenchMs: round(totalMs, 0),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main();
