// Placement benchmark: `npm run bench:placement` (tsx bench/placement.ts) prints one JSON object.
//
// A full placement pass (computePlacement for every workload, replicas 3, selectors drawn at
// random over zone=a/b/c) for 1,000 workloads × 100 runtimes and 10,000 × 1,000, compared with
// the native limit of the hashing it cannot avoid: rendezvous placement computes one SHA-256 per
// (workload, eligible runtime), and `openssl speed -bytes 32 sha256`, measured in the same run,
// says how many short digests per second this machine can compute at all. The ratio
// opensslDigestsPerSec / passDigestsPerSec is how many times slower per digest the whole pass is
// than bare native hashing (1 would mean the pass is nothing but hashing at the native rate).
// For orientation it also reports node's one-shot crypto.hash over the same strings (the
// platform's rate from JavaScript, call overhead included).
// The reconcile skip path (1,000 vs 10,000 workloads) is measured where it runs, on PostgreSQL:
// bench/reconcile.ts.
// Pass figures are the median of 5 runs after one warm-up run; openssl is the median of 3 runs.
import { execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import os from 'node:os';
import {
  beginPlacementPass,
  computePlacement,
  type PlacementWorkload,
} from '../domain/placement';
import type { Placement, Runtime } from '../protocol';
import { seededRandom } from '../lib/seeded-random';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const ZONES = ['a', 'b', 'c'] as const;
const REPLICAS = 3;
const MEASURED_RUNS = 5;
const OPENSSL_RUNS = 3;
const OPENSSL_BLOCK_BYTES = 32;

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

/** The (name, runtime) strings the pass scores, in pass order, `digests` of them. */
function scoredStrings(workloads: PlacementWorkload[], runtimes: Runtime[], digests: number): string[] {
  const idsByZone: Record<string, string[]> = {};
  for (const runtime of runtimes) (idsByZone[runtime.labels.zone] ??= []).push(runtime.id);
  const strings: string[] = [];
  for (const workload of workloads) {
    for (const id of idsByZone[workload.selector.zone]) {
      if (strings.length === digests) return strings;
      strings.push(`${workload.name}\n${id}`);
    }
  }
  if (strings.length !== digests) throw new Error(`found ${strings.length} scored strings, the pass computed ${digests} digests`);
  return strings;
}

/** node's one-shot crypto.hash over the strings; the result is consumed so it cannot be optimised away. */
function nodeHashAll(strings: readonly string[]): number {
  let sink = 0;
  for (const text of strings) sink ^= crypto.hash('sha256', text, 'hex').charCodeAt(63);
  return sink;
}

interface OpensslFigure {
  command: string;
  version: string;
  runs: number[];
  digestsPerSec: number;
}

/**
 * `openssl speed -mr -seconds 1 -bytes 32 sha256`, median of OPENSSL_RUNS runs. The machine-readable
 * line is `+F:<n>:sha256:<bytes per second>` for 32-byte blocks; the human table
 * (`sha256  341451.62k`, in 1000s of bytes per second) is the fallback.
 */
function measureOpenssl(): OpensslFigure {
  const args = ['speed', '-mr', '-seconds', '1', '-bytes', String(OPENSSL_BLOCK_BYTES), 'sha256'];
  const runs: number[] = [];
  for (let run = 0; run < OPENSSL_RUNS; run++) {
    const output = execFileSync('openssl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    runs.push(Math.round(parseOpensslBytesPerSec(output) / OPENSSL_BLOCK_BYTES));
  }
  const sorted = [...runs].sort((x, y) => x - y);
  const version = execFileSync('openssl', ['version'], { encoding: 'utf8' }).trim();
  return { command: `openssl ${args.join(' ')}`, version, runs, digestsPerSec: sorted[Math.floor(sorted.length / 2)] };
}

function parseOpensslBytesPerSec(output: string): number {
  const machine = /^\+F:\d+:sha256:([\d.]+)/m.exec(output);
  if (machine) return Number(machine[1]);
  const table = /^sha256\s+([\d.]+)k\b/m.exec(output);
  if (table) return Number(table[1]) * 1000;
  throw new Error(`cannot read a sha256 rate from openssl speed output:\n${output}`);
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

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

function benchCase(workloadCount: number, runtimeCount: number, opensslDigestsPerSec: number) {
  const workloads = makeWorkloads(workloadCount);
  const runtimes = makeFleet(runtimeCount, NOW + 45_000);
  const { medianMs: passMs, warmUp: outcome } = measure(() => placementPass(workloads, runtimes));
  const strings = scoredStrings(workloads, runtimes, outcome.digests);
  const nodeHashMs = measure(() => nodeHashAll(strings)).medianMs;
  const passDigestsPerSec = outcome.digests / (passMs / 1000);
  const nodeHashDigestsPerSec = strings.length / (nodeHashMs / 1000);
  return {
    workloads: workloadCount,
    runtimes: runtimeCount,
    replicas: REPLICAS,
    placed: outcome.placed,
    unplaced: outcome.unplaced,
    passMs: round(passMs),
    digestsComputed: outcome.digests,
    passDigestsPerSec: Math.round(passDigestsPerSec),
    opensslDigestsPerSec,
    opensslToPassRatio: round(opensslDigestsPerSec / passDigestsPerSec),
    nodeHashDigestsPerSec: Math.round(nodeHashDigestsPerSec),
    opensslToNodeHashRatio: round(opensslDigestsPerSec / nodeHashDigestsPerSec),
  };
}

function main(): void {
  const started = process.hrtime.bigint();
  const openssl = measureOpenssl();
  const cases = [benchCase(1_000, 100, openssl.digestsPerSec), benchCase(10_000, 1_000, openssl.digestsPerSec)];
  const totalMs = Number(process.hrtime.bigint() - started) / 1e6;
  const report = {
    bench: 'placement',
    node: process.version,
    cpus: os.cpus().length,
    method: `pass: median of ${MEASURED_RUNS} runs after 1 warm-up, process.hrtime.bigint; openssl: median of ${OPENSSL_RUNS} runs of 1 s`,
    openssl,
    placementPass: cases,
    skipPath: 'measured on PostgreSQL by bench/reconcile.ts (npm run bench:reconcile)',
    totalBenchMs: round(totalMs, 0),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main();
