// Activities: thin I/O adapters the workflows call. Built by a factory over injected dependencies
// so tests hand in real or fake ports without module mocking.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import type { EvidenceSnapshot } from '../domain/evidence';
import type { EligibleRuntime, RuntimeProbe } from '../domain/gates';
import { eligibleRuntimes } from '../domain/placement';
import { buildPlan, Plan } from '../domain/plan';
import { verifyExactlyOnce } from '../scripts/verify-sink';
import type { Assignment, ReplicaCount, WorkloadKind } from '../protocol';
import type { Placement, TaskStatus, Unplaced, Workload } from '../protocol';
import { inTransaction } from '../store/db';
import { createLedgerStore, LedgerEntry } from '../store/ledger';
import { createPlanStore } from '../store/plans';
import { createRegistryStore, StalePlacementError } from '../store/registry';
import { createRuntimeStore } from '../store/runtimes';
import { createAgentClient } from './agent-client';

export interface ActivityDeps {
  db: Pool;
  /** the same database's URL, for the consumer sink audit */
  databaseUrl?: string;
  agentToken: string;
  now?: () => number;
}

export interface TaskRef {
  runtimeId: string;
  taskId: string;
}

export interface ReconcilePassResult {
  skipped: boolean;
  inputsKey: string;
  /** plans (stored, with ids) for workloads whose placement the pass decided to change */
  planIds: { workload: string; planId: string }[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Heartbeats when running inside an activity; a no-op when called directly (unit use). */
function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // not in an activity context
  }
}

function idempotencyKey(): string | null {
  try {
    const info = Context.current().info;
    if (!info.workflowExecution) return null;
    return `${info.workflowExecution.workflowId}/${info.workflowExecution.runId}/${info.activityId}`;
  } catch {
    return null;
  }
}

export function createActivities(deps: ActivityDeps) {
  const now = deps.now ?? Date.now;
  const runtimes = createRuntimeStore(deps.db);
  const registry = createRegistryStore(deps.db);
  const ledger = createLedgerStore(deps.db);
  const plans = createPlanStore(deps.db);
  const agents = createAgentClient(deps.agentToken);

  async function endpointOf(runtimeId: string): Promise<string> {
    const runtime = await runtimes.get(runtimeId);
    if (!runtime) throw ApplicationFailure.create({ type: 'unknown-runtime', message: `runtime ${runtimeId} is not registered`, nonRetryable: true });
    return runtime.endpoint;
  }

  async function requireWorkload(name: string): Promise<Workload> {
    const workload = await registry.getWorkload(name);
    if (!workload) throw ApplicationFailure.create({ type: 'not-found', message: `no workload ${name}`, nonRetryable: true });
    return workload;
  }

  return {
    /** A store round trip: proves the worker reaches PostgreSQL. */
    async storePing(): Promise<{ runtimes: number; ready: number; workloads: number }> {
      const all = await runtimes.list();
      const workloads = await registry.listWorkloads();
      return { runtimes: all.length, ready: all.filter((r) => r.status === 'READY').length, workloads: workloads.length };
    },

    async appendLedger(entry: LedgerEntry): Promise<number | null> {
      return ledger.append({ ...entry, idempotencyKey: entry.idempotencyKey ?? idempotencyKey() });
    },

    async loadWorkload(name: string): Promise<Workload | null> {
      return registry.getWorkload(name);
    },

    async loadPlacement(name: string): Promise<Placement | null> {
      return registry.getPlacement(name);
    },

    async loadPlan(planId: string) {
      const plan = await plans.get(planId);
      if (!plan) throw ApplicationFailure.create({ type: 'not-found', message: `no plan ${planId}`, nonRetryable: true });
      return plan;
    },

    /** Plans a change on the current basis and stores it (so apply can check the basis). */
    async preparePlan(input: { workload: string; replicas: ReplicaCount; newGeneration?: boolean }) {
      const workload = await requireWorkload(input.workload);
      return plans.planAndSave(workload, input.replicas, { nowMs: now(), newGeneration: input.newGeneration });
    },

    /**
     * The fenced write: refuses (non-retryable `stale-plan`) when the workload's registry revision
     * or its placement fence moved since the plan was made; otherwise compare-and-set on the fence.
     * Records or clears the workload's unplaced entry in the same breath.
     */
    async commitPlacement(input: {
      workload: string;
      basis: { registryRevision: number; placementFence: number };
      assignments: Assignment[];
      generation: number;
      unplaced: Unplaced | null;
      writer: string;
    }): Promise<Placement> {
      try {
        const placement = await inTransaction(deps.db, async (client) => {
          const { rows } = await client.query<{ revision: string }>('select revision from workloads where name = $1 for update', [input.workload]);
          if (!rows[0] || Number(rows[0].revision) !== input.basis.registryRevision) {
            throw new StalePlacementError(input.workload, input.basis.placementFence);
          }
          return registry.writePlacement(input.workload, input.basis.placementFence, input.assignments,
            { generation: input.generation, writer: input.writer }, client);
        });
        if (input.unplaced) {
          await registry.setUnplaced({ ...input.unplaced, detail: `${input.unplaced.missing} replica(s) have no eligible runtime` });
          await registry.emitEvent('placement.pending', input.workload, { missing: input.unplaced.missing, reason: input.unplaced.reason });
        } else {
          await registry.clearUnplaced(input.workload);
        }
        return placement;
      } catch (error) {
        if (error instanceof StalePlacementError) {
          throw ApplicationFailure.create({ type: 'stale-plan', message: error.message, nonRetryable: true });
        }
        throw error;
      }
    },

    /** Retirement: an empty placement (fenced on whatever is current) and no unplaced entry. */
    async clearPlacement(input: { workload: string; writer: string }): Promise<void> {
      const current = await registry.getPlacement(input.workload);
      await registry.writePlacement(input.workload, current?.fence ?? 0, [], { writer: input.writer });
      await registry.clearUnplaced(input.workload);
    },

    /** Starts (idempotently) each task on its agent and records the ports the agents chose. */
    async startTasks(input: { workload: string; kind: WorkloadKind; spec: unknown; placementFence: number; generation: number; assignments: Assignment[] }) {
      const statuses: TaskStatus[] = [];
      for (const assignment of input.assignments) {
        heartbeat({ started: statuses.length });
        const status = await agents.startTask(await endpointOf(assignment.runtimeId), assignment.taskId, {
          workload: input.workload, kind: input.kind, index: assignment.index, generation: input.generation,
          placementFence: input.placementFence, spec: input.spec, partitions: assignment.partitions,
        });
        statuses.push(status);
      }
      const portsByTask = Object.fromEntries(statuses.filter((s) => s.ports).map((s) => [s.taskId, s.ports]));
      if (Object.keys(portsByTask).length) {
        // Ports are an observation of what the agents bound, not a placement decision: recorded
        // under the same fence, and only if the fence has not moved meanwhile.
        await deps.db.query(
          `update placements set assignments = (
             select jsonb_agg(case when $3::jsonb ? (a->>'taskId') then a || jsonb_build_object('ports', $3::jsonb -> (a->>'taskId')) else a end
                              order by ord)
               from jsonb_array_elements(assignments) with ordinality as t(a, ord))
           where workload = $1 and fence = $2`,
          [input.workload, input.placementFence, JSON.stringify(portsByTask)],
        );
      }
      return statuses;
    },

    /** Waits until every task reports ready; fails non-retryably on a failed task or at the deadline. */
    async awaitTasksReady(input: { tasks: TaskRef[]; timeoutMs: number }): Promise<TaskStatus[]> {
      const deadline = now() + input.timeoutMs;
      for (;;) {
        const statuses = await Promise.all(
          input.tasks.map(async (t) => (await agents.taskStatus(await endpointOf(t.runtimeId), t.taskId).catch(() => null)) ?? null),
        );
        const failed = statuses.find((s) => s?.state === 'failed');
        if (failed) {
          throw ApplicationFailure.create({ type: 'task-failed', message: `task ${failed.taskId} failed: ${failed.detail ?? 'no detail'}`, nonRetryable: true });
        }
        const ready = statuses.filter((s) => s?.state === 'ready').length;
        heartbeat({ ready, of: input.tasks.length });
        if (ready === input.tasks.length) return statuses as TaskStatus[];
        if (now() > deadline) {
          const waiting = input.tasks.filter((_, i) => statuses[i]?.state !== 'ready').map((t) => `${t.taskId}@${t.runtimeId}`);
          throw ApplicationFailure.create({
            type: 'converge-deadline',
            message: `not ready within ${input.timeoutMs} ms: ${waiting.join(', ')}`,
            nonRetryable: true,
          });
        }
        await sleep(250);
      }
    },

    /**
     * Drains and stops tasks; answers the drain receipts. Drains can be long: the activity
     * heartbeats while it waits. An unreachable LOST runtime is skipped (its fence is revoked).
     */
    async stopTasks(input: { tasks: TaskRef[]; graceMs?: number; drainTimeoutMs?: number }) {
      const receipts: { taskId: string; runtimeId: string; state: string; receipt?: Record<string, unknown> }[] = [];
      for (const t of input.tasks) {
        const runtime = await runtimes.get(t.runtimeId);
        if (!runtime) continue;
        const beating = setInterval(() => heartbeat({ draining: t.taskId, stopped: receipts.length }), 2000);
        heartbeat({ draining: t.taskId, stopped: receipts.length });
        try {
          const answer = await agents.stopTask(runtime.endpoint, t.taskId, { graceMs: input.graceMs, drainTimeoutMs: input.drainTimeoutMs });
          receipts.push({ ...t, ...answer });
        } catch (error) {
          if (runtime.status !== 'LOST') throw error;
          receipts.push({ ...t, state: 'unreachable' });
        } finally {
          clearInterval(beating);
        }
      }
      return receipts;
    },

    async savePlan(plan: Plan) {
      return plans.save(plan);
    },

    /**
     * Proof after a scale-in that the removed replicas own nothing: no assignment of the workload on
     * their runtimes (store), none of their tasks on their agents, and (consumers) no partition whose
     * owner is one of them. Fails non-retryably, naming what is still owned.
     */
    async confirmRemoved(input: { workload: string; removed: TaskRef[] }) {
      const workload = await requireWorkload(input.workload);
      const placement = await registry.getPlacement(input.workload);
      const removedRuntimes = new Set(input.removed.map((t) => t.runtimeId));
      const removedTasks = new Set(input.removed.map((t) => t.taskId));
      const problems: string[] = [];
      for (const a of placement?.assignments ?? []) {
        if (removedRuntimes.has(a.runtimeId) || removedTasks.has(a.taskId)) problems.push(`placement still assigns ${a.taskId} to ${a.runtimeId}`);
      }
      for (const runtimeId of removedRuntimes) {
        const runtime = await runtimes.get(runtimeId);
        if (!runtime || runtime.status === 'LOST') continue;
        const tasks = await agents.listTasks(runtime.endpoint);
        for (const t of tasks) if (t.workload === input.workload && t.state !== 'stopped') problems.push(`${runtimeId} still runs ${t.taskId} (${t.state})`);
      }
      let ownedPartitions = 0;
      if (workload.kind === 'consumer') {
        const { rows } = await deps.db.query<{ partition: number; owner_task: string }>(
          `select partition, owner_task from scalegate_consumer_offsets where workload = $1 and owner_task = any($2::text[])`,
          [input.workload, [...removedTasks]],
        ).catch(() => ({ rows: [] as { partition: number; owner_task: string }[] }));
        ownedPartitions = rows.length;
        for (const r of rows) problems.push(`partition ${r.partition} still owned by ${r.owner_task}`);
      }
      if (problems.length) {
        throw ApplicationFailure.create({ type: 'still-owned', message: `removed replicas still own work: ${problems.join('; ')}`, nonRetryable: true });
      }
      return { runtimes: [...removedRuntimes], tasks: [...removedTasks], assignmentsLeft: 0, ownedPartitions };
    },

    /** Stop-the-world: every task of the workload on every reachable runtime, placed or not. */
    async stopAllTasksOfWorkload(input: { workload: string; graceMs?: number }) {
      const stopped: TaskRef[] = [];
      for (const runtime of await runtimes.list()) {
        heartbeat({ runtime: runtime.id });
        let tasks: TaskStatus[];
        try {
          tasks = await agents.listTasks(runtime.endpoint);
        } catch (error) {
          if (runtime.status === 'LOST') continue;
          throw error;
        }
        for (const task of tasks.filter((t) => t.workload === input.workload)) {
          await agents.stopTask(runtime.endpoint, task.taskId, { graceMs: input.graceMs });
          stopped.push({ runtimeId: runtime.id, taskId: task.taskId });
        }
      }
      return stopped;
    },

    /** What the scale-out gates judge from: capacity per eligible runtime and probes of the recipients. */
    async gatherGateFacts(input: { workload: string; recipientRuntimeIds: string[] }): Promise<{ eligible: EligibleRuntime[]; probes: RuntimeProbe[] }> {
      const workload = await requireWorkload(input.workload);
      const [all, placements] = await Promise.all([runtimes.list(), registry.listPlacements()]);
      const used: Record<string, number> = {};
      const hosts = new Set<string>();
      for (const p of placements) for (const a of p.assignments) {
        used[a.runtimeId] = (used[a.runtimeId] ?? 0) + 1;
        if (p.workload === workload.name) hosts.add(a.runtimeId);
      }
      const eligible = eligibleRuntimes(all, workload, now()).map((r) => ({
        id: r.id, freeSlots: Math.max(0, r.slots - (used[r.id] ?? 0)), alreadyHostsWorkload: hosts.has(r.id),
      }));
      const probes: RuntimeProbe[] = [];
      for (const runtimeId of input.recipientRuntimeIds) {
        heartbeat({ probing: runtimeId });
        try {
          const answer = await agents.probe(await endpointOf(runtimeId), workload.kind, workload.spec);
          probes.push({ runtimeId, ...answer });
        } catch (error) {
          const failed = { ok: false, detail: `probe failed: ${(error as Error).message}` };
          probes.push({ runtimeId, source: failed, destination: failed });
        }
      }
      return { eligible, probes };
    },

    /** A snapshot of every task of the workload (from its agents) and, for consumers, the sink audit. */
    async captureEvidence(input: { workload: string }): Promise<EvidenceSnapshot> {
      const workload = await requireWorkload(input.workload);
      const placement = await registry.getPlacement(input.workload);
      const tasks: EvidenceSnapshot['tasks'] = [];
      let rate = 0;
      const p50s: number[] = [];
      const p95s: number[] = [];
      for (const a of placement?.assignments ?? []) {
        const status = await agents.taskStatus(await endpointOf(a.runtimeId), a.taskId).catch(() => null);
        tasks.push({
          taskId: a.taskId, runtimeId: a.runtimeId, incarnation: status?.incarnation ?? null, state: status?.state ?? 'absent',
          processed: status?.counts.processed ?? 0, errors: status?.errors ?? 0, backlog: status?.backlog ?? 0,
          ownedPartitions: status?.partitions?.length ?? 0, inFlight: status?.counts.inFlight ?? 0, ratePerSec: status?.counts.ratePerSec ?? 0,
        });
        rate += status?.counts.ratePerSec ?? 0;
        if (status?.latencyMs) {
          p50s.push(status.latencyMs.p50);
          p95s.push(status.latencyMs.p95);
        }
      }
      const snapshot: EvidenceSnapshot = {
        atMs: now(), tasks, ready: tasks.filter((t) => t.state === 'ready').length,
        processed: tasks.reduce((n, t) => n + t.processed, 0), ratePerSec: rate,
        latencyP50Ms: p50s.length ? Math.max(...p50s) : null, latencyP95Ms: p95s.length ? Math.max(...p95s) : null,
        backlog: tasks.reduce((n, t) => n + t.backlog, 0), errors: tasks.reduce((n, t) => n + t.errors, 0),
      };
      if (workload.kind === 'consumer' && deps.databaseUrl) {
        const audit = await verifyExactlyOnce({ databaseUrl: deps.databaseUrl, source: workload.spec.source, sink: workload.spec.sink });
        snapshot.sink = {
          sourceCount: audit.sourceCount, sinkCount: audit.sinkCount, missing: audit.missing,
          duplicates: audit.duplicates, extra: audit.extra, orderViolations: audit.orderViolations,
        };
      }
      return snapshot;
    },

    /**
     * One reconcile pass. Skips itself (one cheap read) when nothing it decides from moved: the
     * registry revision, the placement sequence and the set of fresh runtimes. Otherwise it plans
     * pending workloads, `all` workloads whose eligible set grew, and unplaced shortfalls.
     */
    async reconcilePass(): Promise<ReconcilePassResult> {
      const { rows } = await deps.db.query<{ key: string }>(
        `select md5(concat_ws('|',
                  -- is_called too: a fresh sequence reads last_value 1 both before and after its first nextval
                  (select last_value || ':' || is_called from registry_revision),
                  (select last_value || ':' || is_called from placement_change),
                  (select coalesce(string_agg(id || ':' || labels::text || ':' || slots, ',' order by id), '')
                     from runtimes where status = 'READY' and lease_expires_at > now()))) as key`,
      );
      const inputsKey = rows[0].key;
      const marker = await registry.reconcileMarker();
      if (marker.inputsKey === inputsKey) {
        await registry.recordReconcile(inputsKey, true);
        return { skipped: true, inputsKey, planIds: [] };
      }
      const [workloads, placements, all] = await Promise.all([registry.listWorkloads(), registry.listPlacements(), runtimes.list()]);
      const unplaced = new Set((await registry.listUnplaced()).map((u) => u.workload));
      const placementOf = Object.fromEntries(placements.map((p) => [p.workload, p]));
      const planIds: ReconcilePassResult['planIds'] = [];
      for (const workload of workloads) {
        if (workload.retired) continue;
        const placement = placementOf[workload.name];
        if (placement && workload.replicas !== 'all' && !unplaced.has(workload.name)) continue; // sticky
        const plan = buildPlan({ workload, replicas: workload.replicas, runtimes: all, placements, workloads, nowMs: now() });
        if (plan.starts.length === 0 && plan.stops.length === 0 && plan.moves.length === 0 && placement) continue;
        if (placement && plan.stops.length + plan.moves.length > 0 && workload.replicas === 'all') {
          // `all` only grows here; shrinking (a runtime LOST) is recovery's decision, not reconcile's.
          continue;
        }
        const stored = await plans.save(plan);
        planIds.push({ workload: workload.name, planId: stored.id });
      }
      await registry.recordReconcile(inputsKey, false);
      return { skipped: false, inputsKey, planIds };
    },
  };
}
export type Activities = ReturnType<typeof createActivities>;
