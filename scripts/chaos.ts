// `npm run chaos -- --seed S --steps N [--json] [--no-faults]`: one seeded chaos run on a real
// stack of its own (test/chaos/run.ts), judged from outside by test/chaos/checker.ts. Prints each
// step as it happens (stderr) and the report; exits 1 when the checker found a violation, printing
// the seed and the schedule so that `--seed S` replays it.
import { parseArgs } from 'node:util';
import { runChaos } from '../test/chaos/run';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { seed: { type: 'string' }, steps: { type: 'string' }, json: { type: 'boolean' }, 'no-faults': { type: 'boolean' } },
  });
  const seed = Number(values.seed ?? Math.floor(Math.random() * 1_000_000));
  const steps = Number(values.steps ?? 20);
  if (!Number.isInteger(seed) || seed < 0 || !Number.isInteger(steps) || steps < 1 || steps > 10_000) {
    throw new Error('usage: npm run chaos -- --seed <non-negative integer> --steps <1..10000> [--json] [--no-faults]');
  }
  const report = await runChaos({ seed, steps, faults: !values['no-faults'], log: (line) => process.stderr.write(`[chaos ${seed}] ${line}\n`) });
  if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(`seed ${seed}, ${steps} steps in ${Math.round(report.durationMs / 1000)} s: ${report.violations.length} violation(s)\n`);
    process.stdout.write(`faults: ${JSON.stringify(report.faults)}\noperations: ${JSON.stringify(report.operations)}\nrecords: ${JSON.stringify(report.records)}\n`);
    for (const v of report.violations) process.stdout.write(`VIOLATION ${v.check}: ${v.detail}\n`);
    if (report.violations.length) {
      process.stdout.write(`schedule (replay: npm run chaos -- --seed ${seed} --steps ${steps}):\n`);
      for (const step of report.schedule) process.stdout.write(`  ${String(step.index).padStart(3)} +${step.atMs} ms  ${step.step}: ${step.result}\n`);
    }
  }
  process.exitCode = report.violations.length ? 1 : 0;
}

main().catch((error) => {
  process.stderr.write(`chaos: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exitCode = 2;
});
