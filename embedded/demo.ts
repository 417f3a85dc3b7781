// `npm start -- --demo` (or SCALEGATE_DEMO=1): something to scale from the first minute. It defines,
// through the API like any operator would, a sample service (demo-web), a partitioned consumer fed
// by the load generator (demo-orders), a stream job fed by it too (demo-clicks) and a tier policy
// over demo-web (demo), so every operation of the README's quick tour has a target.
import path from 'node:path';
import type { TierPolicyInput } from '../protocol/tiers';

const WEB = path.resolve(__dirname, 'demo/web.js');

/** The demo's workloads, by name: plain JSON definitions, as `scalegate workloads apply -f` takes them. */
export function demoWorkloads(): Record<string, unknown> {
  return {
    'demo-web': {
      kind: 'service', replicas: 2,
      contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
      spec: { command: [process.execPath, WEB], readiness: { http: '/healthz' }, graceMs: 2000 },
    },
    'demo-orders': {
      kind: 'consumer', replicas: 2,
      contract: { ownership: 'partitioned', partitions: 4, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: { maxReplicas: 8 } },
      spec: { partitions: 4, source: 'demo_orders_in', sink: 'demo_orders_out', workMs: 1 },
    },
    'demo-clicks': {
      kind: 'stream',
      contract: { ownership: 'partitioned', partitions: 4, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
      spec: {
        source: 'demo_clicks_in', sink: 'demo_clicks_out', partitions: 4, checkpointIntervalMs: 1000, maxParallelism: 128,
        operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
      },
    },
  };
}

/** The demo tier: demo-web between 1 and 6 replicas at 100 requests/s each. */
export const DEMO_TIER = 'demo';
export function demoTierPolicy(): TierPolicyInput {
  return { workloads: ['demo-web'], minReplicas: 1, maxReplicas: 6, targets: { qpsPerInstance: 100 }, scaleDownStabilizationMs: 10_000, cooldownMs: 10_000 };
}

/** What feeds the demo's inputs: one load generator per source table (records/s). */
export const DEMO_FEEDS = [
  { name: 'loadgen-orders', source: 'demo_orders_in', partitions: 4, ratePerSec: 20 },
  { name: 'loadgen-clicks', source: 'demo_clicks_in', partitions: 4, ratePerSec: 50 },
] as const;

/** Defines the demo through the API (idempotent: a PUT replaces what an earlier start defined). */
export async function installDemo(apiUrl: string, operatorToken: string): Promise<string[]> {
  const put = async (urlPath: string, body: unknown) => {
    const response = await fetch(`${apiUrl}${urlPath}`, {
      method: 'PUT', headers: { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`demo: PUT ${urlPath} answered ${response.status}: ${await response.text()}`);
  };
  const defined: string[] = [];
  for (const [name, definition] of Object.entries(demoWorkloads())) {
    await put(`/v1/workloads/${name}`, definition);
    defined.push(name);
  }
  await put(`/v1/tiers/${DEMO_TIER}/policy`, demoTierPolicy());
  return defined;
}

/** The quick tour printed after a demo start (the README's, with this stack's URL). */
export function demoTour(apiUrl: string): string[] {
  const cli = 'npx scalegate';
  return [
    'demo: demo-web (service), demo-orders (consumer, fed by loadgen-orders), demo-clicks (stream job, fed by loadgen-clicks), tier demo',
    `  ${cli} state                                   # everything at a glance (SCALEGATE_API_URL=${apiUrl})`,
    `  ${cli} scale demo-web 3 --wait                 # scaleOut, followed live: gates, plan, tasks ready, soak, compare`,
    `  ${cli} scale demo-orders 1 --wait              # scaleIn: drain a consumer, hand its partitions over`,
    `  ${cli} jobs demo-clicks                        # the stream job: subtasks, counters, checkpoints`,
    `  ${cli} rescale demo-clicks agg 4 --wait        # hot rescale at a checkpoint barrier`,
    `  ${cli} rescale demo-clicks agg 3 --wait        # not an integer factor: the stop-the-world replan, saying why`,
    `  ${cli} tiers signal demo --qps 150             # the autoscaler: desired = ceil(150 / 100) = 2, so demo-web 3 → 2 at once`,
    `  ${cli} recover agent-c --wait                  # recoverRuntime: move agent-c's work elsewhere`,
    `  ${cli} ledger --limit 10                       # every decision, newest first`,
  ];
}
