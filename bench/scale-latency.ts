// bench/scale-latency: request → workflow completed for a service workload 2 → 4 (no soak), over
// `runs` runs (default 20) on a real stack (Temporal dev server, PostgreSQL, API, worker, 4 agent
// processes). Prints p50/p95 and, from the workflow histories, where the time goes: each activity
// type's scheduled → completed time, the workflow tasks' scheduled → completed time, and the rest
// (the API request, queueing between tasks), each as a share of the wall time.
// Two references measured in the same run:
//   - the ping workflow (one store activity) round trip: what one Temporal round trip costs here;
//   - a process start: the service's own command spawned directly and probed on its readiness path
//     until it answers, as the agent does. A scale-out cannot finish before its new processes are
//     ready, so this is its floor outside orchestration.
// Run: npx tsx bench/scale-latency.ts [runs]
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { freePort, stopChild } from '../embedded/processes';
import type { Stack } from '../harness/stack';
import { eventMillis } from './support/history';
import { benchOnStack } from './support/on-stack';
import { setTimeout as sleep } from 'node:timers/promises';

const FIXTURE = path.resolve(__dirname, '../harness/fixtures/http-server.js');

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const round = (value: number, digits = 1) => Number(value.toFixed(digits));

/** Spawns the fixture as the agent would and polls its readiness path until it answers 200. */
async function processStartMs(): Promise<number> {
  const port = await freePort();
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, [FIXTURE], { env: { PORT: String(port), INTERNAL_PORT: String(await freePort()) }, stdio: 'ignore' });
  try {
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
      if (ready) return ms(t0);
      await sleep(5);
    }
  } finally {
    await stopChild(child, 2000);
  }
}

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

interface Spans {
  activities: Record<string, number>;
  workflowTasks: number;
  /** the time covered by any activity or workflow task (activities run side by side may overlap) */
  covered: number;
}

/** The length of the union of [start, end] intervals. */
function unionLength(intervals: [number, number][]): number {
  let total = 0;
  let reach = -Infinity;
  for (const [start, end] of [...intervals].sort((a, b) => a[0] - b[0])) {
    if (end > reach) total += end - Math.max(start, reach);
    reach = Math.max(reach, end);
  }
  return total;
}

/** Sums each activity type's scheduled → completed time and every workflow task's scheduled → completed time. */
function spansOf(events: HistoryEvent[], into: Spans): void {
  const at = eventMillis;
  const scheduled: Record<string, { type: string; at: number }> = {};
  const intervals: [number, number][] = [];
  let workflowTaskScheduledAt: number | null = null;
  for (const event of events) {
    if (event.activityTaskScheduledEventAttributes) {
      scheduled[String(event.eventId)] = { type: event.activityTaskScheduledEventAttributes.activityType?.name ?? '', at: at(event) };
    }
    const done = event.activityTaskCompletedEventAttributes;
    if (done) {
      const s = scheduled[String(done.scheduledEventId)];
      if (s) {
        into.activities[s.type] = (into.activities[s.type] ?? 0) + at(event) - s.at;
        intervals.push([s.at, at(event)]);
      }
    }
    if (event.workflowTaskScheduledEventAttributes) workflowTaskScheduledAt = at(event);
    if (event.workflowTaskCompletedEventAttributes && workflowTaskScheduledAt !== null) {
      into.workflowTasks += at(event) - workflowTaskScheduledAt;
      intervals.push([workflowTaskScheduledAt, at(event)]);
      workflowTaskScheduledAt = null;
    }
  }
  into.covered += unionLength(intervals);
}

async function measure(stack: Stack) {
  const runs = Number(process.argv[2] ?? 20);
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

  const ping: number[] = [];
  const processStart: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    await stack.temporal.workflow.execute('ping', { taskQueue: stack.taskQueue, workflowId: `bench-ping-${i}-${Date.now()}`, args: [{}] });
    ping.push(ms(t0));
    processStart.push(await processStartMs());
  }

  const totals: number[] = [];
  const spans: Spans = { activities: {}, workflowTasks: 0, covered: 0 };
  let apiMs = 0;
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    const started = await stack.api('POST', '/v1/workloads/bench/scale', { body: { replicas: 4, soakMs: 0 } });
    apiMs += ms(t0);
    if (started.status !== 202) throw new Error(`scale refused: ${JSON.stringify(started.body)}`);
    const handle = stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId);
    const result = (await handle.result()) as { outcome: string };
    const total = ms(t0);
    if (result.outcome !== 'completed') throw new Error(`run ${i}: ${result.outcome}`);
    totals.push(total);
    spansOf((await handle.fetchHistory()).events ?? [], spans);
    // back to 2 through plan/apply (not timed)
    const plan = (await stack.api('POST', '/v1/workloads/bench/plan', { body: { replicas: 2 } })).body;
    const apply = await stack.api('POST', `/v1/plans/${plan.id}/apply`);
    await stack.temporal.workflow.getHandle(apply.body.workflowId, apply.body.runId).result();
    await settle();
  }
  const wallMs = totals.reduce((sum, t) => sum + t, 0);
  const share = (part: number) => round(part / wallMs, 3);
  const p50 = percentile(totals, 50);
  const pingP50 = percentile(ping, 50);
  const processStartP50 = percentile(processStart, 50);
  return {
    bench: 'scale-latency', runs, node: process.version, cpus: os.cpus().length,
    scaleOut2to4: { p50Ms: round(p50), p95Ms: round(percentile(totals, 95)) },
    reference: {
      ping: { what: 'ping workflow round trip (one store activity)', p50Ms: round(pingP50), p95Ms: round(percentile(ping, 95)) },
      processStart: { what: "the service's command spawned and probed until ready, outside scalegate", p50Ms: round(processStartP50), p95Ms: round(percentile(processStart, 95)) },
    },
    ratioScaleToPingP50: round(p50 / pingP50, 2),
    ratioScaleToProcessStartP50: round(p50 / processStartP50, 2),
    /** what the operation adds to starting its processes, in pings */
    orchestrationInPings: round((p50 - processStartP50) / pingP50, 2),
    shareOfTime: {
      activities: Object.fromEntries(Object.entries(spans.activities).sort(([, a], [, b]) => b - a).map(([type, spent]) => [type, share(spent)])),
      workflowTasks: share(spans.workflowTasks),
      apiRequest: share(apiMs),
      rest: share(wallMs - spans.covered - apiMs),
    },
    note: 'shares of the summed wall time, from the workflow histories: activity scheduled → completed (activities run side by side overlap), workflow task scheduled → completed (local activities run inside them); rest = the time neither covers, the API start and the result fetch',
  };
}

benchOnStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c', 'd'].map((z, i) => ({ id: `bench-${z}`, labels: { zone: z }, portRange: `${24000 + i * 100}-${24099 + i * 100}` })) }, measure);

