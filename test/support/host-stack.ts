// A scalegate stack whose agents are hosts of their own (issue 35 item 2): test/support/hosts.ts
// makes N namespaces on a bridge, one agent runs in each (its tasks with it: they are its
// children), bound to and advertising its node's address. The API listens on the bridge address,
// the worker and the shared Temporal, PostgreSQL and Kafka stay on the host side; the agents reach
// PostgreSQL through a relay on the bridge. stop() removes everything, and so does a failed start.
// (Kafka sources are not reachable from the nodes: the shared broker advertises 127.0.0.1.)
import fs from 'node:fs';
import path from 'node:path';
import { testEnv } from './env';
import { createHostNetwork, type HostNetwork, type HostNode } from './hosts';
import { startRelay, type Relay } from './relay';
import { startStack, type Stack } from './stack';

export interface HostStack {
  stack: Stack;
  network: HostNetwork;
  /** the nodes' way to PostgreSQL (blackhole() cuts the nodes' data plane from it on the host side) */
  postgresRelay: Relay;
  /** runtime id → its host */
  hosts: Record<string, HostNode>;
  /** the API's port, for cuts between a node and the API */
  apiPort: number;
  /** the agent's own port on its host, for cuts of the worker's calls to it */
  agentPort(id: string): number;
  stop(): Promise<void>;
}

export async function startHostStack(options: {
  nodes: number;
  leaseTtlMs?: number;
  /** labels of node i (1-based); default zone=h */
  labels?: (index: number) => Record<string, string>;
  /** environment for the agent of node i (1-based), e.g. SCALEGATE_TEST_BREAK for one broken node */
  agentEnv?: (index: number) => NodeJS.ProcessEnv;
  /** agents run under libfaketime, their clocks skewable (HostNetwork.skew) */
  skewableClocks?: boolean;
  env?: NodeJS.ProcessEnv;
}): Promise<HostStack> {
  const env = testEnv();
  const clockDir = fs.mkdtempSync(path.join(env.tmpDir, 'clocks-'));
  const network = createHostNetwork({ nodes: options.nodes, clockDir });
  let postgresRelay: Relay | null = null;
  try {
    const postgres = new URL(env.postgresAdminUrl);
    postgresRelay = await startRelay({ listenHost: network.hostAddress, target: { host: postgres.hostname, port: Number(postgres.port) } });
    const ids = network.nodes.map((node) => `h${node.index}`);
    const stack = await startStack({
      leaseTtlMs: options.leaseTtlMs,
      env: options.env,
      apiHost: network.hostAddress,
      agentDatabaseAddress: postgresRelay.address,
      agents: network.nodes.map((node, i) => ({
        id: ids[i]!,
        labels: options.labels?.(node.index) ?? { zone: 'h' },
        bind: node.address,
        wrap: node.wrap,
        env: { ...options.agentEnv?.(node.index), ...(options.skewableClocks ? node.clockEnv() : {}) },
      })),
    });
    const relay = postgresRelay;
    return {
      stack, network, postgresRelay: relay,
      hosts: Object.fromEntries(ids.map((id, i) => [id, network.nodes[i]!])),
      apiPort: Number(new URL(stack.apiUrl).port),
      agentPort: (id) => stack.agents[id]!.port,
      async stop() {
        try {
          await stack.stop();
        } finally {
          await relay.close();
          network.stop();
          fs.rmSync(clockDir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    await postgresRelay?.close();
    network.stop();
    fs.rmSync(clockDir, { recursive: true, force: true });
    throw error;
  }
}
