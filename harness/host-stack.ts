// A scalegate stack whose agents are hosts of their own (issue 35 item 2): harness/hosts.ts
// makes N namespaces on a bridge, one agent runs in each (its tasks with it: they are its
// children), bound to and advertising its node's address. The API listens on the bridge address,
// the worker and the shared Temporal, PostgreSQL and Kafka stay on the host side; the agents reach
// PostgreSQL through a relay on the bridge. stop() removes everything, and so does a failed start.
// Kafka crosses the links too: the shared broker advertises 127.0.0.1:<port>, so each node has a
// forwarder on its own loopback at that port (harness/fixtures/tcp-forward.js) to a relay on the bridge.
import fs from 'node:fs';
import path from 'node:path';
import { spawnService, type ServiceProcess } from '../embedded/processes';
import { testEnv } from './env';
import { createHostNetwork, type HostNetwork, type HostNode } from './hosts';
import { startRelay, type Relay } from './relay';
import { startStack, type AgentSpec, type Stack } from './stack';
import { GiveUp, waitFor } from './wait-for';

export interface HostStack {
  stack: Stack;
  network: HostNetwork;
  /** the nodes' way to PostgreSQL (blackhole() cuts the nodes' data plane from it on the host side) */
  postgresRelay: Relay;
  /** runtime id → its host */
  hosts: Record<string, HostNode>;
  /** the control plane's own ways to PostgreSQL and Temporal, when asked for (blackhole() cuts the API and workers from that store) */
  controlPlane: { postgres: Relay; temporal: Relay } | null;
  /** the API's port (the balancer's, with more than one API), for cuts between a node and the API */
  apiPort: number;
  /** what starts runtime `id`'s agent again (on its host, its address, its clock) */
  agentSpec(id: string): AgentSpec;
  /** the agent's own port on its host, for cuts of the worker's calls to it */
  agentPort(id: string): number;
  stop(): Promise<void>;
}

export async function startHostStack(options: {
  nodes: number;
  /** the runtime ids, one per node (default h1, h2, …) */
  ids?: readonly string[];
  leaseTtlMs?: number;
  /** labels of node i (1-based); default zone=h */
  labels?: (index: number) => Record<string, string>;
  /** environment for the agent of node i (1-based), e.g. SCALEGATE_TEST_BREAK for one broken node */
  agentEnv?: (index: number) => NodeJS.ProcessEnv;
  /** agents run under libfaketime, their clocks skewable (HostNetwork.skew) */
  skewableClocks?: boolean;
  env?: NodeJS.ProcessEnv;
  apis?: number;
  workers?: number;
  slots?: number;
  /** the API and workers reach PostgreSQL and Temporal through relays on loopback that a test can blackhole */
  controlPlaneRelays?: boolean;
}): Promise<HostStack> {
  const env = testEnv();
  const clockDir = fs.mkdtempSync(path.join(env.tmpDir, 'clocks-'));
  const network = createHostNetwork({ nodes: options.nodes, clockDir });
  const relays: Relay[] = [];
  const forwarders: ServiceProcess[] = [];
  const stopForwarders = () => {
    for (const forwarder of forwarders) forwarder.kill('SIGKILL');
  };
  try {
    const postgres = new URL(env.postgresAdminUrl);
    const postgresTarget = { host: postgres.hostname, port: Number(postgres.port) };
    const relay = await startRelay({ listenHost: network.hostAddress, target: postgresTarget });
    relays.push(relay);
    if (env.kafkaBrokers) {
      const port = Number(env.kafkaBrokers.split(':').pop());
      relays.push(await startRelay({ listenHost: network.hostAddress, listenPort: port, target: { host: '127.0.0.1', port } }));
      for (const node of network.nodes) forwarders.push(await startForwarder(node, port, network.hostAddress));
    }
    let controlPlane: HostStack['controlPlane'] = null;
    if (options.controlPlaneRelays) {
      const [host, port] = env.temporalAddress.split(':');
      controlPlane = {
        postgres: await startRelay({ listenHost: '127.0.0.1', target: postgresTarget }),
        temporal: await startRelay({ listenHost: '127.0.0.1', target: { host: host!, port: Number(port) } }),
      };
      relays.push(controlPlane.postgres, controlPlane.temporal);
    }
    const ids = network.nodes.map((node) => options.ids?.[node.index - 1] ?? `h${node.index}`);
    const agentSpec = (id: string): AgentSpec => {
      const node = network.nodes[ids.indexOf(id)]!;
      return {
        id,
        labels: options.labels?.(node.index) ?? { zone: 'h' },
        slots: options.slots,
        bind: node.address,
        wrap: node.wrap,
        env: { ...options.agentEnv?.(node.index), ...(options.skewableClocks ? node.clockEnv() : {}) },
      };
    };
    const stack = await startStack({
      leaseTtlMs: options.leaseTtlMs,
      env: options.env,
      apis: options.apis,
      workers: options.workers,
      apiHost: network.hostAddress,
      agentDatabaseAddress: relay.address,
      controlPlaneRoutes: controlPlane ? { postgres: controlPlane.postgres.address, temporal: controlPlane.temporal.address } : undefined,
      agents: ids.map(agentSpec),
    });
    return {
      stack, network, postgresRelay: relay, controlPlane, agentSpec,
      hosts: Object.fromEntries(ids.map((id, i) => [id, network.nodes[i]!])),
      apiPort: Number(new URL(stack.apiUrl).port),
      agentPort: (id) => stack.agents[id]!.port,
      async stop() {
        try {
          await stack.stop();
        } finally {
          stopForwarders();
          await Promise.all(relays.map((r) => r.close()));
          network.stop();
          fs.rmSync(clockDir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    stopForwarders();
    await Promise.all(relays.map((r) => r.close()));
    network.stop();
    fs.rmSync(clockDir, { recursive: true, force: true });
    throw error;
  }
}

const FORWARDER = path.resolve(__dirname, './fixtures/tcp-forward.js');

/** A forwarder on `node`'s own loopback at `port` to the bridge side's `hostAddress`:`port`, once it listens. */
async function startForwarder(node: HostNode, port: number, hostAddress: string): Promise<ServiceProcess> {
  let listening = false;
  const said: string[] = [];
  const forwarder = spawnService({
    name: `kafka-forwarder ${node.ns}`, entry: FORWARDER, script: FORWARDER, wrap: node.wrap, env: process.env,
    args: ['127.0.0.1', String(port), hostAddress, String(port)],
    output: (_, line) => {
      said.push(line);
      if (line === 'listening') listening = true;
    },
  });
  await waitFor(`the Kafka forwarder on ${node.ns} listening`, async () => {
    if (forwarder.child.exitCode !== null) throw new GiveUp(`it exited with ${forwarder.child.exitCode}: ${said.join(' ')}`);
    return listening;
  }, { timeoutMs: 10_000, intervalMs: 20 });
  return forwarder;
}
