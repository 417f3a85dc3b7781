// Task activities: start, await, drain and stop agent tasks, and list what agents run.
import { ApplicationFailure } from '@temporalio/activity';
import type { Assignment, PortPair, TaskStatus, WorkloadKind } from '../protocol';
import { heartbeat, lookups, sleep, type ActivityDeps, type TaskRef } from './ports';


export function taskActivities(deps: ActivityDeps) {
  const { runtimes, registry } = deps.stores;
  const { agents, now } = deps;
  const { agentOf } = lookups(deps);

  /** Stops every task of `workload` that each runtime's agent reports; `skip` says whether an agent that does not answer is passed over (else the failure is thrown). */
  async function stopEveryTaskOf(workload: string, options: { graceMs?: number }, skip: (runtime: { id: string; status: string }) => boolean): Promise<TaskRef[]> {
    const stopped: TaskRef[] = [];
    for (const runtime of await runtimes.list()) {
      heartbeat({ runtime: runtime.id });
      let tasks: TaskStatus[];
      try {
        tasks = await agents.listTasks(await agentOf(runtime.id));
      } catch (error) {
        if (skip(runtime)) continue;
        throw error;
      }
      for (const task of tasks.filter((t) => t.workload === workload)) {
        await agents.stopTask(await agentOf(runtime.id), task.taskId, { graceMs: options.graceMs });
        stopped.push({ runtimeId: runtime.id, taskId: task.taskId });
      }
    }
    return stopped;
  }

  return {
    /** Starts (idempotently) each task on its agent and records the ports the agents chose. */
    async startTasks(input: { workload: string; kind: WorkloadKind; spec: unknown; placementFence: number; generation: number; assignments: Assignment[]; joinAt?: number }) {
      const statuses: TaskStatus[] = [];
      for (const assignment of input.assignments) {
        heartbeat({ started: statuses.length });
        const status = await agents.startTask(await agentOf(assignment.runtimeId), assignment.taskId, {
          workload: input.workload, kind: input.kind, index: assignment.index, generation: input.generation,
          placementFence: input.placementFence, spec: input.spec, partitions: assignment.partitions,
          ...(input.joinAt !== undefined ? { joinAt: input.joinAt } : {}),
        });
        statuses.push(status);
      }
      const portsByTask: Record<string, PortPair> = {};
      for (const s of statuses) if (s.ports) portsByTask[s.taskId] = s.ports;
      if (Object.keys(portsByTask).length) await registry.recordPorts(input.workload, input.placementFence, portsByTask);
      return statuses;
    },

    /** Waits until every task reports ready; fails non-retryably on a failed task or at the deadline. */
    async awaitTasksReady(input: { tasks: TaskRef[]; timeoutMs: number }): Promise<TaskStatus[]> {
      const deadline = now() + input.timeoutMs;
      for (;;) {
        const statuses = await Promise.all(
          input.tasks.map(async (t) => (await agents.taskStatus(await agentOf(t.runtimeId), t.taskId).catch(() => null)) ?? null),
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
    async stopTasks(input: { tasks: TaskRef[]; graceMs?: number; drainTimeoutMs?: number; placementFence?: number }) {
      const receipts: { taskId: string; runtimeId: string; state: string; receipt?: Record<string, unknown> }[] = [];
      for (const t of input.tasks) {
        const runtime = await runtimes.get(t.runtimeId);
        if (!runtime) continue;
        const beating = setInterval(() => heartbeat({ draining: t.taskId, stopped: receipts.length }), 2000);
        heartbeat({ draining: t.taskId, stopped: receipts.length });
        try {
          const answer = await agents.stopTask(await agentOf(runtime.id), t.taskId, { graceMs: input.graceMs, drainTimeoutMs: input.drainTimeoutMs, placementFence: input.placementFence });
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

    /**
     * Retirement's stop, after the placement was cleared: every task of the workload that an agent
     * reports is stopped; a runtime that does not answer is skipped and named. Nothing places the
     * workload there any more, so its next heartbeat is told the tasks are revoked and it stops them.
     */
    async stopRetiredTasks(input: { workload: string }): Promise<{ stopped: TaskRef[]; unreachable: string[] }> {
      const unreachable: string[] = [];
      const stopped = await stopEveryTaskOf(input.workload, {}, (runtime) => {
        unreachable.push(runtime.id);
        return true;
      });
      return { stopped, unreachable };
    },

    /** Stop-the-world: every task of the workload on every reachable runtime, placed or not (a LOST one that does not answer is skipped). */
    async stopAllTasksOfWorkload(input: { workload: string; graceMs?: number }) {
      return stopEveryTaskOf(input.workload, { graceMs: input.graceMs }, (runtime) => runtime.status === 'LOST');
    },
  };
}
