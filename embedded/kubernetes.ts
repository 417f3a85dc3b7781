// The Kubernetes control plane the Kubernetes runtime's tests run against (issue 37): etcd 3.6.8,
// kube-apiserver, kube-controller-manager, kube-scheduler 1.36.1 and kwok 0.8.0, with kwok's
// stages file, in `<cache>/kubernetes-1.36.1/` (the cache root of the Temporal CLI and the Kafka
// jars). Provisioned once, in order:
//   1. already there (every binary and the stages file present): nothing to do;
//   2. a prebuilt tarball of exactly those files (SCALEGATE_KUBERNETES_TARBALL, else
//      ../shared/cache/kubernetes-1.36.1-linux-amd64.tar.xz beside the repo), checked against its
//      sha256, unpacked into a staging folder and renamed into place;
//   3. compiled from the Go module proxy by scripts/kubernetes-build.sh (about 30 min on 2 cores),
//      with Debian's golang installed where no `go` is on PATH, and Go 1.26.8 itself fetched as the
//      module golang.org/toolchain where that Go is older (ensureGo).
// The embedded default (npm start) never starts Kubernetes: a user points SCALEGATE_KUBECONFIG at theirs.
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './processes';
import { cacheRoot, onPath } from './temporal-cli';

export const KUBERNETES_VERSION = '1.36.1';
export const KUBERNETES_BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;
export const KWOK_STAGES = 'kwok-stages.yaml';
const TARBALL = `kubernetes-${KUBERNETES_VERSION}-linux-amd64.tar.xz`;
const TARBALL_SHA256 = '24dde172c5187730e7f84a7e79fd26e77e13e9dab631c7dd3963d9734f539d4c';
/** the Go release the tarball was built with; kwok 0.8.0 needs ≥ 1.26 */
const GO_TOOLCHAIN = 'go1.26.8';

export function kubernetesDir(): string {
  return path.join(cacheRoot(), `kubernetes-${KUBERNETES_VERSION}`);
}

export interface KubernetesInstall {
  dir: string;
  source: 'cache' | 'tarball' | 'go-build';
}

function complete(dir: string): boolean {
  return [...KUBERNETES_BINARIES, KWOK_STAGES].every((file) => fs.existsSync(path.join(dir, file)));
}

/** What is missing to run the control plane here without provisioning (null: nothing). */
export function kubernetesMissing(): string | null {
  return complete(kubernetesDir()) ? null : `the Kubernetes binaries are not in ${kubernetesDir()} (npx tsx scripts/kubernetes.ts provisions them)`;
}

/**
 * The prebuilt tarball, where one is present: the env var's, else shared/cache beside the repo, else
 * beside the checkout this one was cloned from (a CI clone in a temporary folder of a local checkout).
 */
export function kubernetesTarball(): string | null {
  const origin = localOrigin();
  const candidates = [
    process.env.SCALEGATE_KUBERNETES_TARBALL, path.join(ROOT, '..', 'shared', 'cache', TARBALL), origin ? path.join(origin, '..', 'shared', 'cache', TARBALL) : undefined,
  ];
  return candidates.find((file): file is string => !!file && fs.existsSync(file)) ?? null;
}

/** The folder this checkout was cloned from, when its origin is a local path (null otherwise). */
function localOrigin(): string | null {
  try {
    const url = execFileSync('git', ['-C', ROOT, 'config', '--get', 'remote.origin.url'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const folder = url.startsWith('file://') ? url.slice('file://'.length) : url;
    return path.isAbsolute(folder) && fs.existsSync(folder) ? folder : null;
  } catch {
    return null;
  }
}

function sha256(file: string): string {
  const hash = crypto.createHash('sha256');
  const fd = fs.openSync(file, 'r');
  const buffer = Buffer.alloc(1 << 20);
  try {
    for (let n = fs.readSync(fd, buffer); n > 0; n = fs.readSync(fd, buffer)) hash.update(buffer.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest('hex');
}

/** Fills a staging folder and renames it into place, so a concurrent start never sees half of it. */
function installStaged(fill: (staging: string) => void): void {
  const target = kubernetesDir();
  fs.mkdirSync(path.dirname(target), { recursive: true });
  const staging = `${target}.${process.pid}.tmp`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging);
  try {
    fill(staging);
    if (!complete(staging)) throw new Error(`provisioning left ${staging} without every one of ${[...KUBERNETES_BINARIES, KWOK_STAGES].join(', ')}`);
    fs.rmSync(target, { recursive: true, force: true });
    fs.renameSync(staging, target);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], env });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}`);
}

function fromTarball(tarball: string, log: (line: string) => void): void {
  const digest = sha256(tarball);
  if (digest !== TARBALL_SHA256) throw new Error(`${tarball}: sha256 ${digest}, expected ${TARBALL_SHA256}`);
  log(`unpacking ${tarball}`);
  installStaged((staging) => {
    run('tar', ['-xJf', tarball, '-C', staging]);
    // the tarball may hold the files in one top folder: bring them up
    const entries = fs.readdirSync(staging);
    if (!complete(staging) && entries.length === 1 && fs.statSync(path.join(staging, entries[0])).isDirectory()) {
      const inner = path.join(staging, entries[0]);
      for (const file of fs.readdirSync(inner)) fs.renameSync(path.join(inner, file), path.join(staging, file));
      fs.rmdirSync(inner);
    }
  });
}

/** `go version`'s minor release (1.19 → 19), or 0 when it cannot be read. */
function goMinor(go: string): number {
  const out = spawnSync(go, ['version'], { encoding: 'utf8' }).stdout ?? '';
  return Number(/go1\.([0-9]+)/.exec(out)?.[1] ?? 0);
}

/**
 * A Go that builds kwok 0.8.0 (≥ 1.26): the one on PATH (Debian's golang-go where there is none).
 * Go ≥ 1.21 switches to GO_TOOLCHAIN itself (GOTOOLCHAIN); an older one (Debian 12's is 1.19)
 * fetches that toolchain as the Go module golang.org/toolchain from the module proxy, unpacked
 * into the cache (its files lose their exec bits in the module zip: set again, as cmd/go does).
 */
export function ensureGo(log: (line: string) => void): { go: string; env: NodeJS.ProcessEnv } {
  let go = onPath('go') ?? (fs.existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!go) {
    log('no go on PATH: installing Debian\'s golang-go');
    run('apt-get', ['update', '-qq']);
    run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'golang-go'], { ...process.env, DEBIAN_FRONTEND: 'noninteractive' });
    go = onPath('go');
    if (!go) throw new Error('apt-get installed golang-go but no go is on PATH');
  }
  if (goMinor(go) >= 21) return { go, env: { GOTOOLCHAIN: GO_TOOLCHAIN } };
  const root = path.join(cacheRoot(), GO_TOOLCHAIN);
  if (!fs.existsSync(path.join(root, 'bin', 'go'))) {
    const module = `golang.org/toolchain@v0.0.1-${GO_TOOLCHAIN}.linux-amd64`;
    log(`${go} is older than 1.21: fetching ${module} from the Go module proxy`);
    const download = spawnSync(go, ['mod', 'download', '-json', module], { encoding: 'utf8', env: { ...process.env, GOFLAGS: '-mod=mod' } });
    const dir = download.status === 0 ? (JSON.parse(download.stdout) as { Dir?: string }).Dir : undefined;
    if (!dir) throw new Error(`go mod download ${module} failed: ${download.stderr || download.stdout}`);
    const staging = `${root}.${process.pid}.tmp`;
    fs.cpSync(dir, staging, { recursive: true });
    for (const sub of ['bin', ...fs.readdirSync(path.join(staging, 'pkg', 'tool')).map((d) => path.join('pkg', 'tool', d))]) {
      for (const file of fs.readdirSync(path.join(staging, sub))) fs.chmodSync(path.join(staging, sub, file), 0o755);
    }
    fs.chmodSync(staging, 0o755);
    fs.renameSync(staging, root);
  }
  return { go: path.join(root, 'bin', 'go'), env: { GOTOOLCHAIN: 'local', GOROOT: root } };
}

function fromGoBuild(log: (line: string) => void): void {
  const { go, env } = ensureGo(log);
  log(`compiling from the Go module proxy with ${go} (${GO_TOOLCHAIN}; about 30 min on 2 cores)`);
  installStaged((staging) => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kubernetes-build-'));
    try {
      run('bash', [path.join(ROOT, 'scripts', 'kubernetes-build.sh')], {
        ...process.env, ...env, OUT: staging, WORK: work, PATH: `${path.dirname(go)}${path.delimiter}${process.env.PATH ?? ''}`,
      });
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
}

/**
 * The binaries in the cache, provisioned from the tarball or compiled the first time. Idempotent.
 * `compile: false` (a test run) refuses the half-hour compile, naming the script that does it.
 */
export function ensureKubernetes(log: (line: string) => void = () => {}, options: { compile?: boolean } = {}): KubernetesInstall {
  const dir = kubernetesDir();
  if (complete(dir)) return { dir, source: 'cache' };
  const tarball = kubernetesTarball();
  if (tarball) {
    fromTarball(tarball, log);
    return { dir, source: 'tarball' };
  }
  if (options.compile === false) throw new Error(`${kubernetesMissing()}; there is no prebuilt tarball here, so it compiles them (about 30 min)`);
  fromGoBuild(log);
  return { dir, source: 'go-build' };
}
