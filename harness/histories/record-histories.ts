// Records the workflow histories that test/workflow/replay.test.ts replays: each scenario runs the
// real workflow bundle against typed fake activities (no agents, no database) on a Temporal server,
// checks that it ended as its name says, and its history is written to histories/<name>.json.
// Entry point: `npm run record:histories` (scripts/record-histories.ts starts a dev server for it).
// Re-record only for a deliberate, versioned workflow change (docs/workflows.md, "Replay histories").
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection, WorkflowContinuedAsNewError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, type Duration } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { bundleWorkflows } from '../../workers/workflow-bundle';
import type { Activities } from '../../activities';
import { workflowInputActivities } from '../../activities/workflow-input';
import type { WorkloadRecovery } from '../../domain/recovery';
import { capacityOf } from '../../domain/gates';
import { ADMIT_BY_MEMO, OUTCOME_KEY, statusOfOutcome, UNKNOWN_CONTRACT, type StreamSpec } from '../../protocol';
import { applyPlan, autoscaler, leaseSweeper, ping, reconcile, recoverRuntime, retireWorkload, scaleIn, scaleOut, stopTheWorldReplan } from '../../workflows';
import { wakeSignal } from '../../workflows/reconcile';
import type { StreamReplanOutcome } from '../../workflows/stop-the-world-replan';
import { rollout } from '../../workflows/rollout';
import { abortSignal as rescaleAbortSignal, rescaleOperator, rescaleStatusQuery, type RescaleStatus } from '../../workflows/rescale-operator';
import { observeSignal } from '../../workflows/autoscaler';
import { handleSubtaskFailures, subtasksFailedSignal } from '../../workflows/subtask-failures';
import { crashLoopingSignal, handleCrashLoops } from '../../workflows/crash-loops';
import { abortSignal, approveUpdate, rejectUpdate, statusQuery, type ScaleStatus } from '../../workflows/scale-out';
import { waitFor } from '../wait-for';
import { historyToJSON } from './history-json';
import { placeRecorded } from './history-versions';
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';

// the kept histories replay.test.ts replays: test data the recorder writes, beside the test that reads them
export const HISTORIES_DIR = path.resolve(__dirname, '../../test/workflow/histories');

// Shapes taken from the activities themselves, so a changed signature breaks this file's compile.
type Plan = Awaited<ReturnType<Activities['loadPlan']>>;
type Assignment = Plan['target'][number];
type TaskStatus = Awaited<ReturnType<Activities['startTasks']>>[number];
type Workload = NonNullable<Awaited<ReturnType<Activities['loadWorkload']>>>;
type LedgerEntry = Parameters<Activities['appendLedger']>[0];
type Evidence = Awaited<ReturnType<Activities['captureEvidence']>>;
type ReconcilePass = Awaited<ReturnType<Activities['reconcilePass']>>;
type SweepPass = Awaited<ReturnType<Activities['sweepLeases']>>;

/** Faults a scenario injects into the fakes. */
interface Faults {
  /** a Kubernetes workload's new pods serve 25 errors a second where the old serve 1 (its contract names app_errors_total) */
  newPodsServeErrors?: boolean;
  /** commitPlacement refuses: the plan's basis moved */
  stalePlan?: boolean;
  /** preparePlan refuses a decided target (the scale-in's victims): the placement moved after the choice */
  staleDecision?: boolean;
  /** the definition moved after the plan was made (another change PUT it): its revision is newer */
  definitionMoved?: boolean;
  /** the first resize of a stream job does not fit the runtimes there are now */
  resizeShortOnce?: boolean;
  /** the first new-generation plan does not fit (the runtimes are away): it has unplaced subtasks */
  noRoomOnce?: boolean;
  /** the first awaitTasksReady misses its deadline (after the commit) */
  convergeDeadlineOnce?: boolean;
  /** the first drainTasks (a scale-in drain) misses its deadline */
  drainDeadlineOnce?: boolean;
  /** the recipients' probes fail, so the scale-out connectivity gate refuses */
  probesFail?: boolean;
  /** evidence captured after the change shows 10 errors per task (a regression, as a count and as a rate) */
  errorsAfterChange?: boolean;
  /** evidence captured after the change shows one task error over 1,000 more records per task (a pass since patch error-rate-tested) */
  transientErrorAfterWork?: boolean;
  /** evidence captured after the change shows latency grown ×4 (a regression since latency is judged) */
  latencyAfterChange?: boolean;
  /** latency grows ×80 once more than this many tasks run (a stepped scale-out regresses at that step) */
  latencyAbove?: number;
  /** evidence captured after the change shows the backlog grown from 500 to 6,000 records (judged since patch resources-and-backlog-judged) */
  backlogAfterChange?: boolean;
  /** the workload is 1,000 records behind at both snapshots, and processes half the records per second after the change */
  throughputHalvesBehind?: boolean;
  /** what successive reconcile passes answer; an Error is thrown as a failed pass */
  passes?: (ReconcilePass | Error)[];
  /** what successive lease sweeps answer; an Error is thrown as a failed pass */
  sweeps?: (SweepPass | Error)[];
  /** a hot rescale's barrier C does not complete (until the activity is cancelled) */
  checkpointStuck?: boolean;
  /** preparing a hot rescale cannot reach an agent, on every attempt */
  planRescaleUnreachable?: boolean;
  /** a stream replan's stop-the-world does not return for a while (long enough to cancel the replan) */
  stopTheWorldStuck?: boolean;
  /** the first evidence capture (a replan's baseline, before anything stops) takes a while: long enough to cancel there */
  baselineSlow?: boolean;
  /** preparing a hot rescale takes a while (a checkpoint in flight when the clock paused): long enough to cancel it */
  prepareSlow?: boolean;
  /** the placed replicas run this revision (a rollout's old one): plans take a decided target as it is, and restoreRevision answers it */
  placedRevision?: string;
  /** a Kubernetes object's first scale write finds it moved (409): the workflow reads again */
  scaleConflictOnce?: boolean;
  /** a Kubernetes scale-in's victims never acknowledge their drain */
  drainNeverAcknowledged?: boolean;
}

const assignment = (workload: string, index: number, generation: number, partitions?: number[]): Assignment => ({
  runtimeId: `rt-${index}`, index, taskId: `${workload}-${index}-g${generation}`, ...(partitions ? { partitions } : {}),
});

const serviceWorkload = (name: string): Workload => ({
  name, kind: 'service', replicas: 3, selector: {}, contract: UNKNOWN_CONTRACT, revision: 7, retired: false,
  spec: { command: ['node', 'server.js'], env: {}, graceMs: 1000 },
});

/** A consumer with a known contract over 8 partitions, so the scale-out gates can pass. */
const consumerWorkload = (name: string, replicas: number): Workload => ({
  name, kind: 'consumer', replicas, selector: {}, revision: 7, retired: false,
  contract: { ownership: 'partitioned', partitions: 8, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
  spec: { partitions: 8, source: 'in_t', sink: 'out_t', workMs: 1 },
});

/** A service whose contract the gates can pass (its latency is what the comparison judges). */
const knownService = (name: string, replicas: number): Workload => ({
  ...serviceWorkload(name), replicas,
  contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
});

/** A service that is a Kubernetes Deployment (issue 37): the cluster places its pods. */
const kubernetesService = (name: string, replicas: number): Workload => ({
  name, kind: 'service', replicas, selector: {}, revision: 7, retired: false, spec: { env: {}, graceMs: 5000 },
  contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
  runtime: { kubernetes: { cluster: 'prod', namespace: 'shop', kind: 'Deployment', name } },
});

/** A Kubernetes Deployment whose contract names a metric its pods serve (issue 37). */
const meteredKubernetesService = (name: string, replicas: number): Workload => {
  const base = kubernetesService(name, replicas) as Extract<Workload, { kind: 'service' }>;
  return {
    ...base,
    contract: { ...base.contract, metrics: [{ name: 'app_errors_total', better: 'lower', tolerance: 0.2 }] },
    runtime: { kubernetes: { ...base.runtime!.kubernetes, metrics: { port: 9102, path: '/metrics', windowMs: 1000 } } },
  };
};

const withoutDownstream = (workload: Workload): Workload => ({ ...workload, contract: { ...workload.contract, downstream: undefined } });

/** A stream job of one source, one aggregate and one sink. */
const streamWorkload = (name: string): Workload => ({
  name, kind: 'stream', replicas: 3, selector: {}, revision: 7, retired: false,
  contract: { ownership: 'partitioned', partitions: 4, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint' },
  spec: {
    source: 'in_t', sink: 'out_t', partitions: 4, checkpointIntervalMs: 1000, maxParallelism: 128,
    operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }],
  },
});

const nonRetryable = (type: string, message: string) => ApplicationFailure.create({ type, message, nonRetryable: true });

/** A lease sweep that judged leases and found nothing to do. */
const idleSweep: SweepPass = { guard: null, leaseTtlMs: 3000, nextPassInMs: 100, declared: [], massExpiry: [], recover: [], lost: [], waiting: [] };

/**
 * In-memory fakes of every activity the workflows proxy, over one workload whose placement starts
 * at `replicas` assignments (replica 1 is idle, so a scale-in picks it first).
 */
function fakeActivities(definition: Workload, replicas: number, faults: Faults = {}) {
  const name = definition.name;
  const calls: string[] = [];
  const ledger: LedgerEntry[] = [];
  /** a ledger entry as the store reads it back */
  const rowOf = (entry: LedgerEntry) => ({
    ...entry, id: ledger.indexOf(entry) + 1, at: '2030-01-01T00:00:00.000Z', tier: null, fromReplicas: entry.fromReplicas ?? null, toReplicas: entry.toReplicas ?? null,
    reason: entry.reason ?? null, inputs: entry.inputs ?? {}, planId: entry.planId ?? null, workflowId: entry.workflowId ?? null, runId: entry.runId ?? null,
    outcome: entry.outcome ?? null, evidence: entry.evidence ?? null,
  }) as Awaited<ReturnType<Activities['awaitLedgerRow']>>;
  const partitionsOf = (i: number, of: number) => (definition.kind === 'consumer' ? [0, 1, 2, 3, 4, 5, 6, 7].filter((p) => p % of === i) : undefined);
  let current: Assignment[] = Array.from({ length: replicas }, (_, i) => ({
    ...assignment(name, i, 1, partitionsOf(i, replicas)), ...(faults.placedRevision ? { revision: faults.placedRevision } : {}),
  }));
  let stillRunning: Assignment[] = [];
  /** a stream job's keyed aggregate as the tier snapshot reads it (a hot cutover changes it) */
  let aggregateParallelism = 1;
  let fence = 3;
  let plans = 0;
  /** planRescale has answered (prepareSlow) */
  let prepareEnded = false;
  let changed = false;
  const count = (activity: keyof Activities) => calls.filter((c) => c === activity).length;
  const call = (activity: keyof Activities) => {
    calls.push(activity);
    return count(activity);
  };
  const taskStatus = (taskId: string, state: TaskStatus['state']): TaskStatus => ({
    taskId, workload: name, incarnation: `${taskId}-1`, state, counts: {}, errors: 0, generation: 1,
  });
  const plan = (fields: Partial<Plan> & Pick<Plan, 'target' | 'generation' | 'starts' | 'stops'>): Plan => ({
    id: `plan-${name}-${++plans}`, createdAt: '2030-01-01T00:00:00.000Z', appliedWorkflow: null,
    workload: name, kind: definition.kind, fromReplicas: current.length, replicas: fields.target.length, moves: [],
    warnings: [], evidenceRequired: [], unplaced: null, basis: { registryRevision: definition.revision, placementFence: fence },
    ...fields,
  });

  /** The plan preparePlan answers (without the room its fleet had). */
  const planFor = (input: Parameters<Activities['preparePlan']>[0]) => {
    if (faults.staleDecision && input.decided) throw nonRetryable('stale-plan', `the target for ${name} was decided on placement fence ${input.decided.onFence}, now ${fence + 1}; decide again`);
    const size = typeof input.replicas === 'number' ? input.replicas : current.length;
    const generation = input.newGeneration ? 2 : 1;
    // A rollout's replacement (task ids of its own on the same indices): the decided target as it is.
    if (faults.placedRevision && input.decided) {
      const target = input.decided.assignments;
      const kept = (a: Assignment) => target.some((t) => t.taskId === a.taskId);
      return plan({ target, generation, starts: target.filter((t) => !current.some((a) => a.taskId === t.taskId)), stops: current.filter((a) => !kept(a)) });
    }
    if (faults.noRoomOnce && input.newGeneration && count('preparePlan') === 1) {
      return plan({ target: [], generation, starts: [], stops: [], unplaced: { workload: name, reason: 'placement-unavailable', missing: size } });
    }
    const target = Array.from({ length: size }, (_, i) => assignment(name, i, generation, partitionsOf(i, size)));
    return input.newGeneration
      ? plan({ target, generation, starts: target, stops: [] })
      : plan({ target, generation, starts: target.slice(current.length), stops: current.slice(size) });
  };
  /** The fake fleet: four runtimes of four slots. */
  const fleetRoom = () => ['rt-0', 'rt-1', 'rt-2', 'rt-3'].map((id) => ({ id, freeSlots: 4, alreadyHostsWorkload: current.some((a) => a.runtimeId === id) }));
  const activities: Partial<Activities> = {
    async storePing() {
      call('storePing');
      return { runtimes: 3, ready: 2, workloads: 1 };
    },
    async appendLedger(entry) {
      call('appendLedger');
      ledger.push(entry);
      return ledger.length;
    },
    async loadWorkload(workload) {
      call('loadWorkload');
      if (workload !== name) return null;
      return faults.definitionMoved ? { ...definition, revision: definition.revision + 1 } : definition;
    },
    async restoreRevision(input) {
      call('restoreRevision');
      return { ...definition, runs: input.revision };
    },
    async loadPlacement(workload) {
      call('loadPlacement');
      return workload === name ? { workload, fence, generation: 1, assignments: current } : null;
    },
    /** A stored plan growing the workload from one replica to three, with one stop: every apply step runs. */
    async loadPlan(planId) {
      call('loadPlan');
      const target = [0, 1, 2].map((i) => assignment(name, i, 1));
      return { ...plan({ target, generation: 1, starts: target.slice(1), stops: [{ runtimeId: 'rt-9', index: 0, taskId: `${name}-old` }] }), id: planId, fromReplicas: 1 };
    },
    async preparePlan(input) {
      call('preparePlan');
      // with the room its fleet had, as the planner counts it
      return { ...planFor(input), capacity: capacityOf(fleetRoom()) };
    },
    async commitPlacement(input) {
      call('commitPlacement');
      if (faults.stalePlan) throw nonRetryable('stale-plan', `placement of ${input.workload} moved past fence ${input.basis.placementFence}`);
      fence += 1;
      current = input.assignments;
      changed = true;
      return { workload: input.workload, fence, generation: input.generation, assignments: input.assignments };
    },
    async clearPlacement() {
      call('clearPlacement');
      stillRunning = current; // cleared from the placement, its tasks still run until stopped
      current = [];
    },
    async startTasks(input) {
      call('startTasks');
      return input.assignments.map((a) => taskStatus(a.taskId, 'starting'));
    },
    async awaitTasksReady(input) {
      if (call('awaitTasksReady') === 1 && faults.convergeDeadlineOnce) throw nonRetryable('converge-deadline', `not ready within ${input.timeoutMs} ms`);
      return input.tasks.map((t) => taskStatus(t.taskId, 'ready'));
    },
    async drainTasks(input) {
      if (call('drainTasks') === 1 && faults.drainDeadlineOnce) throw nonRetryable('drain-deadline', `${input.tasks[0]?.taskId} did not drain in time`);
      return input.tasks.map((t) => ({ ...t, state: 'stopped', receipt: { committed: {} } }));
    },
    async stopAllTasksOfWorkload() {
      call('stopAllTasksOfWorkload');
      return current.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId }));
    },
    async stopRetiredTasks() {
      call('stopRetiredTasks');
      return { stopped: stillRunning.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId })), unreachable: [] };
    },
    async resumeCheckpointClock() {
      // the resume must come after the preparation (which may have paused the clock) ended
      if (faults.prepareSlow) assert.ok(prepareEnded, 'the clock was resumed while planRescale still ran');
      call('resumeCheckpointClock');
      return { resumed: true };
    },
    async planRescale(input) {
      call('planRescale');
      if (faults.planRescaleUnreachable) throw new Error('agent http://127.0.0.1:1 unreachable: fetch failed');
      if (faults.prepareSlow) await sleep(3_000);
      if (input.parallelism % 2 !== 0) return { hot: false, reason: `2 → ${input.parallelism} is not an integer factor`, from: 2, to: input.parallelism };
      const added = Array.from({ length: input.parallelism }, (_, i) => assignment(name, 5 + i, 1));
      prepareEnded = true;
      return {
        hot: true, from: 2, to: input.parallelism, checkpoint: 42, spec: (definition as unknown as { spec: StreamSpec }).spec, generation: 1, registryRevision: definition.revision,
        placementFence: fence, coordinator: { runtimeId: 'rt-0', taskId: `${name}-4-g1` }, added,
        retiring: current.filter((a) => a.index === 2 || a.index === 3), others: current.filter((a) => a.index !== 2 && a.index !== 3),
      };
    },
    async commitRescaleLayout() {
      call('commitRescaleLayout');
      return { placementFence: ++fence, registryRevision: definition.revision + 1 };
    },
    async armCutover(input) {
      call('armCutover');
      return input.tasks.map((t) => ({ ...t, role: 'unaffected' as const }));
    },
    async triggerCutover(input) {
      call('triggerCutover');
      return { state: 'paused' as const, lastTriggered: input.checkpoint, inFlight: input.checkpoint };
    },
    async awaitCheckpoint(input) {
      call('awaitCheckpoint');
      // Stuck long enough that what the scenario does meanwhile (a whole replan, under a loaded
      // machine) ends first; cut short when the worker shuts down, so a recording never waits it out.
      if (faults.checkpointStuck) await sleep(15_000, undefined, { signal: Context.current().cancellationSignal }).catch(() => undefined);
      return { id: input.checkpoint, generation: 1, triggeredAt: '2030-01-01T00:00:00.000Z', completedAt: '2030-01-01T00:00:01.000Z' };
    },
    async retireFromLayout(input) {
      call('retireFromLayout');
      aggregateParallelism = input.plan.to;
      return { placementFence: ++fence };
    },
    async setCheckpointClock(input) {
      call('setCheckpointClock');
      return { state: input.state, lastTriggered: 42, inFlight: null };
    },
    async resizeStreamJob(input) {
      if (call('resizeStreamJob') === 1 && faults.resizeShortOnce) throw nonRetryable('placement-unavailable', `job ${name} needs 4 subtasks; 4 do not fit the eligible runtimes' free slots (nothing was changed)`);
      const from = { src: 1, agg: 1, out: 1 };
      const to = { ...from, ...input.parallelism };
      return { replicas: Object.values(to).reduce((a, b) => a + b, 0), from, to };
    },
    async awaitLedgerRow(input) {
      call('awaitLedgerRow');
      const entry = await waitFor(`a ${input.kind} row of ${input.workload}`, () => ledger.find((e) => e.kind === input.kind && e.workload === input.workload && e.outcome));
      return rowOf(entry);
    },
    async runningReplanStart() {
      call('runningReplanStart');
      return { startedAt: null };
    },
    async findLedgerRow(input) {
      call('findLedgerRow');
      const entry = ledger.find((e) => e.kind === input.kind && e.workload === input.workload && e.outcome);
      return entry ? rowOf(entry) : null;
    },
    async stopStreamJob() {
      call('stopStreamJob');
      if (faults.stopTheWorldStuck) await sleep(5_000);
      return { stopped: current.map((a) => ({ runtimeId: a.runtimeId, taskId: a.taskId })), unreachable: ['rt-9'] };
    },
    /** The first crash-looping task reported moves (the stored plan loadPlan answers), any other is left. */
    async decideCrashLoop(input) {
      const n = call('decideCrashLoop');
      if (n === 1) return { action: 'move', reason: `task ${input.taskId} on ${input.runtimeId} crash-loops: moved off it`, planId: `plan-${name}` };
      return { action: 'leave', reason: `left running with its backoff: task ${input.taskId} on ${input.runtimeId}`, planId: null };
    },
    async currentSubtaskFailures(input) {
      call('currentSubtaskFailures');
      const held = new Set(current.map((a) => `${a.runtimeId}/${a.taskId}`));
      const currentReports = input.reports
        .map((r) => ({ runtimeId: r.runtimeId, taskIds: r.taskIds.filter((taskId) => held.has(`${r.runtimeId}/${taskId}`)) }))
        .filter((r) => r.taskIds.length > 0);
      return { current: currentReports, busy: null };
    },
    async streamRestorePoint() {
      call('streamRestorePoint');
      return { id: 41, generation: 1, triggeredAt: '2030-01-01T00:00:00.000Z', completedAt: '2030-01-01T00:00:01.000Z' };
    },
    async confirmRemoved(input) {
      call('confirmRemoved');
      return { runtimes: input.removed.map((t) => t.runtimeId), tasks: input.removed.map((t) => t.taskId), assignmentsLeft: 0, ownedPartitions: 0 };
    },
    async gatherGateFacts(input) {
      call('gatherGateFacts');
      const probe = faults.probesFail ? { ok: false, detail: 'probe failed: connection refused' } : { ok: true, detail: 'reachable' };
      return {
        ...(input.capacity === 'count' ? { capacity: capacityOf(fleetRoom()) } : input.capacity === 'known' ? {} : { eligible: fleetRoom() }),
        probes: input.recipientRuntimeIds.map((runtimeId) => ({ runtimeId, source: probe, destination: probe })),
      };
    },
    async captureEvidence(): Promise<Evidence> {
      if (call('captureEvidence') === 1 && faults.baselineSlow) await sleep(5_000);
      const errors = changed && faults.errorsAfterChange ? 10 : 0;
      const worked = changed && faults.transientErrorAfterWork;
      const tasks: Evidence['tasks'] = current.map((a, i) => ({
        taskId: a.taskId, runtimeId: a.runtimeId, incarnation: `${a.taskId}-1`, state: 'ready', processed: worked ? 1_025 : 25, errors: worked && i === 0 ? 1 : errors, backlog: 0,
        ownedPartitions: a.partitions?.length ?? 0, inFlight: 0, ratePerSec: a.index === 1 ? 0 : 5,
      }));
      return {
        atMs: 0, tasks, ready: tasks.length, processed: 25 * tasks.length, ratePerSec: 5 * tasks.length,
        ...((changed && faults.latencyAfterChange) || tasks.length > (faults.latencyAbove ?? Infinity)
          ? { latencyP50Ms: 400, latencyP95Ms: 480 } : { latencyP50Ms: 5, latencyP95Ms: 9 }),
        backlog: changed && faults.backlogAfterChange ? 6_000 : faults.backlogAfterChange ? 500 : faults.throughputHalvesBehind ? 1_000 : 0, errors: tasks.reduce((n, t) => n + t.errors, 0),
        ...(faults.throughputHalvesBehind ? { throughputSamples: [400, 410, 390, 405, 395, 402, 398, 401].map((v) => (changed ? v / 2 : v)) } : {}),
        // a consumer's partitions each balanced against its committed offset and owned by its placed task
        ...(definition.kind === 'consumer' ? {
          receipts: {
            declared: 8, placedTasks: current.map((a) => a.taskId),
            partitions: current.flatMap((a) => (a.partitions ?? []).map((partition) => ({
              partition, source: 30, committedOffset: 24, committedRecords: 25, received: 25, aboveCommit: 0, owner: a.taskId,
            }))),
          },
        } : {}),
      };
    },
    async reconcilePass() {
      const pass = faults.passes?.[call('reconcilePass') - 1] ?? { skipped: true, inputsKey: 'unchanged', planIds: [] };
      if (pass instanceof Error) throw nonRetryable('store-unavailable', pass.message);
      return pass;
    },
    async recordReconcilePass() {
      call('recordReconcilePass');
    },
    async tierSnapshot(input) {
      call('tierSnapshot');
      if (definition.kind === 'stream') {
        return input.workloads.map((workload) => ({
          workload, active: workload === name, replicas: aggregateParallelism,
          stream: { operator: 'agg', maxParallelism: 128, bound: 4, boundBy: 'its 4 source partitions' },
        }));
      }
      return input.workloads.map((workload) => ({ workload, active: workload === name, replicas: workload === name ? current.length : 0 }));
    },
    async observeKafkaLag(input) {
      call('observeKafkaLag');
      return { workload: input.workload, topic: `${name}-topic`, lag: 400, against: 'committed offsets' };
    },
    async changeWindowIntervals() {
      call('changeWindowIntervals');
      return [];
    },
    async tierRules() {
      call('tierRules');
      return [];
    },
    async sweepLeases() {
      const pass = faults.sweeps?.[call('sweepLeases') - 1] ?? idleSweep;
      if (pass instanceof Error) throw nonRetryable('store-unavailable', pass.message);
      return pass;
    },
    async markRuntimeLost(input) {
      call('markRuntimeLost');
      return { outcome: 'declared', runtime: { id: input.runtimeId, status: 'LOST', fence: 8, lostAt: '2030-01-01T00:00:00.000Z', labels: { zone: 'a' } } };
    },
    /** The lost runtime's replica moves to rt-9, a runtime that did not host the workload: one move, fenced on the current placement. */
    async prepareRecovery(input) {
      call('prepareRecovery');
      const runtime = { id: input.runtimeId, status: 'LOST', fence: 8 };
      const lost = current.find((a) => a.runtimeId === input.runtimeId);
      if (!lost) return { runtime, items: [] };
      if (definition.kind === 'stream') {
        // a lost subtask cannot rejoin its dataflow: the job is replanned (domain/recovery.ts)
        const reason = `a lost stream subtask cannot rejoin its dataflow: the job is replanned from its last completed checkpoint (replan:${name})`;
        const decision: WorkloadRecovery = {
          workload: name, kind: 'stream', replicas: definition.replicas, fromReplicas: current.length, toReplicas: current.length,
          contract: { ownership: definition.contract.ownership, state: definition.contract.state, delivery: definition.contract.delivery, recovery: definition.contract.recovery },
          storedOwner: { runtimeId: input.runtimeId, tasks: [lost.taskId], ownedPartitions: null }, onFence: fence, target: null, converge: [], unplaced: null,
          decisions: [{ index: lost.index, lostTaskId: lost.taskId, action: 'replanned', to: null, partitions: [], handedTo: [], reason }],
          warnings: [], summary: `${name}: ${reason}`,
        };
        return { runtime, items: [{ decision, plan: null }] };
      }
      const to: Assignment = { runtimeId: 'rt-9', index: lost.index, taskId: `${lost.taskId}-r${fence + 1}`, ...(lost.partitions ? { partitions: lost.partitions } : {}) };
      const target = current.map((a) => (a === lost ? to : a));
      const decision: WorkloadRecovery = {
        workload: name, kind: definition.kind, replicas: definition.replicas, fromReplicas: current.length, toReplicas: target.length,
        contract: { ownership: definition.contract.ownership, state: definition.contract.state, delivery: definition.contract.delivery, recovery: definition.contract.recovery },
        storedOwner: { runtimeId: input.runtimeId, tasks: [lost.taskId], ownedPartitions: null }, onFence: fence, target,
        converge: [{ runtimeId: to.runtimeId, taskId: to.taskId }], unplaced: null,
        decisions: [{ index: lost.index, lostTaskId: lost.taskId, action: definition.kind === 'consumer' ? 'moved' : 'replaced', to: { runtimeId: to.runtimeId, taskId: to.taskId }, partitions: lost.partitions ?? [], handedTo: [], reason: 'recorded' }],
        warnings: [], summary: `${name}: replica ${lost.index} to rt-9`,
      };
      return { runtime, items: [{ decision, plan: plan({ target, generation: 1, starts: [], stops: [], moves: [{ from: lost, to }] }) }] };
    },
  };
  if (definition.kind === 'service' && definition.runtime) Object.assign(activities, kubernetesFakes(definition, replicas, faults, call));
  return { activities, calls, ledger, count };
}

/** A Kubernetes workload's object and pods, in memory: pod `-1` and `-3` report nothing in flight (the idle ones). */
function kubernetesFakes(definition: Extract<Workload, { kind: 'service' }>, replicas: number, faults: Faults, call: (activity: keyof Activities) => number): Partial<Activities> {
  const ref = definition.runtime!.kubernetes;
  let resourceVersion = 100;
  let size = replicas;
  let ordinal = replicas;
  type Pod = Awaited<ReturnType<Activities['kubernetesObject']>>['pods'][number];
  const pod = (i: number): Pod => ({
    name: `${ref.name}-${i}`, uid: `uid-${i}`, node: `kwok-${i % 2 ? 'b' : 'a'}`, ready: true, restarts: 0, load: i % 2 ? 0 : 2,
    drainRequested: null, drained: false, terminating: false,
  });
  let pods = Array.from({ length: replicas }, (_, i) => pod(i));
  const object = () => ({
    replicas: size, readyReplicas: pods.length, resourceVersion: String(resourceVersion), podSelector: { app: ref.name }, nodeSelector: {},
    requests: { cpuMilli: 250, memoryBytes: 64 * 2 ** 20 }, observed: true,
  });
  const node = (name: string) => ({
    name, ready: true, unschedulable: false, labels: { 'topology.kubernetes.io/zone': name.slice(-1) },
    allocatable: { cpuMilli: 2000, memoryBytes: 4 * 2 ** 30, pods: 110 }, requested: { cpuMilli: 500, memoryBytes: 128 * 2 ** 20, pods: 2 },
  });
  return {
    async kubernetesObject() {
      call('kubernetesObject');
      return { ref, object: object(), pods, group: null };
    },
    async kubernetesGateFacts() {
      call('kubernetesGateFacts');
      return { nodes: [node('kwok-a'), node('kwok-b')], budgets: [] };
    },
    async kubernetesScale(input) {
      if (call('kubernetesScale') === 1 && faults.scaleConflictOnce) {
        resourceVersion += 1; // another writer touched the object (its size unchanged)
        throw nonRetryable('scale-conflict', `PUT ${ref.name}/scale: 409 the object has been modified`);
      }
      assert.equal(input.resourceVersion, String(resourceVersion));
      resourceVersion += 1;
      const marked = pods.filter((p) => p.drainRequested !== null);
      if (input.replicas < size) pods = [...marked, ...pods.filter((p) => p.drainRequested === null)].slice(size - input.replicas);
      while (pods.length < input.replicas) pods.push(pod(ordinal++));
      size = input.replicas;
      return { resourceVersion: String(resourceVersion) };
    },
    async kubernetesMarkVictims(input) {
      call('kubernetesMarkVictims');
      pods = pods.map((p) => (input.pods.includes(p.name) ? { ...p, drainRequested: input.operation } : p));
      return [...input.pods].sort();
    },
    async kubernetesUnmarkVictims(input) {
      call('kubernetesUnmarkVictims');
      pods = pods.map((p) => (input.pods.includes(p.name) ? { ...p, drainRequested: null, drained: false } : p));
      return [...input.pods].sort();
    },
    async kubernetesAwaitDrained(input) {
      call('kubernetesAwaitDrained');
      return faults.drainNeverAcknowledged ? { acknowledged: [], missing: input.pods } : { acknowledged: input.pods, missing: [] };
    },
    async kubernetesAwaitConverged() {
      call('kubernetesAwaitConverged');
      return pods;
    },
    async setDesiredReplicas() {
      call('setDesiredReplicas');
    },
    async kubernetesPodMetrics() {
      call('kubernetesPodMetrics');
      const errorsOf = (i: number) => (faults.newPodsServeErrors && i >= replicas ? 25 : 1);
      return {
        windowMs: 1000, counters: ['app_errors_total'],
        pods: pods.map((p) => ({ pod: p.name, figures: { app_errors_total: errorsOf(Number(p.name.slice(p.name.lastIndexOf('-') + 1))) } })),
      };
    },
  };
}

type Fakes = ReturnType<typeof fakeActivities>;

interface ScenarioContext {
  client: Client;
  taskQueue: string;
  /** the workload the scenario's fakes serve; also its name */
  workload: string;
  fakes: Fakes;
}

/** A further history a scenario produced (a child), recorded under `name`. */
interface ExtraHistory {
  name: string;
  workflowId: string;
}

export interface Scenario {
  /** the history file's name (without .json); also the scenario's workload name, so a DNS label */
  name: string;
  fakes(name: string): Fakes;
  /**
   * Workflow ids the scenario uses that are not derived from its name (a recovery's `recover:<runtime>`):
   * two scenarios naming one are never recorded at the same time, since the second start would meet the first's run
   */
  fixedWorkflowIds?: string[];
  /** Runs the workflow to its end, asserts the outcome, and answers its workflow id and any child histories to keep. */
  run(ctx: ScenarioContext): Promise<{ workflowId: string; runId?: string; extra?: ExtraHistory[] }>;
}

const ledgerOutcomes = (fakes: Fakes) => fakes.ledger.map((e) => `${e.kind}:${e.outcome}`);

/** A hot rescale agg 2 → 4 of `workload`, started and waited for in its window (barrier C awaited: the fakes' checkpointStuck). */
async function rescaleInWindow({ client, taskQueue, workload, fakes }: { client: Client; taskQueue: string; workload: string; fakes: Fakes }) {
  const workflowId = `rescale:${workload}`;
  const handle = await client.workflow.start(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 4 }] });
  await waitFor(`${workflowId} in phase draining`, async () => (await handle.query(rescaleStatusQuery)).phase === 'draining' && fakes.count('awaitCheckpoint') === 1);
  return { workflowId, handle };
}

const inPhase = (handle: WorkflowHandle, phase: string) =>
  waitFor(`${handle.workflowId} in phase ${phase}`, async () => (await handle.query(statusQuery)).phase === phase);

/** A scale operation's run: start, optionally act on the running workflow, then its final status. */
async function scale(
  ctx: ScenarioContext,
  workflow: (rawInput: unknown) => Promise<ScaleStatus>,
  input: Record<string, unknown>,
  during?: (handle: WorkflowHandle) => Promise<void>,
): Promise<{ workflowId: string; status: ScaleStatus }> {
  const workflowId = `scale:${ctx.workload}`;
  const handle = await ctx.client.workflow.start(workflow, { taskQueue: ctx.taskQueue, workflowId, args: [{ workload: ctx.workload, ...input }] });
  await during?.(handle);
  const status = await handle.result();
  // Its end is visible in the Web UI's list: the API's status word as ScalegateOutcome.
  const described = await handle.describe();
  assert.equal(described.typedSearchAttributes.get(OUTCOME_KEY), statusOfOutcome(status.outcome));
  return { workflowId, status };
}

/** A scaleOut 2 → 4 started as the API starts it: with its admission deadline (optionally picked up only after a delay). */
const scaleOutAdmittedBy = (ctx: ScenarioContext, admitBy: Date, startDelay?: Duration) => ctx.client.workflow.start(scaleOut, {
  taskQueue: ctx.taskQueue, workflowId: `scale:${ctx.workload}`, args: [{ workload: ctx.workload, replicas: 4, soakMs: 0 }],
  memo: { [ADMIT_BY_MEMO]: admitBy.toISOString() }, ...(startDelay ? { startDelay } : {}),
});

export const SCENARIOS: Scenario[] = [
  {
    name: 'apply-plan',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const result = await client.workflow.execute(applyPlan, { taskQueue, workflowId, args: [{ planId: `plan-${workload}`, convergeTimeoutMs: 5000 }] });
      assert.equal(result.compensated, false);
      assert.deepEqual(result.stopped, [`${workload}-old`]);
      assert.deepEqual(ledgerOutcomes(fakes), ['apply:completed']);
      return { workflowId };
    },
  },
  {
    name: 'apply-plan-compensated',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1, { convergeDeadlineOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const result = await client.workflow.execute(applyPlan, { taskQueue, workflowId, args: [{ planId: `plan-${workload}`, convergeTimeoutMs: 5000 }] });
      assert.equal(result.compensated, true);
      assert.equal(result.generation, 2);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'apply:compensated']);
      // the compensation is a child workflow: keep its history too
      return { workflowId, extra: [{ name: 'stop-the-world-replan-child', workflowId: `replan:${workload}` }] };
    },
  },
  {
    name: 'apply-plan-stale',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1, { stalePlan: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      // Refused as stale (chaos seed 15), nothing written, so no compensation; runs before the patch failed.
      const result = await client.workflow.execute(applyPlan, { taskQueue, workflowId, args: [{ planId: `plan-${workload}` }] });
      assert.equal(result.outcome, 'stale-plan');
      assert.match(result.reason ?? '', /moved past fence/);
      assert.deepEqual(fakes.calls, ['loadPlan', 'loadWorkload', 'commitPlacement', 'appendLedger']);
      assert.deepEqual(ledgerOutcomes(fakes), ['apply:stale-plan']);
      return { workflowId };
    },
  },
  {
    // The definition moved after the plan was made (chaos seed 11): refused before the placement
    // write, so no task starts with a spec the plan was not made on.
    name: 'apply-plan-definition-moved',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1, { definitionMoved: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const result = await client.workflow.execute(applyPlan, { taskQueue, workflowId, args: [{ planId: `plan-${workload}` }] });
      assert.equal(result.outcome, 'stale-plan');
      assert.match(result.reason ?? '', /the definition of .* moved \(revision \d+ → \d+\) since the plan was made/);
      assert.deepEqual(fakes.calls, ['loadPlan', 'loadWorkload', 'appendLedger']);
      return { workflowId };
    },
  },
  {
    name: 'stop-the-world-replan',
    fakes: (name) => fakeActivities(serviceWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = await client.workflow.execute(stopTheWorldReplan, { taskQueue, workflowId, args: [{ workload, replicas: 3, reason: 'recorded' }] });
      assert.equal(result.generation, 2);
      assert.equal(result.stopped.length, 3);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A replan whose first converge fails (an agent died while the new generation started, chaos
    // seed 6): the world is stopped again and placed anew; the second attempt converges.
    name: 'stop-the-world-replan-second-attempt',
    fakes: (name) => fakeActivities(serviceWorkload(name), 3, { convergeDeadlineOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = await client.workflow.execute(stopTheWorldReplan, { taskQueue, workflowId, args: [{ workload, replicas: 3, reason: 'recorded', convergeTimeoutMs: 5000 }] });
      assert.equal(result.generation, 2);
      assert.equal(fakes.count('stopAllTasksOfWorkload'), 2);
      assert.equal(fakes.count('preparePlan'), 2);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A stream job: resized, stopped, restored from the last completed checkpoint in a new generation.
    name: 'stop-the-world-replan-stream',
    fakes: (name) => fakeActivities(streamWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = (await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId, args: [{ workload, parallelism: { agg: 2 }, reason: 'recorded' }],
      })) as StreamReplanOutcome;
      assert.equal(result.restoredFrom, 41);
      assert.deepEqual(result.parallelism.to, { src: 1, agg: 2, out: 1 });
      assert.deepEqual(result.unreachable, ['rt-9']);
      assert.equal(result.comparison.verdict, 'pass');
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A stream replan whose first converge fails (a subtask's peer died meanwhile): the world is
    // stopped again and the job placed anew; the second attempt converges (chaos seed 7).
    name: 'stop-the-world-replan-stream-second-attempt',
    fakes: (name) => fakeActivities(streamWorkload(name), 3, { convergeDeadlineOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = (await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId, args: [{ workload, parallelism: { agg: 2 }, reason: 'recorded', convergeTimeoutMs: 5000 }],
      })) as StreamReplanOutcome;
      assert.equal(fakes.count('stopStreamJob'), 2);
      assert.equal(result.restoredFrom, 41);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A stream replan whose job does not fit the runtimes that answered (chaos seed 7): the world
    // stays stopped and the replan waits for room, then places the job, rather than failing.
    name: 'stop-the-world-replan-stream-waits-for-room',
    fakes: (name) => fakeActivities(streamWorkload(name), 3, { noRoomOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = (await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId, args: [{ workload, parallelism: { agg: 2 }, reason: 'recorded' }],
      })) as StreamReplanOutcome;
      assert.equal(fakes.count('preparePlan'), 2);
      assert.equal(fakes.count('stopStreamJob'), 2);
      assert.equal(result.restoredFrom, 41);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A stream replan whose resize does not fit yet (a recovery under way, chaos seed 64): it waits
    // for room, resizes, and replans, rather than failing.
    name: 'stop-the-world-replan-stream-resize-waits',
    fakes: (name) => fakeActivities(streamWorkload(name), 3, { resizeShortOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const result = (await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId, args: [{ workload, parallelism: { agg: 2 }, reason: 'recorded', cause: 'recover:rt-0' }],
      })) as StreamReplanOutcome;
      assert.equal(fakes.count('resizeStreamJob'), 2);
      assert.deepEqual(result.parallelism.to, { src: 1, agg: 2, out: 1 });
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      return { workflowId };
    },
  },
  {
    // A hot rescale 2 → 4 of the aggregate: prepared, drained through barrier C = 42, cut over.
    name: 'rescale-operator',
    fakes: (name) => fakeActivities(streamWorkload(name), 5),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `rescale:${workload}`;
      const status = (await client.workflow.execute(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 4 }] })) as RescaleStatus;
      assert.equal(status.outcome, 'completed');
      assert.equal(status.checkpoint, 42);
      assert.deepEqual(ledgerOutcomes(fakes), ['rescale:completed']);
      return { workflowId };
    },
  },
  {
    // A replan of the job (a recovery's: the host of a new subtask was lost) ends while the window
    // waits for barrier C; the abort that follows takes that replan, at the requested parallelism,
    // as its compensation (patch rescale-joins-ended-replan): one replan, not two.
    name: 'rescale-operator-joins-ended-replan',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { checkpointStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const { workflowId, handle } = await rescaleInWindow({ client, taskQueue, workload, fakes });
      await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId: `replan:${workload}`, args: [{ workload, parallelism: { agg: 4 }, reason: 'runtime rt-9 lost', cause: 'recover:rt-9' }],
      });
      await handle.signal(rescaleAbortSignal, { reason: 'stop: its subtask\'s host was lost' });
      const status = (await handle.result()) as RescaleStatus;
      assert.equal(status.outcome, 'compensated');
      assert.equal(status.compensation?.joined, `replan:${workload}`);
      assert.deepEqual(status.compensation?.outcome?.parallelism?.to, { src: 1, agg: 4, out: 1 });
      assert.equal(fakes.count('findLedgerRow'), 1);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:compensated']);
      return { workflowId };
    },
  },
  {
    // A replan of the job that began (and ended) before the rescale's window (a failed subtask's
    // report: network chaos seed 48 joined such a replan) did not cover the window's new subtask or
    // its paused clock: when the rescale aborts it does not take that replan as its compensation
    // (patch rescale-joins-ended-replan judges the replan's startedAt) and runs its own. Two
    // replans, the rescale compensated by its own at the requested parallelism.
    name: 'rescale-operator-replans-after-earlier-replan',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { checkpointStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      await client.workflow.execute(stopTheWorldReplan, {
        taskQueue, workflowId: `replan:${workload}`, args: [{ workload, parallelism: { agg: 4 }, reason: 'a failed subtask', cause: `subtask-failures:${workload}` }],
      });
      const { workflowId, handle } = await rescaleInWindow({ client, taskQueue, workload, fakes });
      await handle.signal(rescaleAbortSignal, { reason: 'stop: recorded abort' });
      const status = (await handle.result()) as RescaleStatus;
      assert.equal(status.outcome, 'compensated');
      // that replan applied the requested agg = 4 too, but before the window: not joined
      assert.equal(status.compensation?.joined, null);
      assert.deepEqual(status.compensation?.outcome?.parallelism?.to, { src: 1, agg: 4, out: 1 });
      assert.equal(fakes.count('findLedgerRow'), 1);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'replan:completed', 'rescale:compensated']);
      return { workflowId };
    },
  },
  {
    // An operator's abort while barrier C is awaited: the stop-the-world replan child at the requested parallelism.
    name: 'rescale-operator-aborted',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { checkpointStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const { workflowId, handle } = await rescaleInWindow({ client, taskQueue, workload, fakes });
      await handle.signal(rescaleAbortSignal, { reason: 'stop: recorded abort' });
      const status = (await handle.result()) as RescaleStatus;
      assert.equal(status.outcome, 'compensated');
      assert.equal(status.phase, 'aborted');
      assert.equal(status.compensation?.reason, 'stop: recorded abort');
      assert.deepEqual(status.compensation?.outcome?.parallelism?.to, { src: 1, agg: 4, out: 1 });
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:compensated']);
      return { workflowId, extra: [{ name: 'stop-the-world-replan-after-rescale-abort', workflowId: `replan:${workload}` }] };
    },
  },
  {
    // 2 → 3 is not an integer factor: straight to the stop-the-world replan child, saying why.
    name: 'rescale-operator-not-hot',
    fakes: (name) => fakeActivities(streamWorkload(name), 5),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `rescale:${workload}`;
      const status = (await client.workflow.execute(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 3 }] })) as RescaleStatus;
      assert.equal(status.outcome, 'replanned');
      assert.match(status.reason ?? '', /not an integer factor/);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:replanned']);
      return { workflowId };
    },
  },
  {
    // Preparing the hot cutover cannot reach an agent (chaos seed 11): the clock is resumed and the
    // rescale goes through the replan at the asked parallelism instead of failing.
    name: 'rescale-operator-plan-unreachable',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { planRescaleUnreachable: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `rescale:${workload}`;
      const status = (await client.workflow.execute(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 4 }] })) as RescaleStatus;
      assert.equal(status.outcome, 'replanned');
      assert.match(status.reason ?? '', /unreachable/);
      assert.equal(fakes.count('resumeCheckpointClock'), 1);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:replanned']);
      return { workflowId };
    },
  },
  {
    name: 'retire-workload',
    fakes: (name) => fakeActivities(serviceWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const result = await client.workflow.execute(retireWorkload, { taskQueue, workflowId, args: [{ workload }] });
      assert.equal(result.stopped.length, 3);
      assert.deepEqual(ledgerOutcomes(fakes), ['retire:completed']);
      return { workflowId };
    },
  },
  {
    // Three passes (one starts an applyPlan child, one fails, one is skipped), then continue-as-new:
    // the recorded history is the first run's.
    name: 'reconcile',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1, {
      passes: [
        { skipped: false, inputsKey: 'k1', planIds: [{ workload: name, planId: `plan-${name}` }] },
        new Error('the store did not answer'),
        { skipped: true, inputsKey: 'k1', planIds: [] },
      ],
    }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `reconcile:${taskQueue}`;
      const handle = await client.workflow.start(reconcile, { taskQueue, workflowId, args: [{ intervalMs: 100, passesPerRun: 3 }] });
      const runId = handle.firstExecutionRunId;
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new, got ${end}`);
      await client.workflow.getHandle(`scale:${workload}`).result(); // the applyPlan the first pass started
      // the next run keeps going: the recorder terminates it once this worker has stopped
      assert.equal(fakes.count('reconcilePass') >= 3, true);
      assert.deepEqual(ledgerOutcomes(fakes), ['apply:completed']);
      return { workflowId, runId };
    },
  },
  {
    // The API's wake (a workload PUT, a runtime registered) cuts the loop's interval short: each
    // pass here follows a wake, not its 10-minute timer (cancelled, then a new one).
    name: 'reconcile-woken',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1, { passes: [{ skipped: true, inputsKey: 'k1', planIds: [] }, { skipped: true, inputsKey: 'k1', planIds: [] }] }),
    async run({ client, taskQueue, fakes }) {
      const workflowId = `reconcile:${taskQueue}`;
      const handle = await client.workflow.start(reconcile, { taskQueue, workflowId, args: [{ intervalMs: 600_000, passesPerRun: 2 }] });
      const runId = handle.firstExecutionRunId;
      // Each wake once the pass is over and its timer runs (a wake during a pass skips the timer instead).
      const timersStarted = async () => (await handle.fetchHistory()).events?.filter((event) => event.timerStartedEventAttributes).length ?? 0;
      for (const passes of [1, 2]) {
        await waitFor(`reconcile pass ${passes} over, its timer running`, async () => fakes.count('reconcilePass') >= passes && (await timersStarted()) >= passes);
        await handle.signal(wakeSignal);
      }
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new after two woken passes, got ${end}`);
      return { workflowId, runId };
    },
  },
  {
    name: 'scale-out',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 200 });
      assert.equal(status.outcome, 'completed');
      assert.equal(status.comparison?.verdict, 'pass');
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      // Short store calls run as local activities (no server round trip), and the plan is made once.
      const history = await ctx.client.workflow.getHandle(workflowId).fetchHistory();
      const scheduled = (history.events ?? []).flatMap((event) => event.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
      assert.deepEqual(scheduled, ['captureEvidence', 'preparePlan', 'gatherGateFacts', 'startTasks', 'awaitTasksReady', 'captureEvidence']);
      assert.deepEqual((['loadWorkload', 'loadPlacement', 'commitPlacement', 'appendLedger'] as const).map((type) => ctx.fakes.count(type)), [2, 1, 1, 1]);
      return { workflowId };
    },
  },
  {
    name: 'scale-out-refused',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2, { probesFail: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'refused');
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:refused']);
      return { workflowId };
    },
  },
  {
    // A contract that does not say what the output lands on: the downstream row refuses the unknown.
    name: 'scale-out-refused-unknown-downstream',
    fakes: (name) => fakeActivities(withoutDownstream(consumerWorkload(name, 2)), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'refused');
      assert.match(status.evidenceGap ?? '', /^downstream: .*accept: \["downstream"\]/m);
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:refused']);
      return { workflowId };
    },
  },
  {
    // The same unknown, accepted by the request: the row passes saying so, and the change goes through.
    name: 'scale-out-accepts-unknown-downstream',
    fakes: (name) => fakeActivities(withoutDownstream(consumerWorkload(name, 2)), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, accept: ['downstream'] });
      assert.equal(status.outcome, 'completed');
      assert.match(status.gates?.rows.find((row) => row.gate === 'downstream')?.detail ?? '', /accepted by the request/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      return { workflowId };
    },
  },
  {
    // The size it was chosen from moved before it ran (chaos seed 7): 2 → 2 is no scale-out; refused, nothing changed.
    name: 'scale-out-wrong-way',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 2, soakMs: 0 });
      assert.equal(status.outcome, 'refused');
      assert.match(status.error ?? '', /not above the current 2/);
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:refused']);
      return { workflowId };
    },
  },
  {
    name: 'scale-out-manual-approved',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, approval: 'manual' }, async (handle) => {
        await inPhase(handle, 'awaiting-approval');
        await handle.executeUpdate(approveUpdate, { args: [{ by: 'recorder' }] });
      });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.approval, { mode: 'manual', decision: 'approved', by: 'recorder' });
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      return { workflowId };
    },
  },
  {
    name: 'scale-out-manual-rejected',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, approval: 'manual' }, async (handle) => {
        await inPhase(handle, 'awaiting-approval');
        await handle.executeUpdate(rejectUpdate, { args: [{ by: 'recorder' }] });
      });
      assert.equal(status.outcome, 'rejected');
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:rejected']);
      return { workflowId };
    },
  },
  {
    // An abort while soaking, after the placement write: compensated by the replan child.
    name: 'scale-out-aborted',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 3_600_000 }, async (handle) => {
        await inPhase(handle, 'soaking');
        await handle.signal(abortSignal, { reason: 'stop: recorded abort' });
      });
      assert.equal(status.outcome, 'compensated');
      assert.equal(status.compensation?.reason, 'stop: recorded abort');
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // The Web UI's "Request Cancellation" while awaiting approval, before any change: `cancelled`, nothing written.
    name: 'scale-out-cancelled',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, approval: 'manual' }, async (handle) => {
        await inPhase(handle, 'awaiting-approval');
        await handle.cancel();
      });
      assert.equal(status.outcome, 'cancelled');
      assert.equal(status.phase, 'cancelled');
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:cancelled']);
      return { workflowId };
    },
  },
  {
    // Temporal took the API's start in time, but no worker picked it up until after the admission
    // deadline (busy or away; here a start delay): the recorded start decides, so it runs.
    name: 'scale-out-admitted-worker-late',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const handle = await scaleOutAdmittedBy(ctx, new Date(Date.now() + 1_000), '2 seconds');
      const status = await handle.result();
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      return { workflowId: handle.workflowId };
    },
  },
  {
    // A start Temporal recorded after its admission deadline (the API answered 503): refused before any command.
    name: 'scale-out-start-expired',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const handle = await scaleOutAdmittedBy(ctx, new Date(Date.now() - 1_000));
      const failure = await handle.result().then(() => null, (error: Error) => error);
      assert.match(String((failure?.cause as Error | undefined)?.message), /after its admission deadline/);
      assert.deepEqual(ctx.fakes.calls, []);
      return { workflowId: handle.workflowId };
    },
  },
  {
    // A Temporal cancellation while soaking, after the placement write: compensated by the replan
    // child in a non-cancellable scope, the ledger row after it; the workflow completes.
    name: 'scale-out-cancelled-after-change',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 3_600_000 }, async (handle) => {
        await inPhase(handle, 'soaking');
        await handle.cancel();
      });
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /cancellation requested/);
      assert.equal(status.compensation?.outcome?.generation, 2);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // A Temporal cancellation while barrier C is awaited (the clock paused): the replan at the requested parallelism.
    name: 'rescale-operator-cancelled',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { checkpointStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const { workflowId, handle } = await rescaleInWindow({ client, taskQueue, workload, fakes });
      await handle.cancel();
      const status = (await handle.result()) as RescaleStatus;
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /cancellation requested/);
      assert.deepEqual(status.compensation?.outcome?.parallelism?.to, { src: 1, agg: 4, out: 1 });
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:compensated']);
      return { workflowId };
    },
  },
  {
    // A Temporal cancellation while planRescale still prepares (it may pause the clock): since
    // patch rescale-prepare-ends-before-resume the clock is resumed once planRescale ended; cancelled.
    name: 'rescale-operator-cancelled-preparing',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { prepareSlow: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `rescale:${workload}`;
      const handle = await client.workflow.start(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 4 }] });
      await waitFor(`${workflowId} preparing`, () => fakes.count('planRescale') === 1);
      await handle.cancel();
      const status = (await handle.result()) as RescaleStatus;
      assert.equal(status.outcome, 'cancelled');
      assert.equal(fakes.count('resumeCheckpointClock'), 1);
      assert.equal(fakes.count('commitRescaleLayout'), 0);
      assert.deepEqual(ledgerOutcomes(fakes), ['rescale:cancelled']);
      return { workflowId };
    },
  },
  {
    // A rescale that is not hot finds a replan of the job running (asked by another, at agg = 2)
    // and joins it: since patch rescale-joined-replan-judged, not completed, naming requested and
    // applied; since rescale-joined-replan-refused, refused (superseded, nothing of its own changed).
    name: 'rescale-operator-joined-replan',
    fakes: (name) => fakeActivities(streamWorkload(name), 5, { stopTheWorldStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const replan = await client.workflow.start(stopTheWorldReplan, {
        taskQueue, workflowId: `replan:${workload}`, args: [{ workload, parallelism: { agg: 2 }, reason: 'a recovery', cause: `recover:rt-9` }],
      });
      await waitFor(`replan:${workload} stopping the world`, () => fakes.count('stopStreamJob') === 1);
      const workflowId = `rescale:${workload}`;
      const status = (await client.workflow.execute(rescaleOperator, { taskQueue, workflowId, args: [{ job: workload, operator: 'agg', parallelism: 3 }] })) as RescaleStatus;
      await replan.result();
      assert.equal(status.outcome, 'refused');
      assert.equal(status.compensation?.joined, `replan:${workload}`);
      assert.equal(status.compensation?.applied, 2);
      assert.equal(status.error, `requested agg = 3; the running replan:${workload} it joined applied agg = 2`);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'rescale:refused']);
      return { workflowId };
    },
  },
  {
    // New task errors after the change: rolled back to the previous size through the replan child.
    name: 'scale-out-regression',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2, { errorsAfterChange: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'compensated');
      assert.equal(status.comparison?.verdict, 'regression');
      assert.equal(status.compensation?.replicas, 2);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // A service's latency ×80 after the change: judged against the baseline, a regression rolled back to the start.
    name: 'scale-out-latency-regression',
    fakes: (name) => fakeActivities(knownService(name, 2), 2, { latencyAfterChange: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'compensated');
      assert.deepEqual(status.comparison?.reasons, [
        'p50 latency grew from 5 to 400 ms (more than ×1.5 and +100 ms)', 'p95 latency grew from 9 to 480 ms (more than ×1.5 and +300 ms)',
      ]);
      assert.equal(status.compensation?.replicas, 2);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // A consumer's backlog grown from 500 to 6,000 records after the change: judged since patch
    // resources-and-backlog-judged, a regression rolled back to the start, naming both figures.
    name: 'scale-out-backlog-regression',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2, { backlogAfterChange: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'compensated');
      assert.deepEqual(status.comparison?.reasons, ['backlog grew from 500 records to 6000 records (more than ×2 and +1000 records)']);
      assert.equal(status.compensation?.replicas, 2);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // Steps from the workload's own definition (no steps in the request): 2 → 3 → 4, each good.
    name: 'scale-out-workload-steps',
    fakes: (name) => fakeActivities({ ...knownService(name, 2), steps: [1, 'rest'] } as Workload, 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.steps?.map((step) => `${step.size}:${step.outcome}`), ['3:good', '4:good']);
      return { workflowId };
    },
  },
  {
    // Steps 2 → 3 → 4 with latency ×80 past 3 tasks: rolled back to 3, the last good step.
    name: 'scale-out-steps-regression',
    fakes: (name) => fakeActivities(knownService(name, 2), 2, { latencyAbove: 3 }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, steps: [1, 'rest'] });
      assert.equal(status.outcome, 'compensated');
      assert.deepEqual(status.steps?.map((step) => `${step.size}:${step.outcome}`), ['3:good', '4:regression']);
      assert.equal(status.compensation?.replicas, 3);
      assert.match(status.compensation?.reason ?? '', /step 2 of 2, size 4.*rolling back to 3, the last good step/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // A Deployment 2 → 4 through the runtime port: the first scale write finds the object moved (409),
    // the workflow reads it again, finds the size it decided from unchanged, and writes again.
    name: 'kubernetes-scale-out',
    fakes: (name) => fakeActivities(kubernetesService(name, 2), 2, { scaleConflictOnce: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'completed');
      assert.equal(status.kubernetes?.conflicts, 1);
      assert.equal(status.gates?.rows.find((r) => r.gate === 'capacity')?.passed, true);
      assert.equal(ctx.fakes.count('kubernetesScale'), 2);
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      return { workflowId };
    },
  },
  {
    // A Deployment 2 → 4 whose contract names app_errors_total: read from the pods before the write
    // and after the soak; the new pods serve 25 errors a second where the old serve 1, so the
    // metric's row is a regression and the size goes back to 2 (patch kubernetes-metrics-judged).
    name: 'kubernetes-scale-out-metrics-regression',
    fakes: (name) => fakeActivities(meteredKubernetesService(name, 2), 2, { newPodsServeErrors: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0 });
      assert.equal(status.outcome, 'compensated');
      assert.equal(ctx.fakes.count('kubernetesPodMetrics'), 2);
      assert.equal(status.comparison?.rows?.find((r) => r.check === 'metric app_errors_total')?.verdict, 'regression');
      assert.match(status.compensation?.reason ?? '', /metric app_errors_total/);
      assert.equal(ctx.fakes.count('kubernetesScale'), 2); // 2 → 4, then back to 2
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:compensated']);
      return { workflowId };
    },
  },
  {
    // A Deployment 2 → 4 with approval manual: the gates, then the wait for an operator, then the write (patch kubernetes-manual-approval).
    name: 'kubernetes-scale-out-manual-approved',
    fakes: (name) => fakeActivities(kubernetesService(name, 2), 2),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleOut, { replicas: 4, soakMs: 0, approval: 'manual' }, async (handle) => {
        await inPhase(handle, 'awaiting-approval');
        assert.equal(ctx.fakes.count('kubernetesScale'), 0);
        await handle.executeUpdate(approveUpdate, { args: [{ by: 'recorder' }] });
      });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.approval, { mode: 'manual', decision: 'approved', by: 'recorder' });
      assert.equal(ctx.fakes.count('kubernetesScale'), 1);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-out:completed']);
      return { workflowId };
    },
  },
  {
    // A Deployment 4 → 2: the idle pods are marked, acknowledge, and only then are the replicas lowered.
    name: 'kubernetes-scale-in',
    fakes: (name) => fakeActivities(kubernetesService(name, 4), 4),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'completed');
      const victims = [`${ctx.workload}-1`, `${ctx.workload}-3`];
      assert.deepEqual(status.kubernetes?.victims, victims);
      assert.deepEqual(status.kubernetes?.deleted, victims);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:completed']);
      return { workflowId };
    },
  },
  {
    // No acknowledgement by the deadline: compensated, the marks taken off, the replicas never lowered.
    name: 'kubernetes-scale-in-unacknowledged',
    fakes: (name) => fakeActivities(kubernetesService(name, 4), 4, { drainNeverAcknowledged: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2, drainTimeoutMs: 1000 });
      assert.equal(status.outcome, 'compensated');
      assert.equal(ctx.fakes.count('kubernetesScale'), 0);
      assert.equal(ctx.fakes.count('kubernetesUnmarkVictims'), 1);
      assert.deepEqual(status.kubernetes?.unmarked, [`${ctx.workload}-1`, `${ctx.workload}-3`]);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:compensated']);
      return { workflowId };
    },
  },
  {
    name: 'scale-in',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.scaleIn?.victims.map((v) => v.index), [1, 3]); // idle first, then the highest index
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:completed']);
      return { workflowId };
    },
  },
  {
    name: 'scale-in-refused',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2, minReplicas: 4 });
      assert.equal(status.outcome, 'refused');
      assert.equal(ctx.fakes.count('drainTasks'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:refused']);
      return { workflowId };
    },
  },
  {
    // Another change wrote the placement after the victims were chosen (chaos seed 14): refused as
    // stale, nothing drained, not failed.
    name: 'scale-in-stale',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4, { staleDecision: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'refused');
      assert.match(status.evidenceGap ?? '', /decided on placement fence 3, now 4; decide again/);
      assert.equal(ctx.fakes.count('drainTasks'), 0);
      assert.equal(ctx.fakes.count('commitPlacement'), 0);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:stale-plan']);
      return { workflowId };
    },
  },
  {
    // A drain past its deadline: compensated by the replan child at the requested size.
    name: 'scale-in-compensated',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4, { drainDeadlineOnce: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /drain-deadline/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-in:compensated']);
      return { workflowId };
    },
  },
  {
    // One transient error over the after window's work: the errors row judges the rate by its exact
    // test and passes, so the scale-in completes (since patch error-rate-tested; before it, any new
    // error compensated).
    name: 'scale-in-transient-error',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4, { transientErrorAfterWork: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'completed');
      const errorsRow = status.comparison?.rows?.find((row) => row.check === 'errors');
      assert.equal(errorsRow?.verdict, 'pass');
      assert.match(errorsRow?.detail ?? '', /^1 new task error\(s\); error rate non-inferior: 0 error\(s\) in 100 record\(s\) before, 1 in 2000 after/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['scale-in:completed']);
      return { workflowId };
    },
  },
  {
    // A consumer 1,000 records behind processes half the records per second over the scale-in's
    // soak: the throughput row fails (since patch throughput-tested), compensated by the replan.
    name: 'scale-in-throughput-regression',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4, { throughputHalvesBehind: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2, soakMs: 1000 });
      assert.equal(status.outcome, 'compensated');
      const row = status.comparison?.rows?.find((r) => r.check === 'throughput');
      assert.equal(row?.verdict, 'regression');
      assert.match(row?.detail ?? '', /^medians 400.5 → 200.25 records\/s; worse beyond the margin: Mann-Whitney U/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-in:compensated']);
      return { workflowId };
    },
  },
  {
    // A comparison with a failed row after the drain (new task errors): compensated by the replan
    // at the size applied, the row named (since patch evidence-judged; before it, completed).
    name: 'scale-in-regression',
    fakes: (name) => fakeActivities(consumerWorkload(name, 4), 4, { errorsAfterChange: true }),
    async run(ctx) {
      const { workflowId, status } = await scale(ctx, scaleIn, { replicas: 2 });
      assert.equal(status.outcome, 'compensated');
      assert.equal(status.compensation?.replicas, 2);
      assert.match(status.compensation?.reason ?? '', /^regression after scale-in: 20 new task error\(s\)/);
      assert.deepEqual(ledgerOutcomes(ctx.fakes), ['replan:completed', 'scale-in:compensated']);
      return { workflowId };
    },
  },
  {
    // A rollout of 3 replicas onto the workload's new revision: a canary step of one, then a batch of
    // two, each gated, written (a new task per replaced replica), converged and compared; a ledger row per step.
    name: 'rollout',
    fakes: (name) => fakeActivities({ ...knownService(name, 3), runs: 'r-new' }, 3, { placedRevision: 'r-old' }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const status = await client.workflow.execute(rollout, { taskQueue, workflowId, args: [{ workload, revision: 'r-new', soakMs: 100, convergeTimeoutMs: 5000 }] });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.steps.map((s) => `${s.role}:${s.outcome}:${s.replaced.length}`), ['canary:good:1', 'batch:good:2']);
      assert.deepEqual(ledgerOutcomes(fakes), ['rollout:running', 'rollout:running', 'rollout:completed']);
      return { workflowId };
    },
  },
  {
    // New task errors after the canary step: a regression, the canary rolled back to the old revision
    // (its own step in reverse, no replan), the old revision current again, ended compensated naming the row.
    name: 'rollout-compensated',
    fakes: (name) => fakeActivities({ ...knownService(name, 3), runs: 'r-new' }, 3, { placedRevision: 'r-old', errorsAfterChange: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const status = await client.workflow.execute(rollout, { taskQueue, workflowId, args: [{ workload, revision: 'r-new', soakMs: 100, convergeTimeoutMs: 5000 }] });
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /^regression at the canary step \(1 of 2\): .*task error/);
      assert.deepEqual(status.compensation && { restored: status.compensation.restored, replanned: status.compensation.replanned, rolledBack: status.compensation.rolledBack.length }, { restored: 'r-old', replanned: false, rolledBack: 1 });
      assert.deepEqual(ledgerOutcomes(fakes), ['rollout:compensated']);
      return { workflowId };
    },
  },
  {
    // The canary never becomes ready (its converge deadline): the step failed after its write, with
    // the replica it replaced still running (make-before-break stops it only once the canary is
    // ready). The roll-back replaces the canary with the old revision and stops that replica, held
    // by no placement (patch rollout-stops-replaced), then the old revision is current again.
    name: 'rollout-canary-never-ready',
    fakes: (name) => fakeActivities({ ...knownService(name, 3), runs: 'r-new' }, 3, { placedRevision: 'r-old', convergeDeadlineOnce: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const status = await client.workflow.execute(rollout, { taskQueue, workflowId, args: [{ workload, revision: 'r-new', soakMs: 100, convergeTimeoutMs: 5000 }] });
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /^the canary step \(1 of 2\) failed: .*not ready/);
      const canary = status.steps[0].replaced[0];
      assert.deepEqual(status.compensation?.stoppedReplaced, [canary.from]);
      assert.equal(fakes.count('drainTasks'), 2); // the canary itself (rolled back), then the replica it had replaced
      assert.deepEqual(ledgerOutcomes(fakes), ['rollout:compensated']);
      return { workflowId };
    },
  },
  {
    // A consumer's rollout cancelled through Temporal while its canary soaks: an abort after a change,
    // so the canary is rolled back (drained first, as every consumer replacement) and it ends compensated.
    name: 'rollout-cancelled',
    fakes: (name) => fakeActivities({ ...consumerWorkload(name, 3), runs: 'r-new' }, 3, { placedRevision: 'r-old' }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `scale:${workload}`;
      const handle = await client.workflow.start(rollout, { taskQueue, workflowId, args: [{ workload, revision: 'r-new', soakMs: 3_600_000, convergeTimeoutMs: 5000 }] });
      await inPhase(handle, 'soaking');
      await handle.cancel();
      const status = await handle.result();
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /cancellation requested/);
      assert.deepEqual(status.compensation && { replanned: status.compensation.replanned, rolledBack: status.compensation.rolledBack.length }, { replanned: false, rolledBack: 1 });
      assert.equal(fakes.count('drainTasks'), 2); // the canary's predecessor drained, then the canary itself
      assert.deepEqual(ledgerOutcomes(fakes), ['rollout:compensated']);
      return { workflowId };
    },
  },
  {
    // A lost runtime's replica replaced elsewhere: declared LOST, decided, applied make-before-break
    // without draining the lost task, converged, one ledger row.
    name: 'recover-runtime',
    fixedWorkflowIds: ['recover:rt-0'],
    fakes: (name) => fakeActivities(serviceWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = 'recover:rt-0';
      const status = await client.workflow.execute(recoverRuntime, { taskQueue, workflowId, args: [{ runtime: 'rt-0', reason: 'recorded', convergeTimeoutMs: 5000 }] });
      assert.equal(status.outcome, 'completed');
      assert.deepEqual(status.decisions.map((d) => [d.workload, d.applied]), [[workload, 'converged']]);
      assert.equal(fakes.count('drainTasks'), 0); // the task on the LOST runtime is revoked, never drained
      assert.deepEqual(ledgerOutcomes(fakes), ['recover:completed']);
      return { workflowId };
    },
  },
  {
    // The replacement misses its convergence deadline: the stop-the-world replan of the workload.
    name: 'recover-runtime-compensated',
    fixedWorkflowIds: ['recover:rt-1'],
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2, { convergeDeadlineOnce: true }),
    async run({ client, taskQueue, fakes }) {
      const workflowId = 'recover:rt-1';
      const status = await client.workflow.execute(recoverRuntime, { taskQueue, workflowId, args: [{ runtime: 'rt-1', by: 'lease-sweeper', expectedFence: 8, convergeTimeoutMs: 5000 }] });
      assert.equal(status.outcome, 'compensated');
      assert.match(status.compensation?.reason ?? '', /converge-deadline/);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed', 'recover:compensated']);
      return { workflowId };
    },
  },
  {
    // The job's replan, started by the recovery, is cancelled by hand (the Web UI, `temporal workflow
    // cancel replan:<job>`; chaos seed 33) while it takes its baseline, before anything stopped: the
    // recovery ends cancelled, naming the replan to start again.
    name: 'recover-runtime-replan-cancelled-by-hand',
    fixedWorkflowIds: ['recover:rt-2'],
    fakes: (name) => fakeActivities(streamWorkload(name), 3, { baselineSlow: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = 'recover:rt-2';
      const handle = await client.workflow.start(recoverRuntime, { taskQueue, workflowId, args: [{ runtime: 'rt-2', reason: 'recorded', convergeTimeoutMs: 5000 }] });
      await waitFor('the recovery\'s replan taking its baseline', () => fakes.count('captureEvidence') === 1);
      await client.workflow.getHandle(`replan:${workload}`).cancel();
      const status = await handle.result();
      assert.equal(status.outcome, 'cancelled');
      assert.deepEqual(status.decisions.map((d) => [d.workload, d.applied]), [[workload, 'cancelled']]);
      // the replan's own row first (patch replan-cancellation-ledgered), then the recovery's
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:cancelled', 'recover:cancelled']);
      assert.match(fakes.ledger[1].reason ?? '', new RegExp(`replan:${workload} cancelled before it finished: .*start that replan again`));
      assert.equal(fakes.count('stopStreamJob'), 0);
      return { workflowId, extra: [{ name: 'stop-the-world-replan-cancelled-by-hand', workflowId: `replan:${workload}` }] };
    },
  },
  {
    // A stream job's replan cancelled by hand once it began to stop the world (network chaos seed 42
    // left the world stopped that way): since patch replan-finishes-once-begun it finishes, placed,
    // converged and ledgered, the row noting the cancellation that came too late.
    name: 'stop-the-world-replan-cancelled-once-begun',
    fakes: (name) => fakeActivities(streamWorkload(name), 3, { stopTheWorldStuck: true }),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `replan:${workload}`;
      const handle = await client.workflow.start(stopTheWorldReplan, { taskQueue, workflowId, args: [{ workload, parallelism: { agg: 2 }, reason: 'recorded' }] });
      await waitFor(`${workflowId} stopping the world`, () => fakes.count('stopStreamJob') === 1);
      await handle.cancel();
      const outcome = (await handle.result()) as StreamReplanOutcome;
      assert.deepEqual(outcome.parallelism?.to, { src: 1, agg: 2, out: 1 });
      assert.equal(fakes.count('startTasks'), 1);
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      assert.match(String((fakes.ledger[0].inputs as { cancellationIgnored?: string }).cancellationIgnored), /came after the world began to stop/);
      return { workflowId };
    },
  },
  {
    // Three passes (one declares rt-0 LOST and starts its recovery, one holds after an outage, one
    // finds a mass expiry), then continue-as-new: the recorded history is the first run's.
    name: 'lease-sweeper',
    fixedWorkflowIds: ['recover:rt-0'], // the recovery its first pass starts
    fakes: (name) => fakeActivities(serviceWorkload(name), 2, {
      sweeps: [
        { ...idleSweep, declared: [{ runtimeId: 'rt-0', fence: 8, leaseExpiresAt: '2030-01-01T00:00:00.000Z' }], recover: [{ runtimeId: 'rt-0', fence: 8, reason: 'lease expired' }], lost: ['rt-0'] },
        { ...idleSweep, guard: { code: 'api-resumed', detail: 'the API came back' }, lost: ['rt-0'], waiting: ['rt-1'] },
        { ...idleSweep, massExpiry: [{ zone: 'b', population: 3, expired: ['rt-1'], suspects: ['rt-1', 'rt-2'], held: ['rt-1', 'rt-2'] }], recover: [{ runtimeId: 'rt-0', fence: 8, reason: 'LOST with assignments left' }], lost: ['rt-0'] },
      ],
    }),
    async run({ client, taskQueue, fakes }) {
      const workflowId = `lease-sweeper:${taskQueue}`;
      const handle = await client.workflow.start(leaseSweeper, { taskQueue, workflowId, args: [{ passesPerRun: 3 }] });
      const runId = handle.firstExecutionRunId;
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new, got ${end}`);
      const recovery = await client.workflow.getHandle('recover:rt-0').result(); // the one recovery the first pass started
      assert.equal(recovery.outcome, 'completed');
      assert.equal(fakes.count('markRuntimeLost'), 1); // the third pass found rt-0 again: one automatic recovery per loss
      return { workflowId, runId };
    },
  },
  {
    // An observation by signal-with-start asks for 4 replicas of 2: a scaleOut child under
    // scale:<workload>, then a "no change" decision on the new size, then continue-as-new after two
    // decisions: the recorded history is the first run's.
    name: 'autoscaler',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `autoscale:${workload}`;
      const policy = {
        workloads: [workload], minReplicas: 1, maxReplicas: 8, targets: { qpsPerInstance: 100 }, tolerance: 0.1, scaleUpStabilizationMs: 0,
        scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, changeWindows: [{ cron: '0 9 * * 1-5', durationMs: 3_600_000, forbid: 'scale-in' }], soakMs: 100, drainTimeoutMs: 5000,
      };
      const handle = await client.workflow.signalWithStart(autoscaler, {
        taskQueue, workflowId, args: [{ tier: workload, policy, revision: 1, decisionsPerRun: 2 }], signal: observeSignal, signalArgs: [{ qps: 400 }],
      });
      const runId = handle.signaledRunId;
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new, got ${end}`);
      assert.deepEqual(ledgerOutcomes(fakes).slice(0, 3), ['autoscale:started', 'scale-out:completed', 'autoscale:no-change']);
      assert.deepEqual([fakes.ledger[0].fromReplicas, fakes.ledger[0].toReplicas], [2, 4]);
      return { workflowId, runId };
    },
  },
  {
    // A tier that pulls its workload's Kafka lag itself (policy.observe.kafkaLag), no signal sent:
    // the reading, 400 records at 100 per replica, asks for 4 of 2: a scaleOut child; the decision
    // after it, on that reading at the new size, is "no change"; continue-as-new after two decisions.
    name: 'autoscaler-kafka-lag',
    fakes: (name) => fakeActivities(consumerWorkload(name, 2), 2),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `autoscale:${workload}`;
      const policy = {
        workloads: [workload], minReplicas: 2, maxReplicas: 8, targets: { queueDepthPerInstance: 100 }, tolerance: 0.1, scaleUpStabilizationMs: 0,
        scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, soakMs: 100, drainTimeoutMs: 5000, observe: { kafkaLag: { workload, intervalMs: 1000 } },
      };
      const handle = await client.workflow.start(autoscaler, { taskQueue, workflowId, args: [{ tier: workload, policy, revision: 1, decisionsPerRun: 2 }] });
      const runId = handle.firstExecutionRunId;
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new, got ${end}`);
      assert.deepEqual(ledgerOutcomes(fakes).slice(0, 3), ['autoscale:started', 'scale-out:completed', 'autoscale:no-change']);
      assert.deepEqual([fakes.ledger[0].fromReplicas, fakes.ledger[0].toReplicas], [2, 4]);
      assert.match(String((fakes.ledger[0].inputs as { observation: { pulled: string } }).observation.pulled), /^kafka lag of .* \(committed offsets\)$/);
      return { workflowId, runId };
    },
  },
  {
    // A tier holding a stream job: twice the capacity is a hot rescaleOperator child of the keyed
    // aggregate (rescale:<job>), then "no change" on the new parallelism, then continue-as-new.
    name: 'autoscaler-stream',
    fakes: (name) => fakeActivities(streamWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `autoscale:${workload}`;
      const policy = {
        workloads: [workload], minReplicas: 1, maxReplicas: 8, targets: { qpsPerInstance: 100 }, tolerance: 0.1, scaleUpStabilizationMs: 0,
        scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, changeWindows: [],
      };
      const handle = await client.workflow.signalWithStart(autoscaler, {
        taskQueue, workflowId, args: [{ tier: workload, policy, revision: 1, decisionsPerRun: 2 }], signal: observeSignal, signalArgs: [{ qps: 200 }],
      });
      const runId = handle.signaledRunId;
      const end = await client.workflow.getHandle(workflowId, runId, { followRuns: false }).result().then(() => null, (e: unknown) => e);
      assert.ok(end instanceof WorkflowContinuedAsNewError, `expected continue-as-new, got ${end}`);
      assert.deepEqual(ledgerOutcomes(fakes).slice(0, 3), ['autoscale:started', 'rescale:completed', 'autoscale:no-change']);
      assert.deepEqual([fakes.ledger[0].fromReplicas, fakes.ledger[0].toReplicas], [1, 2]);
      assert.equal(fakes.count('drainTasks'), 1); // the retired aggregate subtask, nothing drained as a replica
      return { workflowId, runId };
    },
  },
  {
    // A heartbeat reports two failed subtasks: one of an older generation (ignored) and a current
    // one: one replan:<job> child, abandoned; no report for idleMs ends it. One signal, one batch:
    // the recorded commands never depend on when a second signal lands (subtask-failures.json, the
    // committed recording of the earlier two-signal scenario, is kept and replayed).
    name: 'subtask-failures-one-report',
    fakes: (name) => fakeActivities(streamWorkload(name), 3),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `subtask-failures:${workload}`;
      const handle = await client.workflow.signalWithStart(handleSubtaskFailures, {
        taskQueue, workflowId, args: [{ workload, idleMs: 1000, backoffMs: 0 }],
        signal: subtasksFailedSignal, signalArgs: [{ runtimeId: 'rt-1', taskIds: [`${workload}-1-g0`, `${workload}-1-g1`] }],
      });
      assert.deepEqual(await handle.result(), { replans: 1 });
      await client.workflow.getHandle(`replan:${workload}`).result();
      assert.deepEqual(ledgerOutcomes(fakes), ['replan:completed']);
      assert.equal(fakes.count('currentSubtaskFailures'), 1);
      return { workflowId, extra: [{ name: 'stop-the-world-replan-after-subtask-report', workflowId: `replan:${workload}` }] };
    },
  },
  {
    // A heartbeat reports two crash-looping tasks on one runtime: the first is moved (applyPlan of
    // the decided plan under scale:<workload>, a child), the second left; no report for idleMs ends it.
    name: 'crash-loops',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `crash-loops:${workload}`;
      const handle = await client.workflow.signalWithStart(handleCrashLoops, {
        taskQueue, workflowId, args: [{ workload, idleMs: 1000 }],
        signal: crashLoopingSignal, signalArgs: [{ runtimeId: 'rt-1', taskIds: [`${workload}-0-g1`, `${workload}-1-g1`] }],
      });
      const result = await handle.result();
      assert.deepEqual(result.decisions.map((d) => [d.taskId, d.action, d.applied]), [[`${workload}-0-g1`, 'move', 'completed'], [`${workload}-1-g1`, 'leave', null]]);
      assert.deepEqual(ledgerOutcomes(fakes), ['apply:completed']);
      assert.equal(fakes.count('decideCrashLoop'), 2);
      return { workflowId, extra: [{ name: 'apply-plan-after-crash-loop', workflowId: `scale:${workload}` }] };
    },
  },
  {
    name: 'ping',
    fakes: (name) => fakeActivities(serviceWorkload(name), 1),
    async run({ client, taskQueue, workload, fakes }) {
      const workflowId = `ping:${workload}`;
      const result = await client.workflow.execute(ping, { taskQueue, workflowId, args: [{ note: 'recorded' }] });
      assert.deepEqual(result, { runtimes: 3, ready: 2, workloads: 1, note: 'recorded' });
      assert.deepEqual(fakes.calls, ['storePing']);
      return { workflowId };
    },
  },
];

export interface RecordOptions {
  /** a Temporal server's gRPC address; the scenarios use fixed workflow ids, so a fresh server is best */
  address: string;
  namespace?: string;
  /** where the <name>.json files go; existing files of the same names are overwritten, others left alone */
  outDir?: string;
  /**
   * Keep committed histories (history-versions.ts): an unchanged one is left as it is, a changed one
   * is added as the next `<name>.vN.json` and pinned in the manifest. For HISTORIES_DIR.
   */
  versioned?: boolean;
  /** record only these scenarios (by name); all when absent */
  only?: string[];
  /** the workflow bundle to run; bundled from workflows/index.ts when absent */
  workflowBundle?: { code: string } | { codePath: string };
  log?: (line: string) => void;
}

const IDENTITY = 'scalegate-history-recorder'; // instead of pid@host in every recorded event
/** A scenario takes a second or two; one whose workflow task keeps failing would otherwise wait forever. */
const SCENARIO_TIMEOUT_MS = 60_000;

/**
 * The scenarios' workflows run in this thread's V8 (the SDK's debugMode, as its replayer does), not
 * in a worker thread per worker: each thread compiled the 3.6 MB workflow bundle afresh in its own
 * isolate, 2-6 s of CPU per Worker.create (about 150 s over the 50 scenarios under load), where this
 * isolate compiles it once and every later worker reuses the code (0.1-0.3 s each). debugMode also
 * lifts the limit on one workflow activation; it is set back to the SDK's default of 5 s, so a
 * workflow task that blocks still fails here as on the real worker (the SDK reads
 * `isolateExecutionTimeout` from the options without declaring it, hence the spread).
 */
const IN_THIS_THREAD = { debugMode: true, isolateExecutionTimeout: '5s' };

function withTimeout<T>(what: string, work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Scenarios recorded side by side: they wait on timers and fakes mostly (8 took 19 s where 4 took
 * 29 s, alone on this machine, with the same CPU).
 */
const SCENARIOS_AT_ONCE = 8;

/** Runs every scenario and writes its histories; answers the names written, sorted. */

export async function recordHistories(options: RecordOptions): Promise<string[]> {
  const log = options.log ?? (() => {});
  const namespace = options.namespace ?? 'default';
  const outDir = options.outDir ?? HISTORIES_DIR;
  const workflowBundle = options.workflowBundle
    ?? await bundleWorkflows();
  fs.mkdirSync(outDir, { recursive: true });
  const connection = await Connection.connect({ address: options.address });
  const nativeConnection = await NativeConnection.connect({ address: options.address });
  const client = new Client({ connection, namespace, identity: IDENTITY });
  const written: string[] = [];
  const write = async (name: string, workflowId: string, runId?: string) => {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    assert.ok(history.events?.length, `${name}: empty history`);
    const file = path.join(outDir, `${name}.json`);
    const text = `${historyToJSON(history)}\n`;
    written.push(name);
    if (options.versioned) {
      log(`${name}.json: ${history.events.length} events, ${placeRecorded(outDir, name, text)}`);
      return;
    }
    fs.writeFileSync(`${file}.tmp`, text);
    fs.renameSync(`${file}.tmp`, file);
    log(`${name}.json: ${history.events.length} events`);
  };
  try {
    const unknown = (options.only ?? []).filter((name) => !SCENARIOS.some((s) => s.name === name));
    if (unknown.length) throw new Error(`no scenario named ${unknown.join(', ')}`);
    // Scenarios share nothing (each its own task queue, worker, workload name and workflow ids), so
    // a few run at once: the recording is a replay test's input, and the loop waits on timers mostly.
    const queue = SCENARIOS.filter((s) => !options.only || options.only.includes(s.name));
    const recordOne = async (scenario: Scenario) => {
      const taskQueue = `histories-${scenario.name}`;
      const fakes = scenario.fakes(scenario.name);
      const worker = await Worker.create({
        // the input check is pure: the worker's own, beside the fakes
        connection: nativeConnection, namespace, taskQueue, activities: { ...workflowInputActivities(), ...fakes.activities }, workflowBundle, identity: IDENTITY,
        ...IN_THIS_THREAD,
      });
      const recorded = await worker
        .runUntil(withTimeout(`scenario ${scenario.name}`, scenario.run({ client, taskQueue, workload: scenario.name, fakes }), SCENARIO_TIMEOUT_MS))
        .catch((error: unknown) => {
          throw new Error(`scenario ${scenario.name} failed: ${(error as Error).message} (activity calls: ${fakes.calls.join(', ')})`, { cause: error });
        });
      // Leave nothing running (the reconcile loop's next run): its worker is gone.
      const latest = client.workflow.getHandle(recorded.workflowId);
      if ((await latest.describe()).status.name === 'RUNNING') await latest.terminate('history recorded');
      await write(scenario.name, recorded.workflowId, recorded.runId);
      for (const extra of recorded.extra ?? []) await write(extra.name, extra.workflowId);
    };
    // The next scenario none of whose fixed workflow ids a running one holds (the queue's first
    // otherwise); a runner that finds none waits for one to end.
    const held = new Set<string>();
    const free = (s: Scenario) => !(s.fixedWorkflowIds ?? []).some((id) => held.has(id));
    let ended: () => void = () => {};
    const runners = Array.from({ length: Math.min(SCENARIOS_AT_ONCE, queue.length) }, async () => {
      while (queue.length) {
        const index = queue.findIndex(free);
        if (index === -1) {
          await new Promise<void>((resolve) => { const previous = ended; ended = () => { previous(); resolve(); }; });
          continue;
        }
        const [next] = queue.splice(index, 1);
        for (const id of next.fixedWorkflowIds ?? []) held.add(id);
        try {
          await recordOne(next);
        } finally {
          for (const id of next.fixedWorkflowIds ?? []) held.delete(id);
          const wake = ended;
          ended = () => {};
          wake();
        }
      }
    });
    // Every runner ends before the connection closes: a failed scenario is reported, not masked by
    // closing a connection the other runners' workers still hold.
    const failed = (await Promise.allSettled(runners)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } finally {
    await nativeConnection.close();
    await connection.close();
  }
  return written.sort();
}
