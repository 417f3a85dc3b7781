// `npm start -- --demo` (or SCALEGATE_DEMO=1): something to scale from the first minute. It defines,
// through the API like any operator would, a sample service (demo-web), a partitioned consumer fed
// by the load generator (demo-orders), a stream job fed by it too (demo-clicks) and a tier policy
// over demo-web (demo), so every operation of the README's quick tour has a target.
import fs from 'node:fs';
import path from 'node:path';
import type { TierPolicyInput } from '../protocol/tiers';
import { BUSYBOX_HTTPD } from './container-engine';

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

/**
 * The demo's container service (when the stack runs a container engine): the busybox image at
 * `image` (a tag of the stack's registry), 2 replicas; its rollout soaks each step 3 s.
 */
export const DEMO_BOX = 'demo-box';
export function demoBox(image: string): Record<string, unknown> {
  return {
    kind: 'service', replicas: 2, rollout: { soakMs: 3_000 },
    contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
    spec: { image, command: BUSYBOX_HTTPD, readiness: { http: '/index.html' }, limits: { cpus: 0.25, memoryMiB: 32 }, graceMs: 1000 },
  };
}

/**
 * Where the demo writes demo-box's next version (`scalegate workloads apply -f` takes it): the tour's
 * rollout line applies it.
 */
export const demoBoxNextFile = (home: string): string => path.join(home, 'demo-box-v2.json');

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

/**
 * Defines the demo through the API (idempotent: a PUT replaces what an earlier start defined). With
 * `containers` (the stack's registry holds both versions' tags), demo-box too, at its first version,
 * and its next version is written to `containers.nextFile` for the tour's rollout line.
 */
export async function installDemo(apiUrl: string, operatorToken: string, containers?: { image: string; nextImage: string; nextFile: string }): Promise<string[]> {
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
  if (containers) {
    await put(`/v1/workloads/${DEMO_BOX}`, demoBox(containers.image));
    defined.push(DEMO_BOX);
    fs.writeFileSync(containers.nextFile, `${JSON.stringify({ name: DEMO_BOX, ...demoBox(containers.nextImage) }, null, 2)}\n`);
  }
  await put(`/v1/tiers/${DEMO_TIER}/policy`, demoTierPolicy());
  return defined;
}

/**
 * The quick tour printed after a demo start (the README's, with this stack's URL). `containers`: the
 * file demo-box's next version is in, or why there is no demo-box (the rollout line is then skipped, saying so).
 */
export function demoTour(apiUrl: string, containers: { nextFile: string } | { off: string } = { off: 'no container engine of the stack\'s own' }): string[] {
  const cli = 'npx scalegate';
  const rollout = 'nextFile' in containers
    ? `  ${cli} workloads apply -f ${containers.nextFile} --wait   # a new version of ${DEMO_BOX} (image v2): the rollout, a canary first, then the rest, each compared with v1`
    : `  (containers off: ${containers.off}; the tour's rollout of ${DEMO_BOX} is skipped)`;
  return [
    `demo: demo-web (service), ${'nextFile' in containers ? `${DEMO_BOX} (container service), ` : ''}demo-orders (consumer, fed by loadgen-orders), demo-clicks (stream job, fed by loadgen-clicks), tier demo`,
    `  ${cli} state                                   # everything at a glance (SCALEGATE_API_URL=${apiUrl})`,
    `  ${cli} scale demo-web 3 --wait                 # scaleOut, followed live: gates, plan, tasks ready, soak, compare`,
    `  ${cli} scale demo-orders 1 --wait              # scaleIn: drain a consumer, hand its partitions over`,
    `  ${cli} jobs demo-clicks                        # the stream job: subtasks, counters, checkpoints`,
    `  ${cli} rescale demo-clicks agg 4 --wait        # hot rescale at a checkpoint barrier`,
    `  ${cli} rescale demo-clicks agg 3 --wait        # not an integer factor: the stop-the-world replan, saying why`,
    `  ${cli} tiers signal demo --qps 150             # the autoscaler: desired = ceil(150 / 100) = 2, so demo-web 3 → 2 at once`,
    rollout,
    `  ${cli} recover agent-c --wait                  # recoverRuntime: move agent-c's work elsewhere`,
    `  ${cli} ledger --limit 10                       # every decision, newest first`,
  ];
}
