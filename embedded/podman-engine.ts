// podman's Docker-compatible API socket (`podman system service`), for the container driver's
// second engine (issue 34: the driver works against dockerd and against podman). Debian's podman 4.3
// with every piece of its state in a folder of the caller's: its containers.conf, storage.conf and
// registries.conf are written there and named by CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and
// CONTAINERS_REGISTRIES_CONF, so it reads none of /etc/containers and writes none of
// /var/lib/containers or /run: storage (graph root and run root), its database, its file locks
// (instead of the shared-memory ones every podman of the machine shares), its event log and the CNI
// configuration of the networks it creates. Two settings this machine needs (reference/runtimes.md):
// runc as the runtime (crun is not installed with --no-install-recommends, and refuses this hybrid
// cgroup layout), and default ulimits under the sandbox's hard limits (rootful podman asks for
// nofile 1048576, which runc cannot set here). The registries named in `insecureRegistries` are
// reached over plain HTTP: unlike dockerd, podman does not take a registry on 127.0.0.0/8 as insecure.
import fs from 'node:fs';
import path from 'node:path';
import { run, spawnEngine, type RunningEngine } from './container-engine';
import { onPath } from './temporal-cli';

const SERVICE_READY_MS = 30_000;
/** Under the hard limits of this sandbox (`ulimit -Hn` 20000); podman's default asks 1048576. */
const ULIMITS = ['nofile=20000:20000', 'nproc=32768:32768'];

/** Why podman cannot run here (a missing program), or null when it can. */
export function podmanSupportMissing(): string | null {
  for (const program of ['podman', 'runc', 'conmon']) {
    if (!onPath(program)) return `${program} is not installed (apt-get install --no-install-recommends podman)`;
  }
  return null;
}

const toml = (value: string): string => JSON.stringify(value);

/** The three configuration files, in `dir`; answers the environment that makes podman read them. */
export function writePodmanConfig(dir: string, insecureRegistries: string[]): NodeJS.ProcessEnv {
  const files = {
    CONTAINERS_CONF: path.join(dir, 'containers.conf'),
    CONTAINERS_STORAGE_CONF: path.join(dir, 'storage.conf'),
    CONTAINERS_REGISTRIES_CONF: path.join(dir, 'registries.conf'),
  };
  fs.writeFileSync(files.CONTAINERS_CONF, [
    '[containers]',
    `default_ulimits = [${ULIMITS.map(toml).join(', ')}]`,
    '[network]',
    // CNI: Debian's podman 4.3 comes with containernetworking-plugins, not netavark
    'network_backend = "cni"',
    `network_config_dir = ${toml(path.join(dir, 'cni'))}`,
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `events_logfile_path = ${toml(path.join(dir, 'events.log'))}`,
    'lock_type = "file"',
    `tmp_dir = ${toml(path.join(dir, 'tmp'))}`,
    `static_dir = ${toml(path.join(dir, 'storage', 'libpod'))}`,
    `volume_path = ${toml(path.join(dir, 'storage', 'volumes'))}`,
    '',
  ].join('\n'));
  fs.writeFileSync(files.CONTAINERS_STORAGE_CONF, [
    '[storage]',
    'driver = "overlay"',
    `graphroot = ${toml(path.join(dir, 'storage'))}`,
    `runroot = ${toml(path.join(dir, 'run'))}`,
    '[storage.options.overlay]',
    // no private bind mount of the graph root's overlay folder onto itself: the service does not
    // undo it when it stops, and the folder could not be removed after
    'skip_mount_home = "true"',
    '',
  ].join('\n'));
  fs.writeFileSync(files.CONTAINERS_REGISTRIES_CONF, [
    // every image the driver runs is fully qualified (registry/name@digest): no search list
    'unqualified-search-registries = []',
    ...insecureRegistries.flatMap((location) => ['[[registry]]', `location = ${toml(location)}`, 'insecure = true']),
    '',
  ].join('\n'));
  return files;
}

/**
 * Starts `podman system service` on `<dir>/p.sock` with everything under `dir`; resolves once its
 * API answers. stop() removes every container and workload network it holds, then stops it.
 */
export async function startPodmanEngine(options: { dir: string; insecureRegistries?: string[]; log?: (line: string) => void }): Promise<RunningEngine> {
  const missing = podmanSupportMissing();
  if (missing) throw new Error(`podman cannot run here: ${missing}`);
  const dir = path.resolve(options.dir);
  fs.mkdirSync(dir, { recursive: true });
  // unix socket paths are short (108 bytes): the socket gets a short name in the folder
  const socketPath = path.join(dir, 'p.sock');
  fs.rmSync(socketPath, { force: true });
  const env = { ...process.env, ...writePodmanConfig(dir, options.insecureRegistries ?? []) };
  const cniDir = path.join(dir, 'cni');
  let bridges: string[] = [];
  const started = Date.now();
  // --time=0: the service never exits by itself for want of requests
  const running = await spawnEngine({
    name: 'podman system service', program: 'podman', args: ['system', 'service', '--time=0', `unix://${socketPath}`], env,
    socketPath, logFile: path.join(dir, 'podman.log'), readyMs: SERVICE_READY_MS,
    afterStop: () => removeIsolationRules(bridges),
  });
  options.log?.(`podman ready in ${Date.now() - started} ms on unix://${socketPath}`);
  return {
    ...running,
    async stop() {
      bridges = bridgesOf(cniDir); // read before the networks (and their CNI files) are removed
      await running.stop();
    },
  };
}

/** The host bridge interfaces of the networks whose CNI configuration is in `cniDir` (cni-podman1, …). */
function bridgesOf(cniDir: string): string[] {
  let files: string[];
  try {
    files = fs.readdirSync(cniDir).filter((file) => file.endsWith('.conflist'));
  } catch {
    return [];
  }
  return files.flatMap((file) => {
    try {
      const config = JSON.parse(fs.readFileSync(path.join(cniDir, file), 'utf8')) as { plugins?: { type?: string; bridge?: string }[] };
      return (config.plugins ?? []).filter((plugin) => plugin.type === 'bridge' && plugin.bridge).map((plugin) => plugin.bridge!);
    } catch {
      return [];
    }
  });
}

/**
 * The CNI firewall plugin isolates each bridge from the others with two iptables rules (chains
 * CNI-ISOLATION-STAGE-1 and -2) and never removes them, not even with the network: the rules of
 * the bridges this service had are removed here, so a run leaves no rule naming an interface that
 * is gone. (The chains themselves, and the portmap plugin's CNI-HOSTPORT-* chains, are shared by
 * every CNI network of the host and stay, empty of this run's rules.)
 */
async function removeIsolationRules(bridges: string[]): Promise<void> {
  if (bridges.length === 0) return;
  for (const chain of ['CNI-ISOLATION-STAGE-1', 'CNI-ISOLATION-STAGE-2']) {
    const rules = (await run('iptables', ['-S', chain]).catch(() => '')).split('\n');
    for (const rule of rules) {
      if (!rule.startsWith('-A ') || !bridges.some((bridge) => new RegExp(`-[io] ${bridge}( |$)`).test(rule))) continue;
      // the rule as iptables printed it (its comment quoted), deleted through the shell that parses it
      await run('sh', ['-c', `iptables -D ${rule.slice(3)}`]);
    }
  }
}
