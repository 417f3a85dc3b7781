// bench/autoscale: how fast a load signal becomes (1) an autoscale decision in the ledger and (2)
// replicas ready, for a service tier flipping between 2 and 3 replicas (no soak, no stabilization,
// no cooldown), over 50 signals on a real stack (Temporal dev server, PostgreSQL, API, worker, 4
// agent processes). Compared with the ping workflow round trip (one store activity) in the same run.
// Prints JSON. Run: npm run bench:autoscale [-- signals]
import os from 'node:os';
import path from 'node:path';
import { startStack } from '../test/support/stack';
import { startSharedServers } from '../test/support/shared-servers';
import { tasksOf } from '../test/support/workloads';

const FIXTURE = path.resolve(__dirname, '../test/fixtures/http-server.js');
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const summary = (values: number[]) => ({ p50Ms: +percentile(values, 50).toFixed(1), p95Ms: +percentile(values, 95).toFixed(1) });
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

async function main() {
  const signals = Number(process.argv[2] ?? 50);
  const servers = await startSharedServers({ prefix: 'scalegate-bench' });

  const stack = await startStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c', 'd'].map((z) => ({ id: `bench-${z}`, labels: { zone: z } })) });
  try {
    const service = {
      kind: 'service', replicas: 2,
      contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 500 },
    };
    await stack.api('PUT', '/v1/workloads/web', { body: service });
    const readyAt = async (replicas: number) => {
      const placement = (await stack.api('GET', '/v1/workloads/web', { role: 'viewer' })).body.placement;
      if (placement?.assignments.length !== replicas) return false;
      const ready = (await tasksOf(stack, 'web')).filter((t) => t.state === 'ready');
      if (ready.length !== replicas) return false;
      const d = await stack.temporal.workflow.getHandle('scale:web').describe().catch(() => null);
      return d === null || d.status.name !== 'RUNNING';
    };
    await stack.waitFor('web at 2 replicas', () => readyAt(2), 120_000);
    const policy = {
      workloads: ['web'], minReplicas: 1, maxReplicas: 3, targets: { qpsPerInstance: 100 }, tolerance: 0.1,
      scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, soakMs: 0, drainTimeoutMs: 10_000,
    };
    const put = await stack.api('PUT', '/v1/tiers/web/policy', { body: policy });
    if (put.status >= 300) throw new Error(`policy refused: ${JSON.stringify(put.body)}`);

    const reference: number[] = [];
    for (let i = 0; i < signals; i++) {
      const t0 = process.hrtime.bigint();
      await stack.temporal.workflow.execute('ping', { taskQueue: stack.taskQueue, workflowId: `bench-ping-${i}-${Date.now()}`, args: [{}] });
      reference.push(ms(t0));
    }

    const toDecision: number[] = [];
    const toReady: number[] = [];
    let lastId = 0;
    let replicas = 2;
    for (let i = 0; i < signals; i++) {
      const target = replicas === 2 ? 3 : 2;
      const qps = target === 3 ? 250 + i / 100 : 150 + i / 100; // distinct figures: each row is found by its observation
      const t0 = process.hrtime.bigint();
      const sent = await stack.api('POST', '/v1/tiers/web/signals', { body: { qps }, role: 'agent' });
      if (sent.status !== 202) throw new Error(`signal refused: ${JSON.stringify(sent.body)}`);
      for (;;) {
        const { rows } = await stack.db.query(
          `select id, inputs->>'decision' as decision from ledger where kind = 'autoscale' and tier = 'web' and id > $1 and (inputs->'observation'->>'qps')::float8 = $2 order by id limit 1`,
          [lastId, qps],
        );
        if (rows[0]) {
          toDecision.push(ms(t0));
          lastId = Number(rows[0].id);
          if (!String(rows[0].decision).startsWith('scale-')) throw new Error(`signal ${i}: expected a scale decision, got ${rows[0].decision}`);
          break;
        }
        await sleep(10);
      }
      while (!(await readyAt(target))) await sleep(20);
      toReady.push(ms(t0));
      replicas = target;
    }
    const referenceP50 = percentile(reference, 50);
    console.log(JSON.stringify({
      bench: 'autoscale', signals, node: process.version, cpus: os.cpus().length,
      signalToDecisionInLedger: summary(toDecision),
      signalToReplicasReady: summary(toReady),
      reference: { what: 'ping workflow round trip (one store activity)', ...summary(reference) },
      ratioDecisionToReferenceP50: +(percentile(toDecision, 50) / referenceP50).toFixed(2),
      ratioReadyToReferenceP50: +(percentile(toReady, 50) / referenceP50).toFixed(2),
      note: 'service tier alternating 2 ↔ 3 replicas (scale-out and drained scale-in alternate); soak 0, stabilization 0, cooldown 0; ready = placement at target, every task ready, scale:web closed',
    }, null, 2));
  } finally {
    await stack.stop();
    await servers.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
