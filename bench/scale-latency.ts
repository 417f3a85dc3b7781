// bench/scale-latency: request → workflow completed for a service workload 2 → 4 (no soak), over
// 20 runs on a real stack (Temporal dev server, PostgreSQL, API, worker, 4 agent processes). Prints
// p50/p95, the share of time spent in agent-calling activities vs store activities vs orchestration
// (from the workflow histories), and the ratio to a reference measured in the same run: the ping
// workflow (one store activity) round trip. Run: npx tsx bench/scale-latency.ts [runs]
import os from 'node:os';
import path from 'node:path';
import { startStack } from '../test/support/stack';
import { startSharedServers } from '../test/support/shared-servers';

const AGENT_ACTIVITIES = new Set(['startTasks', 'awaitTasksReady', 'stopTasks', 'gatherGateFacts', 'captureEvidence', 'stopAllTasksOfWorkload']);
const FIXTURE = path.resolve(__dirname, '../test/fixtures/http-server.js');

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

async function main() {
  const runs = Number(process.argv[2] ?? 20);
  const servers = await startSharedServers({ prefix: 'scalegate-bench' });

  const stack = await startStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c', 'd'].map((z, i) => ({ id: `bench-${z}`, labels: { zone: z }, portRange: `${24000 + i * 100}-${24099 + i * 100}` })) });
  try {
    const service = {
      kind: 'service', replicas: 2,
      contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
      spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 1000 },
    };
    await stack.api('PUT', '/v1/workloads/bench', { body: service });
    const settle = async () =>
      stack.waitFor('scale:bench idle with 2 replicas', async () => {
        const d = await stack.temporal.workflow.getHandle('scale:bench').describe().catch(() => null);
        const placement = (await stack.api('GET', '/v1/workloads/bench', { role: 'viewer' })).body.placement;
        return d?.status.name !== 'RUNNING' && placement?.assignments.length === 2;
      });
    await settle();

    const reference: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = process.hrtime.bigint();
      await stack.temporal.workflow.execute('ping', { taskQueue: stack.taskQueue, workflowId: `bench-ping-${i}-${Date.now()}`, args: [{}] });
      reference.push(ms(t0));
    }

    const totals: number[] = [];
    let agentMs = 0;
    let storeMs = 0;
    let wallMs = 0;
    for (let i = 0; i < runs; i++) {
      const t0 = process.hrtime.bigint();
      const started = await stack.api('POST', '/v1/workloads/bench/scale', { body: { replicas: 4, soakMs: 0 } });
      if (started.status !== 202) throw new Error(`scale refused: ${JSON.stringify(started.body)}`);
      const handle = stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId);
      const result = (await handle.result()) as { outcome: string };
      const total = ms(t0);
      if (result.outcome !== 'completed') throw new Error(`run ${i}: ${result.outcome}`);
      totals.push(total);
      wallMs += total;
      const history = await handle.fetchHistory();
      const scheduled: Record<string, { type: string; at: number }> = {};
      for (const event of history.events ?? []) {
        const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6);
        if (event.activityTaskScheduledEventAttributes) {
          scheduled[String(event.eventId)] = { type: event.activityTaskScheduledEventAttributes.activityType?.name ?? '', at };
        }
        const done = event.activityTaskCompletedEventAttributes;
        if (done) {
          const s = scheduled[String(done.scheduledEventId)];
          if (s && AGENT_ACTIVITIES.has(s.type)) agentMs += at - s.at;
          else if (s) storeMs += at - s.at;
        }
      }
      // back to 2 through plan/apply (not timed)
      const plan = (await stack.api('POST', '/v1/workloads/bench/plan', { body: { replicas: 2 } })).body;
      const apply = await stack.api('POST', `/v1/plans/${plan.id}/apply`);
      await stack.temporal.workflow.getHandle(apply.body.workflowId, apply.body.runId).result();
      await settle();
    }
    const p50 = percentile(totals, 50);
    const referenceP50 = percentile(reference, 50);
    console.log(JSON.stringify({
      bench: 'scale-latency', runs, node: process.version, cpus: os.cpus().length,
      scaleOut2to4: { p50Ms: +p50.toFixed(1), p95Ms: +percentile(totals, 95).toFixed(1) },
      reference: { what: 'ping workflow round trip (one store activity)', p50Ms: +referenceP50.toFixed(1), p95Ms: +percentile(reference, 95).toFixed(1) },
      ratioScaleToReferenceP50: +(p50 / referenceP50).toFixed(2),
      shareOfTime: {
        agentCalls: +(agentMs / wallMs).toFixed(3),
        storeActivities: +(storeMs / wallMs).toFixed(3),
        orchestrationAndApi: +((wallMs - agentMs - storeMs) / wallMs).toFixed(3),
      },
      note: 'shares from activity scheduled→completed times in the workflow histories; orchestration = workflow tasks, queueing and the API request',
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
