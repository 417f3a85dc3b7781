// `npm test`: the whole suite as two jest runs side by side on one set of shared servers
// (harness/test-lanes.ts). The stack files (test/integration, test/e2e) take two jest workers at
// normal priority: their evidence judges latency, and on two cores a third stack file's load was
// judged a regression (README, "Test it"). The rest (test/unit, test/component, test/workflow:
// drivers, replays and pure code, none judging a stack's latency) run one file at a time in the CPU
// those two leave idle, instead of after them. The Temporal dev server, PostgreSQL, Kafka broker and
// Docker engine are started here, at normal priority; test/support/global-setup.ts finds them in
// SCALEGATE_TEST_ENV_FILE and starts none of its own.
//
// `npm test -- <jest arguments>` (a file, `-t`) is one plain jest run instead.
import { spawn } from 'node:child_process';
import { ROOT } from '../embedded/processes';
import { startSharedServers } from '../harness/shared-servers';
import { runLanes, type Lane } from '../harness/test-lanes';

const LANES: Lane[] = [
  { title: 'stack tests (test/integration, test/e2e)', select: ['test/integration/', 'test/e2e/'], workers: 2, priority: 'normal', stream: true },
  { title: 'unit, component and workflow tests (beside them, in idle CPU)', select: ['test/unit/', 'test/component/', 'test/workflow/'], workers: 1, priority: 'idle', stream: false },
];

const write = (text: string) => void process.stderr.write(text);

/** One jest run, as `npx jest` would be (its global setup starts the servers). */
function runJest(args: string[]): Promise<number> {
  const child = spawn(process.execPath, [require.resolve('jest/bin/jest'), '--maxWorkers=2', ...args], { cwd: ROOT, stdio: 'inherit' });
  // The terminal's Ctrl-C reaches jest itself; a SIGTERM to this process alone is passed on.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
}

const args = process.argv.slice(2);
const run = args.length
  ? runJest(args)
  : runLanes({
    lanes: LANES,
    startServers: () => startSharedServers({ prefix: 'scalegate-test', kafka: true, containers: true, log: (line) => write(`[test servers] ${line}\n`) }),
    write,
  });
run.then(
  (code) => process.exit(code),
  (error: unknown) => {
    write(`npm test: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
    process.exit(1);
  },
);
