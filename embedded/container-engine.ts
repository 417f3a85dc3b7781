// A Docker engine and an image registry of our own, for the container driver (DESIGN.md §2, §5):
// Debian's `dockerd` (docker.io) with its data, exec root and API socket in a folder of the run,
// no default bridge and no iptables rules on the host, and Debian's `docker-registry` (the
// distribution registry) on loopback, so images are pushed and pulled by digest for real. Nothing
// comes from a public registry: the test image is a root folder of Debian's busybox-static,
// imported and pushed here (reference/runtimes.md).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createEngine, type Engine } from '../agent/drivers/engine';
import { ImageResolveError, pinImage } from '../lib/image-registry';
import { freePort, stopChild } from './processes';
import { onPath } from './temporal-cli';
import { setTimeout as sleep } from 'node:timers/promises';

const ENGINE_READY_MS = 60_000;
const BUSYBOX = '/bin/busybox';
/** The applets the test image links to busybox. */
const APPLETS = ['sh', 'httpd', 'nc', 'sleep', 'echo', 'cat', 'ls', 'kill', 'true', 'false', 'wget'];

/** Why containers cannot run here (a missing program), or null when they can. */
export function containerSupportMissing(): string | null {
  for (const program of ['dockerd', 'docker', 'docker-registry']) {
    if (!onPath(program)) return `${program} is not installed (apt-get install docker.io docker-registry busybox-static)`;
  }
  if (!fs.existsSync(BUSYBOX)) return `${BUSYBOX} is missing (apt-get install busybox-static)`;
  return null;
}

export interface RunningEngine {
  socketPath: string;
  /** DOCKER_HOST / SCALEGATE_DOCKER_HOST */
  address: string;
  engine: Engine;
  /** removes every container and network this engine holds, then stops it */
  stop(): Promise<void>;
}

/** Polls `ready` (growing pauses up to 500 ms) until it answers true, the process died, or the time is up. */
export async function waitUntil(what: string, timeoutMs: number, ready: () => Promise<boolean>, alive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 20; ; pause = Math.min(500, pause * 2)) {
    if (await ready().catch(() => false)) return;
    if (!alive()) throw new Error(`${what} exited before it answered`);
    if (Date.now() > deadline) throw new Error(`${what} did not answer within ${timeoutMs} ms`);
    await sleep(pause);
  }
}

function logTo(file: string): fs.WriteStream {
  return fs.createWriteStream(file, { flags: 'a' });
}

/**
 * Starts dockerd with everything under `dir`; resolves once its API answers. `ownProcessGroup`: out
 * of the caller's process group, so that a Ctrl-C at the terminal (or a SIGTERM to the group) does
 * not reach it directly: dockerd would stop its containers itself and leave their network's bridge
 * interface behind; the caller's stop() removes them first, then stops it.
 */
export async function startContainerEngine(options: { dir: string; ownProcessGroup?: boolean; log?: (line: string) => void }): Promise<RunningEngine> {
  const dir = path.resolve(options.dir);
  fs.mkdirSync(dir, { recursive: true });
  // unix socket paths are short (108 bytes): the socket gets a short name in the folder
  const socketPath = path.join(dir, 'd.sock');
  await stopLeftEngine(dir, socketPath, options.log);
  const args = [
    '--data-root', path.join(dir, 'data'), '--exec-root', path.join(dir, 'exec'), '--pidfile', path.join(dir, 'dockerd.pid'),
    '-H', `unix://${socketPath}`, '--bridge=none', '--iptables=false', '--ip6tables=false', '--ip-masq=false',
  ];
  const started = Date.now();
  const running = await spawnEngine({ name: 'dockerd', program: 'dockerd', args, socketPath, logFile: path.join(dir, 'dockerd.log'), readyMs: ENGINE_READY_MS, detached: options.ownProcessGroup });
  options.log?.(`docker engine ready in ${Date.now() - started} ms on unix://${socketPath}`);
  return running;
}

/**
 * Spawns an engine's daemon (dockerd, `podman system service`) with its output in `logFile`, and
 * resolves once its API answers on `socketPath` (else stops it and throws naming the log). Its
 * stop() removes every container and workload network first, then stops the daemon.
 */
export async function spawnEngine(options: {
  name: string; program: string; args: string[]; socketPath: string; logFile: string; readyMs: number;
  env?: NodeJS.ProcessEnv; detached?: boolean; afterStop?: () => Promise<void>;
}): Promise<RunningEngine> {
  const child: ChildProcess = spawn(options.program, options.args, { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  const out = logTo(options.logFile);
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  let exited = false;
  child.on('exit', () => { exited = true; });
  const engine = createEngine(options.socketPath);
  await waitUntil(options.name, options.readyMs, async () => { await engine.ping(); return true; }, () => !exited).catch(async (error: unknown) => {
    await stopChild(child, 5_000);
    out.end();
    throw new Error(`${(error as Error).message} (its log: ${options.logFile})`);
  });
  return {
    socketPath: options.socketPath, address: `unix://${options.socketPath}`, engine,
    async stop() {
      if (!exited) await clearEngine(engine);
      await stopChild(child, 15_000);
      out.end();
      await options.afterStop?.();
    },
  };
}

/**
 * Removes every container, then the workload networks: stopped with containers, dockerd would give
 * each its 10 s stop timeout, and it leaves a network's bridge interface behind when it exits.
 */
export async function clearEngine(engine: Engine): Promise<void> {
  const containers = await engine.list({}).catch(() => []);
  await Promise.all(containers.map((c) => engine.remove(c.Id).catch(() => undefined)));
  await engine.removeNetworks().catch(() => undefined);
}

/**
 * A dockerd that a start which was killed (SIGKILL: no stop ran) left running on this folder: its
 * pidfile names a live dockerd of this data root, and a new dockerd would refuse the pidfile. It is
 * ours: cleared and stopped as stop() would have, so this start gets an engine.
 */
async function stopLeftEngine(dir: string, socketPath: string, log?: (line: string) => void): Promise<void> {
  let pid: number;
  let argv: string[];
  try {
    pid = Number(fs.readFileSync(path.join(dir, 'dockerd.pid'), 'utf8').trim());
    argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return; // no pidfile, or its process is gone
  }
  if (!argv.includes(path.join(dir, 'data'))) return;
  log?.(`stopping the Docker engine a previous start left running on ${dir} (pid ${pid})`);
  await clearEngine(createEngine(socketPath));
  const gone = () => {
    try {
      return /\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); // a zombie has exited
    } catch {
      return true;
    }
  };
  process.kill(pid, 'SIGTERM');
  await waitUntil(`the previous dockerd (pid ${pid}) to exit`, 20_000, async () => gone(), () => true).catch(() => {
    if (!gone()) process.kill(pid, 'SIGKILL');
  });
  // dockerd bind-mounts its data root onto itself and a dockerd that finds it mounted already does
  // not unmount it when it stops: the mount the previous one left would outlive every later engine.
  const dataRoot = path.join(dir, 'data');
  const mounted = fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((line) => line.split(' ')[1] === dataRoot);
  if (mounted) await run('umount', [dataRoot], process.env);
}

export interface RunningRegistry {
  /** host:port, as image references name it */
  address: string;
  stop(): Promise<void>;
}

/** Starts Debian's docker-registry on a free loopback port, storing under `dir`. */
export async function startImageRegistry(options: { dir: string; port?: number; log?: (line: string) => void }): Promise<RunningRegistry> {
  const dir = path.resolve(options.dir);
  fs.mkdirSync(dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const config = path.join(dir, 'registry.yml');
  fs.writeFileSync(config, [
    'version: 0.1', 'log:', '  level: warn', 'storage:', '  filesystem:', `    rootdirectory: ${path.join(dir, 'storage')}`,
    '  delete:', '    enabled: true', 'http:', `  addr: 127.0.0.1:${port}`, '',
  ].join('\n'));
  const child = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out = logTo(path.join(dir, 'registry.log'));
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  let exited = false;
  child.on('exit', () => { exited = true; });
  const address = `127.0.0.1:${port}`;
  await waitUntil('docker-registry', 30_000, async () => (await fetch(`http://${address}/v2/`)).ok, () => !exited).catch(async (error: unknown) => {
    await stopChild(child, 5_000);
    out.end();
    throw new Error(`${(error as Error).message} (its log: ${path.join(dir, 'registry.log')})`);
  });
  options.log?.(`image registry ready on ${address}`);
  return { address, stop: async () => { await stopChild(child, 5_000); out.end(); } };
}

/**
 * Builds the busybox test image (`<registry>/<repository>:<tag>`) from a root folder of
 * busybox-static, pushes it, and answers its pinned reference `<registry>/<repository>@sha256:…`.
 * `files` are written into the root first (e.g. an index page).
 */
export async function buildBusyboxImage(options: { engine: RunningEngine; registry: string; repository: string; tag: string; workDir: string; files?: Record<string, string> }): Promise<string> {
  const root = path.join(options.workDir, `${options.repository.replace(/\W/g, '_')}-${options.tag}-root`);
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
  fs.copyFileSync(BUSYBOX, path.join(root, 'bin', 'busybox'));
  fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
  for (const applet of APPLETS) fs.symlinkSync('busybox', path.join(root, 'bin', applet));
  for (const [file, content] of Object.entries(options.files ?? {})) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    // a script (#!) is executable, e.g. a CGI program of httpd
    fs.writeFileSync(path.join(root, file), content, { mode: content.startsWith('#!') ? 0o755 : 0o644 });
  }
  const tagged = `${options.registry}/${options.repository}:${options.tag}`;
  const env = { ...process.env, DOCKER_HOST: options.engine.address };
  try {
    // the root folder as a tar stream straight into `docker import` (~1 s); then the push
    await run('sh', ['-c', 'tar -C "$1" -c . | docker import --change "ENV PATH=/bin" - "$2"', 'sh', root, tagged], env);
    const pushed = await run('docker', ['push', tagged], env);
    const digest = /digest: (sha256:[a-f0-9]{64})/.exec(pushed)?.[1];
    if (!digest) throw new Error(`docker push ${tagged} printed no digest: ${pushed}`);
    return `${options.registry}/${options.repository}@${digest}`;
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

/** Runs a program to its end; answers its output, or throws with it when the exit is not 0. */
export function run(program: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${program} ${args.join(' ')}: exit ${code}: ${output.trim()}`))));
  });
}

/**
 * What `npm start` does about containers: off when asked (SCALEGATE_CONTAINERS=off wins over
 * everything), the user's engine when SCALEGATE_DOCKER_HOST or DOCKER_HOST names one (nothing
 * started, whatever is installed), else its own engine and registry when Docker is here, else off
 * with what is missing.
 */
export function containersChoice(
  settings: { SCALEGATE_CONTAINERS: 'on' | 'off'; SCALEGATE_DOCKER_HOST?: string; DOCKER_HOST?: string },
  missing: () => string | null = containerSupportMissing,
): { off: string } | { yours: string } | { embedded: true } {
  if (settings.SCALEGATE_CONTAINERS === 'off') return { off: 'SCALEGATE_CONTAINERS=off' };
  const yours = settings.SCALEGATE_DOCKER_HOST ?? settings.DOCKER_HOST;
  if (yours) return { yours };
  const why = missing();
  return why ? { off: why } : { embedded: true };
}

/** The busybox image every start serves: httpd on 8080 (`httpd -f -p 8080 -h /www`) answers /www/index.html. */
export const BUSYBOX_WEB = { repository: 'scalegate/web', tag: 'v1', files: { 'www/index.html': 'v1\n' } } as const;
/** Its next version (the demo rolls it out): the same server, another page. */
export const BUSYBOX_WEB_V2 = { repository: 'scalegate/web', tag: 'v2', files: { 'www/index.html': 'v2\n' } } as const;
/**
 * The command that serves the busybox image's /www on the container's port 8080: httpd under a
 * shell that exits on SIGTERM. As PID 1 of its container httpd alone would ignore the engine's
 * SIGTERM (the kernel shields PID 1 from a signal it installs no handler for), and every stop
 * would wait out the task's grace before the SIGKILL.
 */
export const BUSYBOX_HTTPD = ['sh', '-c', 'trap "exit 0" TERM; httpd -f -p 8080 -h /www & wait'];
/** BUSYBOX_HTTPD in words, for the banner. */
export const BUSYBOX_HTTPD_SAID = 'httpd -f -p 8080 -h /www (under sh, which exits on SIGTERM)';

export interface RunningContainers {
  engine: RunningEngine;
  registry: RunningRegistry;
  /** stops the engine (its containers and networks first) and the registry; their data stays in the folder */
  stop(): Promise<void>;
}

/**
 * A Docker engine (`<dir>/engine`) and an image registry (`<dir>/registry`), started in parallel;
 * if one fails, the other is stopped again and the error says which.
 */
export async function startContainers(options: { dir: string; registryPort?: number; ownProcessGroup?: boolean; log?: (line: string) => void }): Promise<RunningContainers> {
  const parts = [
    startContainerEngine({ dir: path.join(options.dir, 'engine'), ownProcessGroup: options.ownProcessGroup, log: options.log }),
    startImageRegistry({ dir: path.join(options.dir, 'registry'), port: options.registryPort, log: options.log }),
  ] as const;
  const [engine, registry] = await Promise.allSettled(parts);
  if (engine.status === 'rejected' || registry.status === 'rejected') {
    await Promise.all([engine.status === 'fulfilled' && engine.value.stop(), registry.status === 'fulfilled' && registry.value.stop()]);
    throw (engine.status === 'rejected' ? engine.reason : (registry as PromiseRejectedResult).reason) as Error;
  }
  return {
    engine: engine.value, registry: registry.value,
    stop: async () => { await Promise.all([engine.value.stop(), registry.value.stop()]); },
  };
}

/**
 * The busybox image `<registry>/<repository>:<tag>` pinned by digest: the registry's when it
 * already has the tag (a state folder's second start builds nothing), else built and pushed now.
 */
export async function ensureBusyboxImage(options: Omit<Parameters<typeof buildBusyboxImage>[0], 'registry'> & { registry: RunningRegistry }): Promise<{ pinned: string; built: boolean }> {
  const tagged = `${options.registry.address}/${options.repository}:${options.tag}`;
  try {
    return { pinned: await pinImage(tagged), built: false };
  } catch (error) {
    if (!(error instanceof ImageResolveError && error.reason === 'missing')) throw error;
  }
  return { pinned: await buildBusyboxImage({ ...options, registry: options.registry.address }), built: true };
}
