// `npm run chaos -- --seed S --steps N [--json] [--no-faults] [--break drain-skips-commit]`: one
// seeded chaos run on a real stack of its own (harness/chaos/run.ts), judged from outside by
// harness/chaos/checker.ts. Prints each step as it happens (stderr) and the report; exits 1 when the
// checker found a violation, printing the seed and the schedule so that `--seed S` replays it.
//
// `--seeds A-B` is the long run: seeds A..B one after another (a stack each), then one summary of
// the faults injected, the operations by final status and every violation with its seed
// (`--out F` keeps that summary in F after every seed, so a long run stopped early still has it).
// `--break` runs a deliberately broken build, to show the checker catches it. `--network` puts each
// agent on a host of its own (network namespaces on a bridge, root only) and adds the network
// nemeses: partitions (both ways, one way, from the control plane), a slow and lossy link, a skewed
// clock, the control plane cut from PostgreSQL or Temporal (issue 35).
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { runChaos, type ChaosReport } from '../harness/chaos/run';

const USAGE = 'usage: npm run chaos -- (--seed <n> | --seeds <a>-<b>) --steps <1..10000> [--json] [--out summary.json] [--no-faults] [--network] [--break drain-skips-commit|owner-fence-unchecked]';
const BREAKS = ['drain-skips-commit', 'owner-fence-unchecked'] as const;

function seedsOf(values: { seed?: string; seeds?: string }): number[] {
  if (values.seeds !== undefined) {
    const match = /^(\d{1,9})-(\d{1,9})$/.exec(values.seeds);
    const [from, to] = match ? [Number(match[1]), Number(match[2])] : [NaN, NaN];
    if (!(to >= from && to - from < 10_000)) throw new Error(USAGE);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  }
  const seed = Number(values.seed ?? Math.floor(Math.random() * 1_000_000));
  if (!Number.isInteger(seed) || seed < 0) throw new Error(USAGE);
  return [seed];
}

function printReport(report: ChaosReport): void {
  const { seed, steps } = report;
  process.stdout.write(`seed ${seed}, ${steps} steps in ${Math.round(report.durationMs / 1000)} s: ${report.violations.length} violation(s)\n`);
  process.stdout.write(`faults: ${JSON.stringify(report.faults)}\noperations: ${JSON.stringify(report.operations)}\nrecords: ${JSON.stringify(report.records)}\n`);
  for (const v of report.violations) process.stdout.write(`VIOLATION ${v.check}: ${v.detail}\n`);
  if (report.logFile) process.stdout.write(`the stack's logs: ${report.logFile}\n`);
  if (report.violations.length) {
    process.stdout.write(`schedule (replay: npm run chaos -- --seed ${seed} --steps ${steps}):\n`);
    for (const step of report.schedule) process.stdout.write(`  ${String(step.index).padStart(3)} +${step.atMs} ms  ${step.step}: ${step.result}\n`);
  }
}

/** The long run's summary: totals over every seed, and each violation with the seed that replays it. */
function summarise(reports: ChaosReport[]) {
  const faults: Record<string, number> = {};
  let writesRefused = 0;
  const operations: Record<string, Record<string, number>> = {};
  for (const report of reports) {
    for (const [fault, n] of Object.entries(report.faults)) faults[fault] = (faults[fault] ?? 0) + n;
    writesRefused += report.writesRefused ?? 0;
    for (const [type, outcomes] of Object.entries(report.operations)) {
      for (const [outcome, n] of Object.entries(outcomes)) (operations[type] ??= {})[outcome] = (operations[type][outcome] ?? 0) + n;
    }
  }
  return {
    seeds: reports.map((r) => r.seed),
    steps: reports[0]?.steps ?? 0,
    faults,
    operations,
    writesRefused,
    records: reports.reduce((sum, r) => ({ orders: sum.orders + r.records.orders, clicks: sum.clicks + r.records.clicks }), { orders: 0, clicks: 0 }),
    violations: reports.flatMap((r) => r.violations.map((v) => ({ seed: r.seed, ...v }))),
    seedsWithViolations: reports.filter((r) => r.violations.length).map((r) => r.seed),
    durationMs: reports.reduce((sum, r) => sum + r.durationMs, 0),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' }, seeds: { type: 'string' }, steps: { type: 'string' },
      json: { type: 'boolean' }, out: { type: 'string' }, 'no-faults': { type: 'boolean' }, break: { type: 'string' }, network: { type: 'boolean' },
    },
  });
  const seeds = seedsOf(values);
  const steps = Number(values.steps ?? 20);
  if (!Number.isInteger(steps) || steps < 1 || steps > 10_000) throw new Error(USAGE);
  if (values.break !== undefined && !(BREAKS as readonly string[]).includes(values.break)) throw new Error(USAGE);
  const testBreak = values.break as (typeof BREAKS)[number] | undefined;

  const reports: ChaosReport[] = [];
  for (const seed of seeds) {
    const started = Date.now();
    // A run that could not even finish (its stack did not start, say) is a violation of its seed, not the end of a long run.
    const report = await runChaos({ seed, steps, faults: !values['no-faults'], network: values.network, testBreak, log: (line) => process.stderr.write(`[chaos ${seed}] ${line}\n`) })
      .catch((error: Error): ChaosReport => ({
        seed, steps, schedule: [], faults: {}, operations: {}, records: { orders: 0, clicks: 0 },
        violations: [{ check: 'run-error', detail: error.message }], durationMs: Date.now() - started,
      }));
    reports.push(report);
    if (values.out) fs.writeFileSync(values.out, `${JSON.stringify(summarise(reports), null, 2)}\n`);
    if (seeds.length > 1) process.stderr.write(`[chaos] seed ${seed}: ${report.violations.length} violation(s) in ${Math.round(report.durationMs / 1000)} s\n`);
    else if (!values.json) printReport(report);
  }
  if (values.json) process.stdout.write(`${JSON.stringify(seeds.length > 1 ? summarise(reports) : reports[0], null, 2)}\n`);
  else if (seeds.length > 1) {
    const summary = summarise(reports);
    process.stdout.write(`${seeds.length} seeds × ${steps} steps in ${Math.round(summary.durationMs / 1000)} s: ${summary.violations.length} violation(s)\n`);
    process.stdout.write(`faults: ${JSON.stringify(summary.faults)}\noperations: ${JSON.stringify(summary.operations)}\n`);
    for (const v of summary.violations) process.stdout.write(`VIOLATION seed ${v.seed} ${v.check}: ${v.detail}\n`);
  }
  process.exitCode = reports.some((r) => r.violations.length) ? 1 : 0;
}

main().catch((error) => {
  process.stderr.write(`chaos: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exitCode = 2;
});
