// `npm test`'s runner (scripts/test.ts): the suite as jest runs side by side ("lanes") on one set of
// shared servers, each lane its own jest process with its own workers and CPU priority. A lane's
// output streams, or is kept and printed whole once every lane ended (so two runs' lines never
// interleave); then one summary of all of them. Any lane that fails, or ends without its report,
// fails the whole.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../embedded/processes';
import { sweepStaleHostNetworks } from './hosts';
import { waitFor } from './wait-for';

const JEST = require.resolve('jest/bin/jest');

export interface Lane {
  title: string;
  /** jest's arguments that choose this lane's files (path patterns; a fixture's --config) */
  select: string[];
  workers: number;
  /** 'idle': the lane, and everything it starts, runs only on CPU that nothing else wants */
  priority: 'normal' | 'idle';
  /** true: its output as it comes; false: kept, and printed whole after every lane ended */
  stream: boolean;
}

interface JestReport {
  numTotalTestSuites: number; numPassedTestSuites: number; numFailedTestSuites: number; numPendingTestSuites: number;
  numTotalTests: number; numPassedTests: number; numFailedTests: number; numPendingTests: number; numTodoTests: number;
  snapshot: { total: number };
}

interface LaneEnd {
  code: number;
  /** jest's --json report, null when the lane ended without writing one (killed, or jest did not start) */
  report: JestReport | null;
  seconds: number;
}

/** How a lane at idle priority is started: SCHED_IDLE through util-linux's chrt, else the lowest nice. */
function idlePrefix(): string[] {
  return spawnSync('chrt', ['--idle', '0', 'true']).status === 0 ? ['chrt', '--idle', '0'] : ['nice', '-n', '19'];
}

function startLane(lane: Lane, dir: string, index: number): { child: ChildProcess; ended: Promise<LaneEnd>; log: string | null } {
  const reportFile = path.join(dir, `report-${index}.json`);
  const log = lane.stream ? null : path.join(dir, `output-${index}.log`);
  const command = [
    ...(lane.priority === 'idle' ? idlePrefix() : []),
    process.execPath, JEST, `--maxWorkers=${lane.workers}`, '--json', `--outputFile=${reportFile}`,
    // One worker would run the files inside jest's own process ("in band"), where a handle a file
    // leaves open keeps the lane from ending (one waited 470 s so) and native loggers write past
    // jest. With a memory limit set jest always uses worker processes (@jest/core's
    // shouldRunInBand): a worker that ends a file over 1 GB is replaced, as under `npx jest`.
    ...(lane.workers === 1 ? ['--workerIdleMemoryLimit=1GB'] : []),
    ...lane.select,
  ];
  const out = log ? fs.openSync(log, 'w') : 'inherit';
  // A process group of its own: a stop reaches the lane's workers and what its files started
  // (stacks, brokers), not only jest, whose workers would otherwise run on as orphans.
  const child = spawn(command[0]!, command.slice(1), { cwd: ROOT, stdio: ['ignore', out, out], detached: true });
  if (typeof out === 'number') fs.closeSync(out);
  const startedAt = Date.now();
  const ended = new Promise<LaneEnd>((resolve) => {
    const end = (code: number) => {
      let report: JestReport | null = null;
      try {
        report = JSON.parse(fs.readFileSync(reportFile, 'utf8')) as JestReport;
      } catch {
        // counted as failed below
      }
      resolve({ code, report, seconds: Math.round((Date.now() - startedAt) / 1000) });
    };
    child.once('error', () => end(1));
    child.once('exit', (code) => end(code ?? 1));
  });
  return { child, ended, log };
}

/**
 * SIGTERM to the lane's process group, SIGKILL to what is left of it after `graceMs`; resolves once
 * the group is empty (jest's workers can outlive jest by a moment, or ignore the SIGTERM).
 */
async function stopGroup(child: ChildProcess, graceMs: number): Promise<void> {
  const signal = (name: NodeJS.Signals | 0): boolean => {
    try {
      process.kill(-child.pid!, name);
      return true;
    } catch {
      return false; // ESRCH: no process of the group is left
    }
  };
  const emptyWithin = (ms: number) =>
    waitFor('the lane\'s process group to empty', () => !signal(0), { timeoutMs: ms, intervalMs: 100 }).then(() => true, () => false);
  if (!signal('SIGTERM') || await emptyWithin(graceMs)) return;
  signal('SIGKILL');
  await emptyWithin(5_000);
}

/** jest's own summary lines, for every lane that reported (of `lanes`). */
export function summaryOf(reports: JestReport[], lanes: number, seconds: number): string {
  const sum = (key: Exclude<keyof JestReport, 'snapshot'>) => reports.reduce((total, report) => total + report[key], 0);
  const counts = (failed: number, skipped: number, passed: number, total: number) =>
    [failed && `${failed} failed`, skipped && `${skipped} skipped`, `${passed} passed`, `${total} total`].filter(Boolean).join(', ');
  return [
    `Test Suites: ${counts(sum('numFailedTestSuites'), sum('numPendingTestSuites'), sum('numPassedTestSuites'), sum('numTotalTestSuites'))}`,
    `Tests:       ${counts(sum('numFailedTests'), sum('numPendingTests') + sum('numTodoTests'), sum('numPassedTests'), sum('numTotalTests'))}`,
    `Snapshots:   ${reports.reduce((total, report) => total + report.snapshot.total, 0)} total`,
    `Time:        ${seconds} s`,
    reports.length === lanes ? `Ran all test suites in ${lanes} lanes.` : `Ran the test suites of ${reports.length} of ${lanes} lanes (the rest ended without a report).`,
  ].join('\n');
}

export interface LanesOptions {
  lanes: Lane[];
  /** starts the servers every lane shares (announced to them through the environment); answers how to stop them */
  startServers: () => Promise<{ stop(): Promise<void> }>;
  write: (text: string) => void;
  /** how long a stopped lane's processes get between SIGTERM and SIGKILL (default 10 s) */
  stopGraceMs?: number;
  /** where SIGINT and SIGTERM are heard (default this process) */
  signals?: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
}

/**
 * Runs the lanes side by side, then stops the servers; answers 0 when every lane passed, else 1. A
 * SIGINT or SIGTERM stops the lanes (then the servers, as ever) and answers 130 or 143.
 */
export async function runLanes({ lanes, startServers, write, stopGraceMs = 10_000, signals = process }: LanesOptions): Promise<number> {
  const startedAt = Date.now();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-test-lanes-'));
  let servers: { stop(): Promise<void> } | null = null;
  let running: ReturnType<typeof startLane>[] = [];
  let signalled: NodeJS.Signals | null = null;
  let stops: Promise<void>[] = [];
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = signal;
    write(`npm test: ${signal}, stopping the test runs, then the shared servers\n`);
    stops = running.map((lane) => stopGroup(lane.child, stopGraceMs));
  };
  signals.on('SIGINT', onSignal);
  signals.on('SIGTERM', onSignal);
  let passed = false;
  try {
    servers = await startServers().catch((error: unknown) => {
      // A terminal's Ctrl-C also reaches the servers' own starts (initdb): their failure is the stop asked for.
      if (signalled) return null;
      throw error;
    });
    if (!signalled) {
      running = lanes.map((lane, i) => startLane(lane, dir, i));
      const ends = await Promise.all(running.map((lane) => lane.ended));
      if (!signalled) passed = judge(ends);
    }
  } finally {
    await Promise.all(stops); // every process of a stopped lane gone before the servers they use
    // a stopped lane ran no global teardown: the multi-host stacks' namespaces and links it left
    if (signalled && process.getuid?.() === 0) sweepStaleHostNetworks();
    await servers?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    // heard until the servers are down: a second Ctrl-C must not end this process before that
    signals.off('SIGINT', onSignal);
    signals.off('SIGTERM', onSignal);
  }
  if (signalled) return signalled === 'SIGINT' ? 130 : 143;
  return passed ? 0 : 1;

  /** Each lane's verdict (and its kept output), then the summary; whether every lane passed. */
  function judge(ends: LaneEnd[]): boolean {
    for (const [i, lane] of lanes.entries()) {
      const { code, report, seconds } = ends[i]!;
      const { log } = running[i]!;
      write(`\n== ${lane.title}: ${code === 0 && report ? 'passed' : 'FAILED'} in ${seconds} s${log ? '; its output:' : ' (output above)'}\n`);
      if (log) write(fs.readFileSync(log, 'utf8'));
      if (!report) write(`== ${lane.title}: ended (exit ${code}) without its report\n`);
    }
    const reports = ends.map((end) => end.report).filter((kept): kept is JestReport => kept !== null);
    write(`\n${summaryOf(reports, lanes.length, Math.round((Date.now() - startedAt) / 1000))}\n`);
    return ends.every((end) => end.code === 0 && end.report !== null);
  }
}
