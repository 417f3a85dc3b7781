// bench/autoscale: how fast a load signal becomes (1) an autoscale decision in the ledger and (2)
// replicas ready, for a service tier flipping between 2 and 3 replicas (no soak, no stabilization,
// no cooldown), over 50 signals on a real stack (Temporal dev server, PostgreSQL, API, worker, 4
// agent processes). Compared with the ping workflow round trip (one store activity) in the same run.
// Prints JSON. Run: npm run bench:autoscale [-- signals]
import os from 'node:os';
import path from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Stack } from '../harness/stack';
import { tasksOf } from '../harness/workloads';
import { eventMillis } from './support/history';
import { benchOnStack } from './support/on-stack';
import { setTimeout as sleep } from 'node:timers/promises';

const FIXTURE = path.resolve(__dirname, '../harness/fixtures/http-server.js');
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const summary = (values: number[]) => ({ p50Ms: +percentile(values, 50).toFixed(1), p95Ms: +percentile(values, 95).toFixed(1) });

interface SignalTiming {
  qps: number;
  sentAt: number;
  answeredAt: number;
}

/**
 * Where a signal's way to its decision row goes, median of each step, from the autoscaler's
 * histories (every run of autoscale:web) and the rows' own insert times: the API request until
 * Temporal records the signal, the workflow task that decides and asks for the child, the server
 * starting the child, the next workflow task, and its ledger append (a local activity).
 */
async function decisionPath(stack: Stack, timings: SignalTiming[]) {
  const { rows } = await stack.db.query<{ qps: number; at: Date }>(
    `select (inputs->'observation'->>'qps')::float8 as qps, min(at) as at from ledger where kind = 'autoscale' and tier = 'web' group by 1`,
  );
  const rowAt = new Map(rows.map((row) => [Number(row.qps), row.at.getTime()]));
  const steps: Record<string, number[]> = {
    'request → signal recorded': [], 'signal → workflow task started': [], 'deciding workflow task': [],
    'child workflow started by the server': [], 'child started → workflow task scheduled': [], 'workflow task scheduled → started': [], 'workflow task started → ledger row': [], total: [],
  };
  const sentAt = new Map(timings.map((t) => [t.qps, t.sentAt]));
  for await (const run of stack.temporal.workflow.list({ query: 'WorkflowId = "autoscale:web"' })) {
    const events = (await stack.temporal.workflow.getHandle('autoscale:web', run.runId).fetchHistory()).events ?? [];
    const after = (from: number, has: (event: (typeof events)[number]) => unknown) => {
      const index = events.findIndex((event, i) => i > from && has(event));
      return index < 0 ? null : index;
    };
    events.forEach((event, i) => {
      const signaled = event.workflowExecutionSignaledEventAttributes;
      if (signaled?.signalName !== 'observe' || !signaled.input?.payloads?.[0]) return;
      const qps = (defaultPayloadConverter.fromPayload(signaled.input.payloads[0]) as { qps: number }).qps;
      const sent = sentAt.get(qps);
      const row = rowAt.get(qps);
      const decided = after(i, (e) => e.workflowTaskStartedEventAttributes);
      const completed = decided === null ? null : after(decided, (e) => e.workflowTaskCompletedEventAttributes);
      const childStarted = completed === null ? null : after(completed, (e) => e.childWorkflowExecutionStartedEventAttributes);
      const scheduled = childStarted === null ? null : after(childStarted, (e) => e.workflowTaskScheduledEventAttributes);
      const resumed = scheduled === null ? null : after(scheduled, (e) => e.workflowTaskStartedEventAttributes);
      if (sent === undefined || row === undefined || resumed === null) return; // not a scale decision of this run
      const at = (index: number | null) => eventMillis(events[index!]);
      steps['request → signal recorded'].push(eventMillis(event) - sent);
      steps['signal → workflow task started'].push(at(decided) - eventMillis(event));
      steps['deciding workflow task'].push(at(completed) - at(decided));
      steps['child workflow started by the server'].push(at(childStarted) - at(completed));
      steps['child started → workflow task scheduled'].push(at(scheduled) - at(childStarted));
      steps['workflow task scheduled → started'].push(at(resumed) - at(scheduled));
      steps['workflow task started → ledger row'].push(row - at(resumed));
      steps.total.push(row - sent);
    });
  }
  return {
    what: 'median ms of each step, from the autoscaler histories and the rows\' insert times (one machine clock)',
    signals: steps.total.length,
    medianMs: Object.fromEntries(Object.entries(steps).map(([step, values]) => [step, values.length ? percentile(values, 50) : null])),
  };
}

async function measure(stack: Stack) {
  const signals = Number(process.argv[2] ?? 50);
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

  const timings: SignalTiming[] = [];
  const toDecision: number[] = [];
  const toReady: number[] = [];
  let lastId = 0;
  let replicas = 2;
  for (let i = 0; i < signals; i++) {
    const target = replicas === 2 ? 3 : 2;
    const qps = target === 3 ? 250 + i / 100 : 150 + i / 100; // distinct figures: each row is found by its observation
    const t0 = process.hrtime.bigint();
    const sentAt = Date.now();
    const sent = await stack.api('POST', '/v1/tiers/web/signals', { body: { qps }, role: 'agent' });
    if (sent.status !== 202) throw new Error(`signal refused: ${JSON.stringify(sent.body)}`);
    timings.push({ qps, sentAt, answeredAt: Date.now() });
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
  return {
    bench: 'autoscale', signals, node: process.version, cpus: os.cpus().length,
    signalToDecisionInLedger: summary(toDecision),
    signalToReplicasReady: summary(toReady),
    reference: { what: 'ping workflow round trip (one store activity)', ...summary(reference) },
    ratioDecisionToReferenceP50: +(percentile(toDecision, 50) / referenceP50).toFixed(2),
    ratioReadyToReferenceP50: +(percentile(toReady, 50) / referenceP50).toFixed(2),
    decisionPath: await decisionPath(stack, timings),
    note: 'service tier alternating 2 ↔ 3 replicas (scale-out and drained scale-in alternate); soak 0, stabilization 0, cooldown 0; ready = placement at target, every task ready, scale:web closed',
  };
}

benchOnStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c', 'd'].map((z) => ({ id: `bench-${z}`, labels: { zone: z } })) }, measure);

