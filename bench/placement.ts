// Placement benchmark: `npm run bench:placement` (tsx bench/placement.ts) prints one JSON object.
//
// A full placement pass (computePlacement for every workload, replicas 3, selectors drawn at
// random over zone=a/b/c, slots accumulated in order) for 1,000 workloads × 100 runtimes and
// 10,000 × 1,000, compared with the native limit of the hashing it cannot avoid: a cold pass
// computes one SHA-256 per (workload, eligible runtime), and `openssl speed -bytes 32 sha256`,
// measured in the same run, says how many short digests per second one core of this machine can
// compute at all. Each pass is reported as digests per second (the (workload, runtime) digests the
// pass ranks by, over its wall time) and as `toOpenssl`, that rate over openssl's one-core rate
// (1 would mean the pass costs what bare native hashing on one core costs):
// - coldSingleThread: a pass with an empty key cache, on the calling thread;
// - coldTwoThreads: the same, its keys first computed on the calling thread and a worker thread
//   together (activities/rendezvous-threads.ts; the thread is started before timing), the pass
//   itself sequential;
// - warm: a pass over the same fleet and workloads with the cache of an earlier pass: it hashes
//   nothing, so its rate is the digests it ranks by, served from the cache;
// - warmAfterChange: the cache of an earlier pass, then 3 runtimes join, 1 leaves and 10
//   workloads are renamed: it hashes only the new pairs (digestsComputed says how many).
// Every variant's assignments are checked identical to the single-threaded pass (identical: true).
// For orientation it also reports node's one-shot crypto.hash (hex) over the same strings on one
// thread: the platform's rate from JavaScript, call overhead included.
// The reconcile skip path (1,000 vs 10,000 workloads) is measured where it runs, on PostgreSQL:
// bench/reconcile.ts.
// Pass figures are the median of 5 runs after one warm-up run; openssl is the median of 3 runs
// before the cases and 3 after (the machine is shared: loadAverage says how busy it was).
import { execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import os from 'node:os';
import { createRendezvousThreads, type RendezvousThreads } from '../activities/rendezvous-threads';
import {
  beginPlacementPass,
  computePlacement,
  RendezvousKeyCache,
  type PlacementPass,
  type PlacementWorkload,
} from '../domain/placement';
import type { Assignment, Runtime } from '../protocol';
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
  assignments: Assignment[][];
  digests: number;
  placed: number;
  unplaced: number;
}

/** One reconcile pass from scratch: every workload placed, slots accumulated as a real pass would. */
function placementPass(workloads: PlacementWorkload[], runtimes: Runtime[], pass: PlacementPass = beginPlacementPass(runtimes, NOW)): PassOutcome {
  const usedSlots: Record<string, number> = {};
  const assignments: Assignment[][] = [];
  let placed = 0;
  let unplaced = 0;
  for (const workload of workloads) {
    const result = computePlacement({ workload, runtimes, nowMs: NOW, pass, usedSlots });
    for (const assignment of result.assignments) usedSlots[assignment.runtimeId] = (usedSlots[assignment.runtimeId] ?? 0) + 1;
    placed += result.assignments.length;
    unplaced += result.unplaced?.missing ?? 0;
    assignments.push(result.assignments);
  }
  return { assignments, digests: pass.digestsComputed, placed, unplaced };
}

/** A cold pass whose keys the threads compute first (on the calling thread too), then placed in order. */
async function twoThreadPass(workloads: PlacementWorkload[], runtimes: Runtime[], threads: RendezvousThreads) {
  const pass = beginPlacementPass(runtimes, NOW, { keys: new RendezvousKeyCache() });
  const started = process.hrtime.bigint();
  const filled = await threads.fill(pass, workloads);
  const fillMs = Number(process.hrtime.bigint() - started) / 1e6;
  return { outcome: placementPass(workloads, runtimes, pass), fillMs, ...filled };
}

/** 3 runtimes join (one per zone), the first leaves, 10 workloads are renamed. */
function changed(workloads: PlacementWorkload[], runtimes: Runtime[]): { workloads: PlacementWorkload[]; runtimes: Runtime[] } {
  const joiners = ZONES.map((zone, i) => ({ ...runtimes[i], id: `rt-joiner-${zone}`, labels: { zone, rack: 'r-new' } }));
  const renamed = workloads.map((w, i) => (i % Math.floor(workloads.length / 10) === 0 ? { ...w, name: `${w.name}-v2` } : w));
  return { workloads: renamed, runtimes: [...runtimes.slice(1), ...joiners] };
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

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** One warm-up, then the median of MEASURED_RUNS runs in milliseconds; `prepare` runs untimed before each. */
async function measure<S, T>(prepare: () => S, run: (state: S) => T | Promise<T>): Promise<{ medianMs: number; warmUp: T }> {
  const warmUp = await run(prepare());
  const samples: number[] = [];
  for (let i = 0; i < MEASURED_RUNS; i++) {
    const state = prepare();
    const start = process.hrtime.bigint();
    await run(state);
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return { medianMs: median(samples), warmUp };
}

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));
const sameAssignments = (a: PassOutcome, b: PassOutcome): boolean => JSON.stringify(a.assignments) === JSON.stringify(b.assignments);

/** `toOpenssl` is set once openssl has been measured after the cases too. */
const rate = (ranked: number, ms: number) => ({ passMs: round(ms), digestsPerSec: Math.round(ranked / (ms / 1000)), toOpenssl: 0 });

async function benchCase(workloadCount: number, runtimeCount: number, threads: RendezvousThreads) {
  const workloads = makeWorkloads(workloadCount);
  const runtimes = makeFleet(runtimeCount, NOW + 45_000);
  const none = () => undefined;

  const single = await measure(none, () => placementPass(workloads, runtimes, beginPlacementPass(runtimes, NOW, { keys: new RendezvousKeyCache() })));
  const reference = single.warmUp;
  const ranked = reference.digests;
  const two = await measure(none, () => twoThreadPass(workloads, runtimes, threads));
  const warmKeys = new RendezvousKeyCache();
  placementPass(workloads, runtimes, beginPlacementPass(runtimes, NOW, { keys: warmKeys }));
  const warm = await measure(none, () => placementPass(workloads, runtimes, beginPlacementPass(runtimes, NOW, { keys: warmKeys })));
  const after = changed(workloads, runtimes);
  const keptKeys = () => {
    const keys = new RendezvousKeyCache();
    placementPass(workloads, runtimes, beginPlacementPass(runtimes, NOW, { keys }));
    return keys;
  };
  const afterChange = await measure(keptKeys, (keys) => placementPass(after.workloads, after.runtimes, beginPlacementPass(after.runtimes, NOW, { keys })));
  const afterChangeReference = placementPass(after.workloads, after.runtimes);

  const strings = scoredStrings(workloads, runtimes, ranked);
  const nodeHashMs = (await measure(none, () => nodeHashAll(strings))).medianMs;
  return {
    workloads: workloadCount,
    runtimes: runtimeCount,
    replicas: REPLICAS,
    placed: reference.placed,
    unplaced: reference.unplaced,
    digestsRanked: ranked,
    coldSingleThread: { ...rate(ranked, single.medianMs), digestsComputed: reference.digests },
    coldTwoThreads: {
      ...rate(ranked, two.medianMs),
      digestsComputed: two.warmUp.outcome.digests,
      // 1: fewer keys than the fill's threshold (DEFAULT_MIN_THREADED_KEYS), computed inline
      threads: two.warmUp.threads,
      keysFillMs: round(two.warmUp.fillMs),
      keysOffThreadShare: round(two.warmUp.offThread / ranked),
      identical: sameAssignments(two.warmUp.outcome, reference),
    },
    warm: { ...rate(ranked, warm.medianMs), digestsComputed: warm.warmUp.digests, identical: sameAssignments(warm.warmUp, reference) },
    warmAfterChange: {
      change: '3 runtimes joined, 1 left, 10 workloads renamed',
      ...rate(afterChangeReference.digests, afterChange.medianMs),
      digestsComputed: afterChange.warmUp.digests,
      identical: sameAssignments(afterChange.warmUp, afterChangeReference),
    },
    nodeCryptoHashOneThread: rate(ranked, nodeHashMs),
  };
}

async function main(): Promise<void> {
  const started = process.hrtime.bigint();
  const loadAverage = os.loadavg().map((load) => round(load, 2));
  const threads = createRendezvousThreads();
  const threadStart = process.hrtime.bigint();
  await threads.ready();
  const threadStartMs = Number(process.hrtime.bigint() - threadStart) / 1e6;
  const before = measureOpenssl();
  const cases = [];
  for (const [workloads, runtimes] of [[1_000, 100], [10_000, 1_000]] as const) {
    cases.push(await benchCase(workloads, runtimes, threads));
  }
  const after = measureOpenssl();
  const opensslRuns = [...before.runs, ...after.runs];
  const opensslDigestsPerSec = median(opensslRuns);
  for (const figures of cases) {
    for (const pass of [figures.coldSingleThread, figures.coldTwoThreads, figures.warm, figures.warmAfterChange, figures.nodeCryptoHashOneThread]) {
      pass.toOpenssl = round(pass.digestsPerSec / opensslDigestsPerSec);
    }
  }
  await threads.close();
  const report = {
    bench: 'placement',
    node: process.version,
    cpus: os.cpus().length,
    loadAverage,
    method: `pass: median of ${MEASURED_RUNS} runs after 1 warm-up, process.hrtime.bigint; openssl: median of ${OPENSSL_RUNS} runs of 1 s before the cases and ${OPENSSL_RUNS} after; digestsPerSec = digests the pass ranks by / its wall time; toOpenssl = digestsPerSec / openssl's one-core rate`,
    openssl: { command: before.command, version: before.version, runs: opensslRuns, digestsPerSec: opensslDigestsPerSec },
    workerThreadStartMs: round(threadStartMs, 0),
    placementPass: cases,
    skipPath: 'measured on PostgreSQL by bench/reconcile.ts (npm run bench:reconcile)',
    totalBenchMs: round(Number(process.hrtime.bigint() - started) / 1e6, 0),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
