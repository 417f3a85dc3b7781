// Reconcile-pass benchmark against a real PostgreSQL: `npx tsx bench/reconcile.ts` prints one JSON
// object.
//
// The fleet: 100 runtimes (zone=a/b/c, a one-hour lease) and N service workloads (replicas 3,
// selector on a random zone) whose placements are already written, so every workload is placed
// and sticky. For N = 1,000 and N = 10,000 it times, through the real activity:
//   (a) the unchanged-input pass: the marker already equals the inputs key → skipped: true. DESIGN
//       §3 promises its cost is flat in the number of workloads, so the 10k/1k ratio should be ≈1.
//   (b) a full pass (forced by taking a registry revision before each run), as the reference the
//       skip avoids: it loads every workload, placement and runtime.
// Each figure is the median of 7 runs after one warm-up run, timed with process.hrtime.bigint.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'pg';
import { createPostgresActivities as createActivities } from '../activities/deps';
import { beginPlacementPass, computePlacement, type PlacementWorkload } from '../domain/placement';
import { UNKNOWN_CONTRACT, type WorkloadDefinition } from '../protocol';
import type { Runtime } from '../protocol';
import { startEmbeddedPostgres } from '../embedded/postgres';
import { freePort } from '../embedded/processes';
import { createPool } from '../store/db';
import { migrate } from '../store/migrate';
import { createRuntimeStore } from '../store/runtimes';
import { seededRandom } from '../lib/seeded-random';

const ZONES = ['a', 'b', 'c'] as const;
const RUNTIMES = 100;
const REPLICAS = 3;
const MEASURED_RUNS = 7;
const LEASE_MS = 3_600_000; // outlives the run: the fresh-runtime set must not move under the bench
const INSERT_BATCH = 2_500;


async function registerFleet(db: Pool): Promise<Runtime[]> {
  const store = createRuntimeStore(db);
  return Promise.all(
    Array.from({ length: RUNTIMES }, (_, i) =>
      store.register(
        { id: `rt-${String(i).padStart(3, '0')}`, endpoint: `http://10.0.0.${i + 1}:7400`, labels: { zone: ZONES[i % ZONES.length] }, slots: 1024 },
        LEASE_MS,
      ),
    ),
  );
}

/**
 * Replaces every workload with `count` placed ones. Placement is computed with the real rendezvous
 * code (so the records look like what apply writes) and inserted with unnest in batches: going
 * through putWorkload/writePlacement one row at a time would dominate the run at 10k.
 */
async function seedWorkloads(db: Pool, fleet: Runtime[], count: number): Promise<void> {
  await db.query('truncate workloads cascade'); // placements, plans and unplaced go with it
  const random = seededRandom(count);
  const nowMs = Date.now();
  const pass = beginPlacementPass(fleet, nowMs);
  const usedSlots: Record<string, number> = {};
  const rows = Array.from({ length: count }, (_, i) => {
    const name = `wl-${String(i).padStart(5, '0')}`;
    const definition: WorkloadDefinition = {
      kind: 'service',
      replicas: REPLICAS,
      selector: { zone: ZONES[Math.floor(random() * ZONES.length)] },
      contract: UNKNOWN_CONTRACT,
      spec: { command: ['node', 'server.js'], env: {}, graceMs: 5000 },
    };
    const workload: PlacementWorkload = { name, kind: definition.kind, replicas: REPLICAS, selector: definition.selector, spec: definition.spec };
    const { assignments, unplaced } = computePlacement({ workload, runtimes: fleet, nowMs, pass, usedSlots });
    if (unplaced) throw new Error(`seed: ${name} could not be placed (${unplaced.missing} missing)`);
    for (const a of assignments) usedSlots[a.runtimeId] = (usedSlots[a.runtimeId] ?? 0) + 1;
    return { name, definition, assignments };
  });
  for (let start = 0; start < rows.length; start += INSERT_BATCH) {
    const batch = rows.slice(start, start + INSERT_BATCH);
    const names = batch.map((r) => r.name);
    await db.query(
      `insert into workloads (name, kind, definition)
       select name, 'service', definition from unnest($1::text[], $2::jsonb[]) as t(name, definition)`,
      [names, batch.map((r) => JSON.stringify(r.definition))],
    );
    await db.query(
      `insert into placements (workload, fence, generation, assignments, updated_by)
       select workload, 1, 1, assignments, 'bench' from unnest($1::text[], $2::jsonb[]) as t(workload, assignments)`,
      [names, batch.map((r) => JSON.stringify(r.assignments))],
    );
  }
  await db.query('analyze workloads; analyze placements');
}

async function timeMs(run: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await run();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** One warm-up, then the median of MEASURED_RUNS runs in milliseconds; `before` runs untimed. */
async function medianMs(run: () => Promise<unknown>, before: () => Promise<unknown> = async () => {}): Promise<number> {
  await before();
  await run();
  const samples: number[] = [];
  for (let i = 0; i < MEASURED_RUNS; i++) {
    await before();
    samples.push(await timeMs(run));
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

async function benchCase(db: Pool, fleet: Runtime[], count: number) {
  await seedWorkloads(db, fleet, count);
  const { reconcilePass } = createActivities({ db });
  const bumpRegistry = () => db.query(`select nextval('registry_revision')`);

  // Every pass must take the path it is meant to time, and a full pass over sticky placed
  // workloads must plan nothing: otherwise the figures would measure something else.
  const expect = (skipped: boolean) => async () => {
    const result = await reconcilePass();
    if (result.skipped !== skipped) throw new Error(`N=${count}: expected skipped=${skipped}, got ${result.skipped}`);
    if (result.planIds.length) throw new Error(`N=${count}: a pass planned ${result.planIds.length} workload(s); the seed is not fully placed`);
  };
  const fullPassMs = await medianMs(expect(false), bumpRegistry);
  const skipPassMs = await medianMs(expect(true)); // the last full pass left the marker equal to the key
  return { workloads: count, skipPassMs: round(skipPassMs), fullPassMs: round(fullPassMs), fullToSkipRatio: round(fullPassMs / skipPassMs, 1) };
}

async function main(): Promise<void> {
  const started = process.hrtime.bigint();
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-bench-reconcile-'));
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const postgres = await startEmbeddedPostgres({ dataDir: path.join(tmpDir, 'postgres'), port: await freePort(), database: 'scalegate_bench', log });
  const db = createPool(postgres.url, { max: 4 });
  try {
    await migrate(db);
    const fleet = await registerFleet(db);
    const small = await benchCase(db, fleet, 1_000);
    const large = await benchCase(db, fleet, 10_000);
    const report = {
      bench: 'reconcile',
      node: process.version,
      cpus: os.cpus().length,
      method: `median of ${MEASURED_RUNS} runs after 1 warm-up, process.hrtime.bigint, reconcilePass() on embedded PostgreSQL`,
      runtimes: RUNTIMES,
      replicas: REPLICAS,
      cases: [small, large],
      skipPath: {
        workloads1000Ms: small.skipPassMs,
        workloads10000Ms: large.skipPassMs,
        ratio10000To1000: round(large.skipPassMs / small.skipPassMs),
      },
      fullPass: {
        workloads1000Ms: small.fullPassMs,
        workloads10000Ms: large.fullPassMs,
        ratio10000To1000: round(large.fullPassMs / small.fullPassMs),
      },
      fullToSkipRatio: { workloads1000: small.fullToSkipRatio, workloads10000: large.fullToSkipRatio },
      note:
        'skip = one key read over sequences and the 100 fresh runtimes + marker read + marker write (3 round trips), independent of N; ' +
        'full = registry revision bumped before each run, loads every workload/placement/runtime; all workloads placed and sticky, so it plans nothing (linear in N)',
      totalBenchMs: 0,
    };
    report.totalBenchMs = round(Number(process.hrtime.bigint() - started) / 1e6, 0);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    await db.end();
    await postgres.stop();
    fs.rmSync(tmpDir, { recursive: true, force: true });
    // as root the cluster may live outside tmpDir (see scripts/postgres.ts)
    if (!postgres.dataDir.startsWith(tmpDir)) fs.rmSync(postgres.dataDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
