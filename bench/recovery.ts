// bench/recovery: `npm run bench:recovery` (tsx bench/recovery.ts [runs] [--placement-only]) prints one JSON object.
//
// 1. failover, on a real stack (Temporal dev server, PostgreSQL, API, worker, 4 agent processes, one
//    per zone): a service replica's agent is SIGKILLed; the lease sweeper declares its runtime LOST
//    and recoverRuntime replaces the replica on a survivor. Per run: kill → declared LOST (the
//    runtime's lost_at) and kill → converged (the recovery's convergedAt: the replacement ready),
//    p50/p95 over `runs` (default 10), and p50 as a ratio to the lease TTL. The floor is one lease
//    (a lease must run out) plus up to one sweep interval (a third of the lease).
// 2. placement work, pure and in-process: a fleet of 1,000 runtimes with 10,000 workloads (replicas
//    3, service and consumer, selectors over three zones) placed by a full placement pass; then one
//    runtime is lost and recoverRuntime's decision plus the plan of every affected workload
//    (domain/recovery.ts planRecovery: buildPlan on each decided target), as the prepareRecovery
//    activity runs them on one pass, is timed against a full placement pass
//    (computePlacement for every workload on one thread, no key cache). `recoveryMs` starts from
//    no kept keys (it hashes its own); `recoveryWithKeptKeysMs` has the keys the worker process kept
//    from the full pass. One warm-up, then 5 rounds of the three in turn (a busy spell of the shared
//    machine falls on all of them); the median of each.
import os from 'node:os';
import path from 'node:path';
import { beginPlacementPass, computePlacement, RendezvousKeyCache } from '../domain/placement';
import { planRecovery } from '../domain/recovery';
import { seededRandom } from '../lib/seeded-random';
import type { Placement, Runtime, Workload } from '../protocol';
import { startStack } from '../harness/stack';
import { startSharedServers } from '../harness/shared-servers';
import type { RecoveryStatus } from '../workflows/recover-runtime';

const FIXTURE = path.resolve(__dirname, '../harness/fixtures/http-server.js');
const LEASE_TTL_MS = 3000;
const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const ZONES = ['a', 'b', 'c'] as const;
const MEASURED_RUNS = 5;

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
};
const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

// ---------------------------------------------------------------------------------------------
// 1. failover on a real stack

async function failover(runs: number) {
  const servers = await startSharedServers({ prefix: 'scalegate-bench-recovery' });

  const agents = ['a', 'b', 'c', 'd'].map((zone) => ({ id: `bench-${zone}`, labels: { zone } }));
  const stack = await startStack({ leaseTtlMs: LEASE_TTL_MS, agents });
  const toDetected: number[] = [];
  const toConverged: number[] = [];
  try {
    const service = {
      kind: 'service', replicas: 1,
      contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
    };
    await stack.api('PUT', '/v1/workloads/bench', { body: service });
    const placedReady = () => stack.waitFor('bench placed and ready', async () => {
      const placement = (await stack.api('GET', '/v1/workloads/bench', { role: 'viewer' })).body.placement;
      const [assignment] = placement?.assignments ?? [];
      if (!assignment) return null;
      const credential = await stack.credentialOf(assignment.runtimeId);
      const answer = await fetch(`${stack.agents[assignment.runtimeId].url}/v1/tasks/${assignment.taskId}`, { headers: { authorization: `Bearer ${credential}` }, signal: AbortSignal.timeout(2000) }).catch(() => null);
      const task = answer?.ok ? ((await answer.json()) as { state: string; ports?: { public: number } }) : null;
      return task?.state === 'ready' && task.ports ? { runtimeId: assignment.runtimeId as string, port: task.ports.public } : null;
    }, 120_000);

    for (let run = 0; run < runs; run++) {
      const { runtimeId, port } = await placedReady();
      const pid = ((await (await fetch(`http://127.0.0.1:${port}/`)).json()) as { pid: number }).pid;
      const agent = stack.agents[runtimeId];
      const killedAt = Date.now();
      agent.process.kill('SIGKILL');
      await agent.process.exited;
      const handle = stack.temporal.workflow.getHandle(`recover:${runtimeId}`);
      await stack.waitFor(`recover:${runtimeId} ended`, async () => {
        const d = await handle.describe().catch(() => null);
        return d !== null && d.startTime.getTime() >= killedAt && d.status.name !== 'RUNNING';
      }, 120_000);
      const status = (await handle.result()) as RecoveryStatus;
      if (status.outcome !== 'completed' || !status.timings.lostAt || !status.timings.convergedAt) {
        throw new Error(`run ${run}: recovery ended ${status.outcome}: ${status.error ?? JSON.stringify(status.decisions.map((d) => d.summary))}`);
      }
      toDetected.push(Date.parse(status.timings.lostAt) - killedAt);
      toConverged.push(Date.parse(status.timings.convergedAt) - killedAt);
      // The node comes back (registers anew) and the orphaned task process of the killed agent ends.
      await stack.startAgent(agents.find((a) => a.id === runtimeId)!);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  } finally {
    await stack.stop();
    await servers.stop();
  }
  const p50 = percentile(toConverged, 50);
  return {
    what: 'SIGKILL of the agent of a service replica (replicas 1, 4 runtimes in 4 zones) → declared LOST by the lease sweeper → replaced and ready on a survivor',
    runs, leaseTtlMs: LEASE_TTL_MS, sweepIntervalMs: Math.floor(LEASE_TTL_MS / 3),
    killToLostMs: { p50: percentile(toDetected, 50), p95: percentile(toDetected, 95), runs: toDetected },
    killToConvergedMs: { p50, p95: percentile(toConverged, 95), runs: toConverged },
    p50ToLeaseRatio: round(p50 / LEASE_TTL_MS, 2),
    lostToConvergedP50Ms: percentile(toConverged.map((c, i) => c - toDetected[i]), 50),
  };
}

// ---------------------------------------------------------------------------------------------
// 2. placement work: recovering one runtime of 1,000 vs a full placement pass over 10,000 workloads

function makeFleet(count: number): Runtime[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `rt-${String(i).padStart(4, '0')}`, endpoint: `http://10.0.${i >> 8}.${i & 255}:7400`,
    labels: { zone: ZONES[i % ZONES.length] }, slots: 64, status: 'READY' as const,
    leaseExpiresAt: new Date(NOW + 45_000).toISOString(), fence: 1,
  }));
}

function makeWorkloads(count: number): Workload[] {
  const random = seededRandom(count);
  return Array.from({ length: count }, (_, i): Workload => {
    const name = `wl-${String(i).padStart(5, '0')}`;
    const selector = { zone: ZONES[Math.floor(random() * ZONES.length)] };
    return i % 2 === 0
      ? { name, kind: 'service', replicas: 3, selector, revision: 1, retired: false,
          contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
          spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 } }
      : { name, kind: 'consumer', replicas: 3, selector, revision: 1, retired: false,
          contract: { ownership: 'partitioned', partitions: 8, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
          spec: { partitions: 8, source: 'orders', sink: 'orders_out', workMs: 1 } };
  });
}

/** A full placement pass: every workload placed on the fleet, slots accumulated as a real pass would. */
function fullPass(workloads: Workload[], runtimes: Runtime[], keys?: RendezvousKeyCache): Placement[] {
  const pass = beginPlacementPass(runtimes, NOW, { keys });
  const usedSlots: Record<string, number> = {};
  return workloads.map((workload) => {
    const result = computePlacement({ workload, runtimes, nowMs: NOW, pass, usedSlots });
    for (const a of result.assignments) usedSlots[a.runtimeId] = (usedSlots[a.runtimeId] ?? 0) + 1;
    return { workload: workload.name, fence: 1, generation: 1, assignments: result.assignments };
  });
}

/** Runs each one once (warm-up), then MEASURED_RUNS rounds of each in turn, so a busy spell of the machine falls on all of them: median ms of each. */
function timedInTurn<T extends unknown[]>(runs: { [K in keyof T]: () => T[K] }): { medianMs: number[]; results: T } {
  const results = runs.map((run) => run()) as T;
  const samples = runs.map(() => [] as number[]);
  for (let round = 0; round < MEASURED_RUNS; round++) {
    runs.forEach((run, i) => {
      const start = process.hrtime.bigint();
      run();
      samples[i].push(Number(process.hrtime.bigint() - start) / 1e6);
    });
  }
  return { medianMs: samples.map((s) => s.sort((a, b) => a - b)[Math.floor(s.length / 2)]), results };
}

function placementWork() {
  const runtimes = makeFleet(1_000);
  const workloads = makeWorkloads(10_000);
  const placements = fullPass(workloads, runtimes);
  // The runtime holding the most assignments is lost.
  const held: Record<string, number> = {};
  for (const p of placements) for (const a of p.assignments) held[a.runtimeId] = (held[a.runtimeId] ?? 0) + 1;
  const lost = Object.entries(held).sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))[0][0];
  const fleet = runtimes.map((r) => (r.id === lost ? { ...r, status: 'LOST' as const } : r));
  const snapshot = { runtimes: fleet, placements, workloads };
  const recover = (keys?: RendezvousKeyCache) => {
    const pass = beginPlacementPass(fleet, NOW, { keys });
    return { ...planRecovery({ runtimeId: lost, ...snapshot, nowMs: NOW, pass }), digests: pass.digestsComputed };
  };
  const keptKeys = new RendezvousKeyCache();
  fullPass(workloads, runtimes, keptKeys);
  const { medianMs: [fullMs, recoveryMs, withKeptKeysMs], results: [, recovery, withKeptKeys] } = timedInTurn<[Placement[], ReturnType<typeof recover>, ReturnType<typeof recover>]>([
    () => fullPass(workloads, runtimes), () => recover(), () => recover(keptKeys),
  ]);
  const { decisions, plans } = recovery;
  const movedElsewhere = decisions.reduce((n, d) => n + d.decisions.filter((r) => r.to !== null).length, 0);
  const affected = new Set(decisions.map((d) => d.workload));
  const untouched = placements.filter((p) => !affected.has(p.workload)).length;
  return {
    what: 'recoverRuntime\'s decision + the plans of the affected workloads for one lost runtime of 1,000, vs a full placement pass over 10,000 workloads (replicas 3)',
    runtimes: runtimes.length, workloads: workloads.length, lostRuntime: lost,
    assignmentsOnLostRuntime: held[lost], affectedWorkloads: decisions.length, replicasPlacedElsewhere: movedElsewhere,
    workloadsUntouched: untouched, plansWithStartsOrStopsElsewhere: plans.filter((p) => p?.stops.some((s) => s.runtimeId !== lost)).length,
    fullPlacementPassMs: round(fullMs),
    recoveryMs: round(recoveryMs), recoveryDigests: recovery.digests,
    recoveryToFullPassRatio: round(recoveryMs / fullMs, 4),
    recoveryWithKeptKeysMs: round(withKeptKeysMs), recoveryWithKeptKeysDigests: withKeptKeys.digests,
    recoveryWithKeptKeysToFullPassRatio: round(withKeptKeysMs / fullMs, 4),
    method: `one warm-up, then ${MEASURED_RUNS} rounds of full pass, recovery, recovery with kept keys in turn; median of each; process.hrtime.bigint`,
  };
}

async function main() {
  const args = process.argv.slice(2);
  const runs = Number(args.find((a) => /^\d+$/.test(a)) ?? 10);
  const started = Date.now();
  const placement = placementWork();
  const failoverFigures = args.includes('--placement-only') ? null : await failover(runs);
  process.stdout.write(`${JSON.stringify({
    bench: 'recovery', node: process.version, cpus: os.cpus().length,
    failover: failoverFigures ?? 'skipped (--placement-only)',
    placementWork: placement,
    totalBenchMs: Date.now() - started,
  }, null, 2)}\n`);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
