// Nodes on hosts of their own (issue 35, DESIGN.md §7): N network namespaces joined by a bridge,
// the test's own, and the faults a network has: a node cut off, one-way cuts, a slow and lossy
// link, a skewed clock. Everything is named `sg<pid>…` (this process's id) and removed by stop(),
// by a process exit hook should the test die first, and by the jest global teardown
// (sweepStaleHostNetworks) for any owner that is gone. Only the namespaces, links and rules made
// here are ever touched: partitions are iptables rules inside a node's own namespace, delays and
// loss sit on its own interface.
//
// Layout: bridge `sg<pid>b` holds 10.<a>.<b>.1/24 on the host side; node i is namespace
// `sg<pid>n<i>`, reached through veth `sg<pid>v<i>` (host side, on the bridge) and `eth0` inside,
// at 10.<a>.<b>.<10+i>. The control plane (API, worker) and the shared servers stay on the host:
// the API listens on the bridge address, and PostgreSQL is reached from the nodes through a relay
// that listens there (harness/relay.ts), so every byte an agent or its tasks exchange with the
// control plane or the database crosses the node's link, and a cut of that link cuts it.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isAlive } from './ports';

/** Debian's libfaketime, preloaded into an agent whose clock a nemesis skews. */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const CUT_CHAIN = 'SGCUT';
const PREFIX = 'sg';

const run = (command: string, args: string[]): string => execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const attempt = (command: string, args: string[]): boolean => {
  try {
    run(command, args);
    return true;
  } catch {
    return false;
  }
};

/** Why this machine cannot host a multi-host stack (not root, a tool missing), or null: tests fail loudly with it, never skip. */
export function hostNetworkSupportMissing(): string | null {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const tool of ['ip', 'iptables', 'tc']) {
    if (!attempt('sh', ['-c', `command -v ${tool}`])) return `${tool} is not installed (Debian's iproute2 and iptables)`;
  }
  return null;
}

/** Why an agent's clock cannot be skewed here (Debian's faketime missing), or null. */
export function clockSkewSupportMissing(): string | null {
  return fs.existsSync(LIBFAKETIME) ? null : `${LIBFAKETIME} is missing (apt-get install faketime)`;
}

export interface HostNode {
  index: number;
  /** the namespace */
  ns: string;
  /** the host side of its link, on the bridge */
  veth: string;
  address: string;
  /** `ip netns exec <ns>`: runs a command on this host */
  wrap: readonly string[];
  /** the file libfaketime reads this node's clock offset from (e.g. "+30s"; "+0" is no skew) */
  clockFile: string;
  /** environment that puts an agent under libfaketime, reading clockFile at every call of the clock */
  clockEnv(): NodeJS.ProcessEnv;
}

export type Cut =
  /** nothing in or out (both directions) */
  | { kind: 'isolate' }
  /** the control plane cannot open connections to the node (the worker's calls, the API's), the node still reaches the API and the database */
  | { kind: 'inbound'; agentPort: number }
  /** the node cannot reach the API (no heartbeats, acks), the worker still reaches it, the database too */
  | { kind: 'to-api'; apiPort: number }
  /** the node and the control plane cannot reach each other either way; its data plane (the database relay) still can */
  | { kind: 'control-plane'; apiPort: number; agentPort: number };

export interface HostNetwork {
  prefix: string;
  bridge: string;
  /** the bridge's address: where the host side (API, relays) listens */
  hostAddress: string;
  nodes: HostNode[];
  /** a cut of `node`'s link (rules in its own namespace; see Cut), replacing any cut it had */
  cut(node: HostNode, cut: Cut): void;
  /** delay and loss on `node`'s link, both ways: tc netem where the kernel has it, else a token bucket plus 5 % random drops; answers which */
  slow(node: HostNode, options?: { delayMs?: number; jitterMs?: number; lossPercent?: number }): 'netem' | 'tbf+statistic';
  /** `node`'s clock (its agents under clockEnv) skewed by `seconds` (0: none) */
  skew(node: HostNode, seconds: number): void;
  /** every cut, delay and loss of `node`'s link removed (its clock is left as it is: skew(node, 0) sets it back) */
  heal(node: HostNode): void;
  stop(): void;
}

const live = new Set<HostNetwork>();
let exitHookInstalled = false;

function remove(prefix: string, nodes: number, bridge: string): void {
  for (let i = 1; i <= nodes; i++) {
    const ns = `${prefix}n${i}`;
    // What still runs in the namespace (a node's agent and tasks, should the test have died) goes first.
    let pids: string[] = [];
    try {
      pids = run('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean);
    } catch {
      // no such namespace
    }
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
    attempt('ip', ['netns', 'del', ns]);
    attempt('ip', ['link', 'del', `${prefix}v${i}`]);
  }
  attempt('ip', ['link', 'del', bridge]);
}

/** A /24 under 10.0.0.0/8 that no route of this host covers yet. */
function freeSubnet(): string {
  const routes = run('ip', ['-4', 'route', 'show']);
  for (let tries = 0; tries < 200; tries++) {
    const a = 100 + crypto.randomInt(0, 150);
    const b = crypto.randomInt(0, 256);
    const subnet = `10.${a}.${b}`;
    if (!routes.includes(`${subnet}.`)) return subnet;
  }
  throw new Error('no free 10.x.y.0/24 for a test bridge');
}

export function createHostNetwork(options: { nodes: number; clockDir: string }): HostNetwork {
  const missing = hostNetworkSupportMissing();
  if (missing) throw new Error(`a multi-host stack cannot run here: ${missing}`);
  // pid plus a counter: two networks of one process never share names; ≤ 15 characters per link name
  const prefix = `${PREFIX}${process.pid}${String.fromCharCode(97 + live.size)}`;
  const bridge = `${prefix}b`;
  const subnet = freeSubnet();
  const hostAddress = `${subnet}.1`;
  const nodes: HostNode[] = [];
  const network: HostNetwork = {
    prefix, bridge, hostAddress, nodes,
    cut(node, cut) {
      const ns = ['netns', 'exec', node.ns];
      run('ip', [...ns, 'iptables', '-F', CUT_CHAIN]);
      const rule = (...args: string[]) => run('ip', [...ns, 'iptables', '-A', CUT_CHAIN, ...args]);
      switch (cut.kind) {
        case 'isolate':
          rule('-i', 'eth0', '-j', 'DROP');
          rule('-o', 'eth0', '-j', 'DROP');
          return;
        case 'inbound':
          rule('-i', 'eth0', '-p', 'tcp', '--dport', String(cut.agentPort), '-j', 'DROP');
          return;
        case 'to-api':
          rule('-o', 'eth0', '-p', 'tcp', '-d', hostAddress, '--dport', String(cut.apiPort), '-j', 'DROP');
          return;
        case 'control-plane':
          rule('-i', 'eth0', '-p', 'tcp', '--dport', String(cut.agentPort), '-j', 'DROP');
          rule('-o', 'eth0', '-p', 'tcp', '--sport', String(cut.agentPort), '-j', 'DROP');
          rule('-o', 'eth0', '-p', 'tcp', '-d', hostAddress, '--dport', String(cut.apiPort), '-j', 'DROP');
          rule('-i', 'eth0', '-p', 'tcp', '-s', hostAddress, '--sport', String(cut.apiPort), '-j', 'DROP');
          return;
        default:
          throw new Error(`unknown cut ${JSON.stringify(cut satisfies never)}`);
      }
    },
    slow(node, o = {}) {
      const delay = `${o.delayMs ?? 200}ms`;
      const jitter = `${o.jitterMs ?? 100}ms`;
      const loss = o.lossPercent ?? 5;
      const both = (args: (dev: string) => string[]) => {
        run('ip', ['netns', 'exec', node.ns, 'tc', ...args('eth0')]);
        run('tc', args(node.veth));
      };
      try {
        both((dev) => ['qdisc', 'replace', 'dev', dev, 'root', 'netem', 'delay', delay, jitter, 'loss', `${loss}%`]);
        return 'netem';
      } catch {
        // This kernel has no sch_netem ("Specified qdisc kind is unknown"): a slow link (token
        // bucket, queueing up to the delay) and random loss by iptables instead.
        both((dev) => ['qdisc', 'replace', 'dev', dev, 'root', 'tbf', 'rate', '256kbit', 'burst', '16kbit', 'latency', delay]);
        const probability = String(loss / 100);
        run('ip', ['netns', 'exec', node.ns, 'iptables', '-A', CUT_CHAIN, '-i', 'eth0', '-m', 'statistic', '--mode', 'random', '--probability', probability, '-j', 'DROP']);
        run('ip', ['netns', 'exec', node.ns, 'iptables', '-A', CUT_CHAIN, '-o', 'eth0', '-m', 'statistic', '--mode', 'random', '--probability', probability, '-j', 'DROP']);
        return 'tbf+statistic';
      }
    },
    skew(node, seconds) {
      fs.writeFileSync(node.clockFile, `${seconds >= 0 ? '+' : '-'}${Math.abs(seconds)}s\n`);
    },
    heal(node) {
      attempt('ip', ['netns', 'exec', node.ns, 'iptables', '-F', CUT_CHAIN]);
      attempt('ip', ['netns', 'exec', node.ns, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
      attempt('tc', ['qdisc', 'del', 'dev', node.veth, 'root']);
    },
    stop() {
      live.delete(network);
      remove(prefix, options.nodes, bridge);
    },
  };
  live.add(network);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const n of live) n.stop();
    });
  }
  try {
    run('ip', ['link', 'add', bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${hostAddress}/24`, 'dev', bridge]);
    run('ip', ['link', 'set', bridge, 'up']);
    for (let i = 1; i <= options.nodes; i++) {
      const ns = `${prefix}n${i}`;
      const veth = `${prefix}v${i}`;
      const address = `${subnet}.${10 + i}`;
      run('ip', ['netns', 'add', ns]);
      run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      run('ip', ['link', 'set', veth, 'master', bridge, 'up']);
      run('ip', ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      run('ip', ['-n', ns, 'route', 'add', 'default', 'via', hostAddress]);
      // The node's own fault chain, empty while its link is whole.
      run('ip', ['netns', 'exec', ns, 'iptables', '-N', CUT_CHAIN]);
      run('ip', ['netns', 'exec', ns, 'iptables', '-I', 'INPUT', '-j', CUT_CHAIN]);
      run('ip', ['netns', 'exec', ns, 'iptables', '-I', 'OUTPUT', '-j', CUT_CHAIN]);
      const clockFile = path.join(options.clockDir, `${ns}.clock`);
      fs.writeFileSync(clockFile, '+0\n');
      nodes.push({
        index: i, ns, veth, address, wrap: ['ip', 'netns', 'exec', ns], clockFile,
        clockEnv: () => ({
          LD_PRELOAD: LIBFAKETIME, FAKETIME_TIMESTAMP_FILE: clockFile, FAKETIME_NO_CACHE: '1',
          // timers (libuv's monotonic clock) run as they do; only the wall clock is skewed
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        }),
      });
    }
  } catch (error) {
    network.stop();
    throw error;
  }
  return network;
}

/** The links and namespaces of networks whose owner process is gone (the jest global teardown's sweep). */
export function sweepStaleHostNetworks(): string[] {
  const names = [
    ...attemptList(['netns', 'list']).map((line) => line.split(' ')[0]!),
    ...attemptList(['-o', 'link', 'show']).map((line) => line.split(':')[1]?.trim().split('@')[0] ?? ''),
  ];
  const removed: string[] = [];
  for (const name of names) {
    const match = /^sg(\d+)[a-z](?:n\d+|v\d+|b)$/.exec(name);
    if (!match || isAlive(Number(match[1]))) continue;
    if (attempt('sh', ['-c', `ip netns pids ${name} 2>/dev/null | xargs -r kill -9`]) && attempt('ip', ['netns', 'del', name])) removed.push(name);
    else if (attempt('ip', ['link', 'del', name])) removed.push(name);
  }
  return removed;
}

function attemptList(args: string[]): string[] {
  try {
    return run('ip', args).split('\n').filter(Boolean);
  } catch {
    return [];
  }
}
