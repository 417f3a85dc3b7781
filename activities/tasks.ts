// Task activities: start, await, drain and stop agent tasks, and list what agents run.
import { ApplicationFailure } from '@temporalio/activity';
import type { Assignment, DrainOptions, PortPair, StopAnswer, TaskStatus, WorkloadKind } from '../protocol';
import { AgentUnreachableError } from './agent-client';
import { doublingDelays } from '../lib/backoff';
import { consumerGroupReads } from './consumer-group';
import { heartbeat, lookups, pause, type ActivityDeps, type TaskRef } from './ports';
import { runsRevisionOf } from '../lib/revision';


/** How long a stop waits for an agent that fails to answer while its lease still runs. */
const UNANSWERED_LIMIT_MS = 120_000;

/** What a call does once its agent failed for the whole limit within a live lease (see `agentCalls`). */
export type AtLimit = 'fail' | 'unreachable';

/**
 * How the control plane calls an agent that may fail: drainTasks, retirement and the stop-the-world
 * of services and of stream jobs (startTasks makes the same split through the activity's retries):
 * - a refusal (the agent answered an error the protocol says is final: 409 `stale-fence`, an
 *   unknown runtime, ...) is a non-retryable ApplicationFailure and fails the activity at once;
 * - anything else (connection refused or reset, a timeout, a 5xx, a rotated credential) is
 *   transient: tried again every second while the runtime's lease runs;
 * - a runtime LOST or whose lease ran out is `'unreachable'` (its tasks are revoked at its next
 *   heartbeat, as no placement holds them there any more);
 * - past the limit within a live lease the call fails (`atLimit: 'fail'`, the default), or, with
 *   `atLimit: 'unreachable'`, is `'unreachable'` only if the agent never answered
 *   (AgentUnreachableError): an agent that answers errors is there, and fails the call.
 */
export function agentCalls(deps: ActivityDeps) {
  const { runtimes } = deps.stores;
  const { agents, now } = deps;
  const { agentOf } = lookups(deps);

  async function orUnreachable<T>(runtimeId: string, call: () => Promise<T>, options: { limitMs?: number; atLimit?: AtLimit } = {}): Promise<T | 'unreachable'> {
    const started = now();
    // A LOST runtime is not called: recovery has moved its work, and a cut-off host would hold each call to the client's timeout.
    if ((await runtimes.get(runtimeId))?.status === 'LOST') return 'unreachable';
    for (;;) {
      // A frozen agent holds a call up to the client's timeout: the activity says it is alive meanwhile.
      const beating = setInterval(() => heartbeat({ calling: runtimeId }), 5_000);
      try {
        return await call();
      } catch (error) {
        if (error instanceof ApplicationFailure && error.nonRetryable) throw error; // an answer, not silence
        const runtime = await runtimes.get(runtimeId);
        if (!runtime || runtime.status === 'LOST' || Date.parse(runtime.leaseExpiresAt) <= now()) return 'unreachable';
        if (now() - started > (options.limitMs ?? UNANSWERED_LIMIT_MS)) {
          if (options.atLimit === 'unreachable' && error instanceof AgentUnreachableError) return 'unreachable';
          throw error;
        }
        heartbeat({ waitingFor: runtimeId, error: error instanceof Error ? error.message : String(error) });
        await pause(1_000);
      } finally {
        clearInterval(beating);
      }
    }
  }

  /**
   * Stops every task of `workload` that each runtime's agent reports, answering each stop's answer;
   * one that cannot answer is passed over (after the rest of its tasks' stops), and `unreachable` is
   * told. `skipLost`: a LOST runtime is not called at all.
   */
  async function stopEveryTaskOf(
    workload: string,
    options: DrainOptions & { skipLost?: boolean; limitMs?: number; atLimit?: AtLimit },
    unreachable: (runtime: { id: string }) => void = () => {},
  ): Promise<(TaskRef & { answer: StopAnswer })[]> {
    const { skipLost, limitMs, atLimit, ...drain } = options;
    const stopped: (TaskRef & { answer: StopAnswer })[] = [];
    for (const runtime of await runtimes.list()) {
      heartbeat({ runtime: runtime.id });
      if (skipLost && runtime.status === 'LOST') continue;
      const tasks = await orUnreachable(runtime.id, async () => agents.listTasks(await agentOf(runtime.id)), { limitMs, atLimit });
      if (tasks === 'unreachable') {
        unreachable(runtime);
        continue;
      }
      for (const task of tasks.filter((t) => t.workload === workload)) {
        const answer = await orUnreachable(runtime.id, async () => agents.drainTask(await agentOf(runtime.id), task.taskId, drain), { limitMs, atLimit });
        if (answer === 'unreachable') {
          unreachable(runtime);
          break;
        }
        stopped.push({ runtimeId: runtime.id, taskId: task.taskId, answer });
      }
    }
    return stopped;
  }

  return { orUnreachable, stopEveryTaskOf };
}

export function taskActivities(deps: ActivityDeps) {
  const { runtimes, registry } = deps.stores;
  const { agents, now } = deps;
  const { agentOf } = lookups(deps);
  const groups = consumerGroupReads(deps);
  const { orUnreachable, stopEveryTaskOf } = agentCalls(deps);
  const refs = (stopped: TaskRef[]): TaskRef[] => stopped.map(({ runtimeId, taskId }) => ({ runtimeId, taskId }));

  /** The spec each assignment runs: its recorded revision's, or `spec` (the plan's) where it runs that one or records none. */
  async function specsByRevision(workload: string, spec: unknown, kind: WorkloadKind, assignments: Assignment[]): Promise<(a: Assignment) => unknown> {
    // Test-only (rollout.test.ts shows its roll-back check can fail): every replica PUT with the plan's spec, as before revisions.
    if (process.env.SCALEGATE_TEST_IGNORE_REVISIONS === '1') return () => spec;
    const planned = runsRevisionOf({ kind, spec });
    const others = [...new Set(assignments.map((a) => a.revision).filter((r): r is string => r !== undefined && r !== planned))];
    const kept = new Map<string, unknown>();
    for (const revision of others) {
      const found = await registry.revisionSpec(workload, revision);
      if (found === null) throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `${workload}: no spec recorded for revision ${revision}` });
      kept.set(revision, found);
    }
    return (a) => (a.revision !== undefined && kept.has(a.revision) ? kept.get(a.revision) : spec);
  }

  /**
   * A task its registered agent does not host, or reports stopped, will not become ready unless a
   * placement still assigns it there (nothing else starts it again). When none does, another
   * change (a recovery of its runtime, a replan) moved it: fail now, not at the deadline. The
   * placement is read only then. A 404 is an answer of the registered agent: before its
   * registration an agent answers 503, and it restores its tasks before it registers (agent/main.ts).
   */
  async function failIfMoved(tasks: TaskRef[], statuses: (TaskStatus | null | undefined)[]): Promise<void> {
    const gone = tasks.filter((_, i) => statuses[i] === null || statuses[i]?.state === 'stopped');
    const moved: string[] = [];
    for (const t of gone) if (!(await registry.isPlaced(t))) moved.push(`${t.taskId}@${t.runtimeId}`);
    if (moved.length) {
      throw ApplicationFailure.create({
        type: 'task-failed',
        message: `not ready: ${moved.join(', ')} no longer placed there and not running (another change moved it)`,
        nonRetryable: true,
      });
    }
  }

  const activities = {
    /**
     * Starts (idempotently) each task on its agent and records the ports the agents chose. Every
     * agent is called at once; one agent's tasks start one after another, in placement order.
     * Answers the statuses in placement order.
     */
    async startTasks(input: { workload: string; kind: WorkloadKind; spec: unknown; placementFence: number; generation: number; assignments: Assignment[]; joinAt?: number }) {
      // Each recipient checks the workload's required endpoints before it starts a new task there.
      const requires = (await registry.getWorkload(input.workload))?.requires ?? [];
      // Each replica is PUT with the spec of the revision it runs (DESIGN.md §3 "Versions and
      // rollouts"): inside a rollout the fleet is mixed, and a survivor PUT with another spec would
      // restart into it after its next exit. `input.spec` is the plan's, the workload's current one.
      const specs = await specsByRevision(input.workload, input.spec, input.kind, input.assignments);
      const byRuntime = new Map<string, Assignment[]>();
      for (const assignment of input.assignments) byRuntime.set(assignment.runtimeId, [...(byRuntime.get(assignment.runtimeId) ?? []), assignment]);
      const statusOf = new Map<string, TaskStatus>();
      const startAll = async (assignments: Assignment[]) => {
        for (const assignment of assignments) {
          statusOf.set(assignment.taskId, await agents.startTask(await agentOf(assignment.runtimeId), assignment.taskId, {
            workload: input.workload, kind: input.kind, index: assignment.index, generation: input.generation,
            placementFence: input.placementFence, spec: specs(assignment), partitions: assignment.partitions,
            ...(input.joinAt !== undefined ? { joinAt: input.joinAt } : {}),
            ...(requires.length ? { requires } : {}),
          }));
          heartbeat({ started: statusOf.size });
        }
      };
      // Settled, not raced: no start is still in flight when the activity fails (a retry starts them all again, idempotently).
      const outcomes = await Promise.allSettled([...byRuntime.values()].map(startAll));
      const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      if (failed) throw failed.reason;
      const statuses = input.assignments.map((assignment) => statusOf.get(assignment.taskId)!);
      const portsByTask: Record<string, PortPair> = {};
      for (const s of statuses) if (s.ports) portsByTask[s.taskId] = s.ports;
      if (Object.keys(portsByTask).length) await registry.recordPorts(input.workload, input.placementFence, portsByTask);
      return statuses;
    },

    /**
     * Waits until every task reports ready and, for a service in its own Kafka consumer group, until
     * the broker shows the group converged on the placement (a member per replica, every partition
     * assigned); fails non-retryably on a failed task or at the deadline, saying what it waited for.
     */
    async awaitTasksReady(input: { tasks: TaskRef[]; timeoutMs: number }): Promise<TaskStatus[]> {
      const deadline = now() + input.timeoutMs;
      // Short first polls: a new task is usually ready within a few hundred ms of its start.
      const nextDelay = doublingDelays(20, 250);
      for (;;) {
        // A task on a LOST runtime will not be ready: recovery has moved its work (a cut-off host would hold the poll too).
        const lost: string[] = [];
        for (const runtimeId of new Set(input.tasks.map((t) => t.runtimeId))) if ((await runtimes.get(runtimeId))?.status === 'LOST') lost.push(runtimeId);
        if (lost.length) {
          const stranded = input.tasks.filter((t) => lost.includes(t.runtimeId)).map((t) => `${t.taskId}@${t.runtimeId}`);
          throw ApplicationFailure.create({ type: 'task-failed', message: `not ready: ${stranded.join(', ')} on runtime(s) declared LOST`, nonRetryable: true });
        }
        // Each poll is bounded by the time left (at least a second): an agent that does not answer cannot hold the wait past its deadline.
        const pollMs = Math.max(1_000, deadline - now());
        // `undefined`: the agent did not answer (keep waiting); `null`: it answered that it does not host the task.
        const statuses = await Promise.all(
          input.tasks.map(async (t) => agents.taskStatus(await agentOf(t.runtimeId), t.taskId, pollMs).catch(() => undefined)),
        );
        await failIfMoved(input.tasks, statuses);
        // A task its agent is restarting after an exit failed too: a new replica that dies at once is not converging.
        const failed = statuses.find((s) => s?.state === 'failed' || s?.state === 'restarting');
        if (failed) {
          throw ApplicationFailure.create({ type: 'task-failed', message: `task ${failed.taskId} failed: ${failed.detail ?? 'no detail'}`, nonRetryable: true });
        }
        const ready = statuses.filter((s) => s?.state === 'ready').length;
        heartbeat({ ready, of: input.tasks.length });
        let waitingFor = '';
        if (ready === input.tasks.length) {
          const workload = statuses[0] ? await registry.getWorkload(statuses[0].workload) : null;
          const group = workload ? await groups.verdict(workload) : null;
          if (!group || group.converged) return statuses as TaskStatus[];
          heartbeat({ ready, of: input.tasks.length, group: group.detail });
          waitingFor = group.detail;
        } else {
          waitingFor = input.tasks.filter((_, i) => statuses[i]?.state !== 'ready').map((t) => `${t.taskId}@${t.runtimeId}`).join(', ');
        }
        if (now() > deadline) {
          throw ApplicationFailure.create({
            type: 'converge-deadline',
            message: `not ready within ${input.timeoutMs} ms: ${waitingFor}`,
            nonRetryable: true,
          });
        }
        await pause(nextDelay());
      }
    },

    /**
     * Drains and stops tasks (the drain, one name from here down: the agent client's drainTask,
     * the agent's DELETE /v1/tasks/:id, TaskHost.drainTask); answers the drain receipts. Drains can
     * be long: the activity heartbeats while it waits. An unreachable LOST runtime is skipped (its
     * fence is revoked).
     */
    async drainTasks(input: { tasks: TaskRef[]; graceMs?: number; drainTimeoutMs?: number; placementFence?: number }) {
      const receipts: { taskId: string; runtimeId: string; state: string; receipt?: Record<string, unknown> }[] = [];
      for (const t of input.tasks) {
        const runtime = await runtimes.get(t.runtimeId);
        if (!runtime) continue;
        const beating = setInterval(() => heartbeat({ draining: t.taskId, stopped: receipts.length }), 2000);
        heartbeat({ draining: t.taskId, stopped: receipts.length });
        try {
          const answer = await orUnreachable(runtime.id, async () =>
            agents.drainTask(await agentOf(runtime.id), t.taskId, { graceMs: input.graceMs, drainTimeoutMs: input.drainTimeoutMs, placementFence: input.placementFence }));
          receipts.push(answer === 'unreachable' ? { ...t, state: 'unreachable' } : { ...t, ...answer });
        } finally {
          clearInterval(beating);
        }
      }
      return receipts;
    },

    /**
     * Retirement's stop, after the placement was cleared: every task of the workload that an agent
     * reports is stopped; a runtime that does not answer is skipped and named. Nothing places the
     * workload there any more, so its next heartbeat is told the tasks are revoked and it stops them.
     */
    async stopRetiredTasks(input: { workload: string }): Promise<{ stopped: TaskRef[]; unreachable: string[] }> {
      const unreachable: string[] = [];
      const stopped = await stopEveryTaskOf(input.workload, {}, (runtime) => unreachable.push(runtime.id));
      return { stopped: refs(stopped), unreachable };
    },

    /** Stop-the-world: every task of the workload on every reachable runtime, placed or not (one LOST, or whose lease lapsed, is skipped). */
    async stopAllTasksOfWorkload(input: { workload: string; graceMs?: number }) {
      return refs(await stopEveryTaskOf(input.workload, { graceMs: input.graceMs }));
    },
  };
  return {
    ...activities,
    /**
     * The drain under the name runs before patch drain-tasks-named schedule it by (kept histories,
     * and executions still open across the upgrade): registered until that patch's old branch is
     * removed (docs/workflows.md, "Patches").
     */
    stopTasks: activities.drainTasks,
  };
}
