// CLI start benchmark: `npm run bench:cli-start` prints one JSON object.
//
// How long `scalegate --help` takes to answer, run as a person runs it, against `node -e 0` (node's
// own start, the floor) measured in the same run, interleaved: the compiled CLI (cli/bin.js running
// dist/cli/main.js), the same command from source through tsx (SCALEGATE_CLI_FROM_SOURCE=1, what
// every command cost before the bundle), and `npx --no-install scalegate --help` against
// `npx --no-install node -e 0` (npm's own start, which no CLI can avoid). Medians of 7 runs after a
// warm-up each; ratios to the floor, since the machine is small and shared.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'cli', 'bin.js');
const RUNS = 7;

const cases: Record<string, { file: string; args: string[]; env?: Record<string, string> }> = {
  nodeFloor: { file: process.execPath, args: ['-e', '0'] },
  compiled: { file: process.execPath, args: [BIN, '--help'] },
  fromSource: { file: process.execPath, args: [BIN, '--help'], env: { SCALEGATE_CLI_FROM_SOURCE: '1' } },
  npxFloor: { file: 'npx', args: ['--no-install', 'node', '-e', '0'] },
  npx: { file: 'npx', args: ['--no-install', 'scalegate', '--help'] },
};

function timeOnce(c: (typeof cases)[string]): number {
  const started = process.hrtime.bigint();
  execFileSync(c.file, c.args, { cwd: ROOT, env: { ...process.env, ...c.env }, stdio: 'ignore' });
  return Number(process.hrtime.bigint() - started) / 1e6;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

function main(): void {
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  for (const c of Object.values(cases)) timeOnce(c); // warm-up, and the bundle built if stale
  for (let i = 0; i < RUNS; i++) for (const [name, c] of Object.entries(cases)) samples[name].push(timeOnce(c));
  const ms = Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, Math.round(median(values))]));
  const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
  console.log(JSON.stringify({
    benchmark: 'cli-start', runs: RUNS, loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100), medianMs: ms,
    compiledOverNodeFloor: ratio(ms.compiled, ms.nodeFloor), fromSourceOverCompiled: ratio(ms.fromSource, ms.compiled),
    npxOverNpxFloor: ratio(ms.npx, ms.npxFloor), compiledUnder300Ms: ms.compiled < 300,
  }, null, 2));
}

main();
