// Spawning scalegate's own processes (API, worker, agents) as real OS processes running TypeScript
// through tsx (or, in the test stacks, bundled once: harness/entry-bundles.ts), and stopping
// them cleanly. Used by `npm start` and by the integration tests.
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = path.resolve(__dirname, '..');

export interface ServiceProcess {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  stop(graceMs?: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

/** `[wrap…] node [profile] entry args`: the entry bundled, or through tsx's loader in this same process. */
function nodeCommand(options: { name: string; entry: string; args?: string[]; script?: string; wrap?: readonly string[] }): string[] {
  // A bench's CPU profile of one service (node ≥ 20 refuses --cpu-prof in NODE_OPTIONS): one file
  // per thread, written when the service exits (README, the benches).
  const profiled = process.env.SCALEGATE_CPU_PROFILE_DIR && options.name === process.env.SCALEGATE_CPU_PROFILE_SERVICE;
  const profile = profiled ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SCALEGATE_CPU_PROFILE_DIR}`] : [];
  const program = options.script ? [options.script] : ['--import', 'tsx', path.join(ROOT, options.entry)];
  return [...(options.wrap ?? []), process.execPath, ...profile, ...program, ...(options.args ?? [])];
}

/** Starts `entry` (a .ts file under the repo) with tsx; output goes to `output` line by line. */
export function spawnService(options: {
  name: string;
  /** a .ts file under the repo (with `npmScript`: the file that script runs) */
  entry: string;
  args?: string[];
  env: NodeJS.ProcessEnv;
  output?: (name: string, line: string) => void;
  logFile?: string;
  /** `entry` already bundled to JavaScript (the test stacks' processes): run it without tsx */
  script?: string;
  /** the leader of a process group of its own, as a command started from a terminal is (a Ctrl-C signals the whole group) */
  processGroup?: boolean;
  /**
   * A command that execs the service (e.g. `ip netns exec <ns>`: a node on a host of its own,
   * harness/hosts.ts); it must exec, not fork, so that signals reach the service itself.
   */
  wrap?: readonly string[];
  /**
   * Started as a user types it, `npm run <npmScript> -- <args>` (the tests of `npm start`): what
   * package.json's script puts between npm and `entry` is then what runs, and what a signal meets.
   */
  npmScript?: string;
}): ServiceProcess {
  const [command, ...args] = options.npmScript ? ['npm', 'run', options.npmScript, '--', ...(options.args ?? [])] : nodeCommand(options);
  const child = spawn(command!, args, {
    cwd: ROOT,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.processGroup ?? false,
  });
  const log = options.logFile ? fs.createWriteStream(options.logFile, { flags: 'a' }) : null;
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    readline.createInterface({ input: stream }).on('line', (line) => {
      log?.write(`${line}\n`);
      options.output?.(options.name, line);
    });
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    log?.end();
    resolve(code);
  }));
  return {
    name: options.name,
    child,
    exited,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    stop: async (graceMs = 15_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(timer);
    },
  };
}

/** SIGTERM, then SIGKILL once `graceMs` passed; resolves when the process has exited. */
export function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const killTimer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(killTimer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function waitForHttp(url: string, timeoutMs = 60_000, isAlive: () => boolean = () => true): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return;
    } catch {
      // not up yet
    }
    if (!isAlive()) throw new Error(`the process behind ${url} exited`);
    if (Date.now() > deadline) throw new Error(`${url} did not answer 2xx within ${timeoutMs} ms`);
    await sleep(250);
  }
}
