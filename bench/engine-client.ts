// bench/engine-client: `npm run bench:engine-client` (tsx bench/engine-client.ts [N]) prints one JSON object.
//
// How the agent's container driver reaches its engine, chosen on evidence (issue 34: "dockerode vs
// the engine API over undici, measured"): the same three Engine API calls the driver makes most
// (GET /_ping, GET /containers/{id}/json, GET /containers/json filtered by a label) against one
// running container on a real dockerd (Debian's docker.io, started here with a folder of its own),
// through
//   - node-http: one request per call over node:http (the driver's transport before this bench: the reference);
//   - undici: agent/drivers/engine.ts as the driver runs it, one keep-alive undici Client on the socket;
//   - dockerode: the maintained Docker client library (docker-modem underneath).
// N rounds (default 300) of the three calls per client, clients in a rotating order each round.
// Per client: the median wall time of a call, the client's CPU per call (process.cpuUsage over its
// calls), and what it adds to an install (packages and bytes of its dependency tree, from a
// separate install of both into ~/.cache/scalegate/bench-engine-clients; dockerode is loaded from
// there, the project does not depend on it).
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../agent/drivers/engine';
import { BUSYBOX_WEB, containerSupportMissing, ensureBusyboxImage, startContainers } from '../embedded/container-engine';

const N = Number(process.argv[2] ?? 300);
const CLIENT_VERSIONS = { undici: '7.30.2', dockerode: '4.0.9' };
const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'scalegate', 'bench-engine-clients');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
const log = (line: string) => process.stderr.write(`[bench:engine-client] ${line}\n`);

type Call = 'ping' | 'inspect' | 'list';
type Client = Record<Call, () => Promise<unknown>>;

/** Installs the two clients into the bench's own folder once (npm registry), and loads them from there. */
function loadClients(): { require: NodeRequire; footprint: Record<string, { packages: number; bytes: number }> } {
  const installed = path.join(CACHE, 'node_modules');
  const want = Object.entries(CLIENT_VERSIONS).map(([name, version]) => `${name}@${version}`);
  const has = (name: string, version: string) => {
    try {
      return (JSON.parse(fs.readFileSync(path.join(installed, name, 'package.json'), 'utf8')) as { version: string }).version === version;
    } catch {
      return false;
    }
  };
  if (!Object.entries(CLIENT_VERSIONS).every(([name, version]) => has(name, version))) {
    log(`installing ${want.join(', ')} into ${CACHE}`);
    fs.mkdirSync(CACHE, { recursive: true });
    fs.writeFileSync(path.join(CACHE, 'package.json'), '{"private":true}\n');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--omit=optional', '--prefix', CACHE, ...want], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  // What each adds to an install: the packages of its own dependency tree and their bytes on disk.
  const lock = JSON.parse(fs.readFileSync(path.join(CACHE, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dependencies?: Record<string, string> }> };
  const footprint: Record<string, { packages: number; bytes: number }> = {};
  for (const name of Object.keys(CLIENT_VERSIONS)) {
    const tree = new Set<string>();
    const visit = (pkg: string) => {
      if (tree.has(pkg) || !lock.packages[`node_modules/${pkg}`]) return;
      tree.add(pkg);
      for (const dep of Object.keys(lock.packages[`node_modules/${pkg}`].dependencies ?? {})) visit(dep);
    };
    visit(name);
    const bytes = [...tree].reduce((n, pkg) => n + Number(execFileSync('du', ['-sb', path.join(installed, pkg)], { encoding: 'utf8' }).split('\t')[0]), 0);
    footprint[name] = { packages: tree.size, bytes };
  }
  return { require: createRequire(path.join(CACHE, 'package.json')), footprint };
}

async function main(): Promise<void> {
  const missing = containerSupportMissing();
  if (missing) throw new Error(`containers cannot run here: ${missing}`);
  const { require: load, footprint } = loadClients();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-bench-engine-client-'));
  const containers = await startContainers({ dir: path.join(dir, 'containers'), log });
  try {
    const { pinned } = await ensureBusyboxImage({ engine: containers.engine, registry: containers.registry, ...BUSYBOX_WEB, workDir: dir });
    const socketPath = containers.engine.socketPath;
    const ours = createEngine(socketPath);
    const label = { 'io.scalegate.bench': String(process.pid) };
    await ours.ensureNetwork('scalegate-bench');
    const id = await ours.create({
      name: `scalegate-bench-${process.pid}`, image: pinned, command: ['sleep', '3600'], env: {}, labels: label, publish: {}, network: 'scalegate-bench',
    });
    await ours.start(id);

    // node:http as the driver called it before: a request per call, the default agent.
    const get = (pathname: string) => new Promise<unknown>((resolve, reject) => {
      http.get({ socketPath, path: `/v1.41${pathname}` }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`node:http GET ${pathname}: ${res.statusCode} ${text}`));
          else resolve(pathname === '/_ping' ? text : JSON.parse(text));
        });
        res.on('error', reject);
      }).on('error', reject);
    });
    const Dockerode = load('dockerode') as new (options: { socketPath: string; version: string }) => {
      ping(): Promise<unknown>; getContainer(id: string): { inspect(): Promise<unknown> }; listContainers(options: unknown): Promise<unknown>;
    };
    const docker = new Dockerode({ socketPath, version: 'v1.41' });
    const filters = JSON.stringify({ label: Object.entries(label).map(([k, v]) => `${k}=${v}`) });
    const clients: Record<string, Client> = {
      'node-http': { ping: () => get('/_ping'), inspect: () => get(`/containers/${id}/json`), list: () => get(`/containers/json?all=1&filters=${encodeURIComponent(filters)}`) },
      undici: { ping: () => ours.ping(), inspect: () => ours.inspect(id), list: () => ours.list(label) },
      dockerode: { ping: () => docker.ping(), inspect: () => docker.getContainer(id).inspect(), list: () => docker.listContainers({ all: true, filters }) },
    };
    const names = Object.keys(clients);
    // Every client answers the same thing first (and warms up).
    for (const name of names) {
      const listed = (await clients[name].list()) as { Id: string }[];
      if (listed.length !== 1 || listed[0].Id !== id) throw new Error(`${name} listed ${JSON.stringify(listed).slice(0, 200)}`);
      for (let i = 0; i < 20; i++) for (const call of ['ping', 'inspect', 'list'] as const) await clients[name][call]();
    }
    const wall: Record<string, Record<Call, number[]>> = Object.fromEntries(names.map((n) => [n, { ping: [], inspect: [], list: [] }]));
    const cpuMicros: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
    for (let round = 0; round < N; round++) {
      for (let k = 0; k < names.length; k++) {
        const name = names[(round + k) % names.length];
        const cpu = process.cpuUsage();
        for (const call of ['ping', 'inspect', 'list'] as const) {
          const began = performance.now();
          await clients[name][call]();
          wall[name][call].push(performance.now() - began);
        }
        const used = process.cpuUsage(cpu);
        cpuMicros[name] += used.user + used.system;
      }
    }
    const perClient = Object.fromEntries(names.map((name) => [name, {
      medianMs: Object.fromEntries((['ping', 'inspect', 'list'] as const).map((call) => [call, Math.round(median(wall[name][call]) * 100) / 100])),
      cpuMicrosPerCall: Math.round(cpuMicros[name] / (N * 3)),
      ...(footprint[name] ? { install: footprint[name] } : { install: { packages: 0, bytes: 0, note: 'node:http, in Node itself' } }),
    }]));
    const reference = perClient['node-http'];
    process.stdout.write(`${JSON.stringify({
      bench: 'engine-client', cpus: os.cpus().length, loadAverage: os.loadavg().map((l) => Math.round(l * 10) / 10), rounds: N, engine: 'dockerd (Debian docker.io), API v1.41',
      versions: CLIENT_VERSIONS, clients: perClient,
      toNodeHttp: Object.fromEntries(names.filter((n) => n !== 'node-http').map((name) => [name, {
        wall: Object.fromEntries((['ping', 'inspect', 'list'] as const).map((call) => [call, ratio(perClient[name].medianMs[call], reference.medianMs[call])])),
        cpu: ratio(perClient[name].cpuMicrosPerCall, reference.cpuMicrosPerCall),
      }])),
    }, null, 2)}\n`);
    await ours.remove(id).catch(() => undefined);
  } finally {
    await containers.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
