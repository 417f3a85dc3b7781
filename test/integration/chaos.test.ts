// The CI subset of the chaos suite (issue 20): a fixed seed (3, whose run found the emptied-placement
// bug; one seed keeps CI under its 10 minutes) of the seeded schedule of operations and
// faults (harness/chaos/schedule.ts) on a stack of its own (two APIs behind a balancer, two workers,
// three agents, its own PostgreSQL and Temporal), judged from outside by harness/chaos/checker.ts.
// A violation fails with the seed and the schedule: `npm run chaos -- --seed S --steps N` replays it.
import { runChaos } from '../../harness/chaos/run';

const SEEDS = [3];
const STEPS = 10;

/** The run's figures on one JSON line in CI's log: where a slow run's time went (the schedule, the checker's waits). */
function reportLine(report: Awaited<ReturnType<typeof runChaos>>, lines: string[], extra: Record<string, unknown> = {}): void {
  const lastStepAtMs = report.schedule.length ? report.schedule[report.schedule.length - 1].atMs : 0;
  console.log(JSON.stringify({
    seed: report.seed, steps: report.steps, durationMs: report.durationMs, lastStepAtMs, faults: report.faults, operations: report.operations, ...extra,
    settling: lines.filter((line) => /: (not )?settled in \d+ ms$/.test(line)),
  }));
}

test.each(SEEDS)('seed %i: every operation ends, nothing lost or doubled, placement = desired = live tasks', async (seed) => {
  const lines: string[] = [];
  const report = await runChaos({ seed, steps: STEPS, log: (line) => lines.push(line) });
  const replay = `npm run chaos -- --seed ${seed} --steps ${STEPS}\n${report.schedule.map((s) => `  +${s.atMs} ms ${s.step}: ${s.result}`).join('\n')}\nthe stack's logs: ${report.logFile}`;
  expect({ violations: report.violations, replay: report.violations.length ? replay : '' }).toEqual({ violations: [], replay: '' });
  // It did run what it says: faults and operations happened, records flowed.
  expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  expect(Object.keys(report.operations).length).toBeGreaterThan(0);
  expect(report.records.orders).toBeGreaterThan(0);
  expect(report.records.clicks).toBeGreaterThan(0);
  reportLine(report, lines);
}, 600_000);

// The same suite with each agent on a host of its own (network namespaces on a bridge,
// harness/host-stack.ts) and the network nemeses in the schedule (issue 35): seed 1862's six
// steps freeze an agent, skew another's clock and isolate its host past the lease while two scales
// run, then slow and drop a link; each is healed before the checker, which also looks for two live
// owners in the sink, revoked tasks still placed, and a skewed-clock node declared LOST. (Chosen
// among the seeds with a cut past the lease, a slow link and a skew for ending soonest: CI's budget.)
const NETWORK_SEED = 1862;
const NETWORK_STEPS = 6;

test(`seed ${NETWORK_SEED} on hosts of their own, with partitions, a slow link and a skewed clock: the same verdict`, async () => {
  const lines: string[] = [];
  const report = await runChaos({ seed: NETWORK_SEED, steps: NETWORK_STEPS, network: true, log: (line) => lines.push(line) });
  const replay = `npm run chaos -- --network --seed ${NETWORK_SEED} --steps ${NETWORK_STEPS}\n${report.schedule.map((s) => `  +${s.atMs} ms ${s.step}: ${s.result}`).join('\n')}\nthe stack's logs: ${report.logFile}`;
  expect({ violations: report.violations, replay: report.violations.length ? replay : '' }).toEqual({ violations: [], replay: '' });
  // The nemeses did happen, each healed (with its time), and records flowed.
  const kinds = (report.nemeses ?? []).map((n) => n.kind);
  expect(kinds).toEqual(expect.arrayContaining(['clock-skew', 'partition isolate', 'slow-link']));
  expect((report.nemeses ?? []).every((n) => n.toMs !== null && n.toMs > n.fromMs)).toBe(true);
  expect(report.records.orders).toBeGreaterThan(0);
  reportLine(report, lines, { writesRefused: report.writesRefused, nemeses: report.nemeses });
}, 600_000);
