// The process driver (DESIGN.md §5): one real OS process per service replica, with its port pair
// in PORT / INTERNAL_PORT, readiness by HTTP or TCP probe, and drain = SIGTERM, grace, SIGKILL.
// Each task runs in its own process group so signals reach every grandchild it spawned.
//
// Its processes outlive the agent (DESIGN.md §3 "Static stability"): an agent that is SIGKILLed
// leaves them running, so the moment a process exists the driver records who it is in the task's
// folder (`tasks/<taskId>/process.json`: pid = process group id, its start time and the boot id,
// incarnation, ports, generation, a fingerprint of the spec). A restarted agent starting the same
// task finds that record and, if that very process still runs (identity checked in /proc, so a
// recycled pid is never taken for it), ADOPTS it: same incarnation, same ports, readiness probed
// again, its end noticed by polling since it is no longer the agent's child. When it cannot be
// adopted (another generation or spec, its port pair no longer the replica's) its whole process
// group is stopped (SIGTERM, grace, SIGKILL) before a fresh one starts. One process per task, never two.
//
// Supervision (DESIGN.md §3): a process that exits or dies without being asked to (not drained,
// stopped or failed by the driver itself) is started again on the same task id and port pair, as a
// new incarnation, after a backoff (domain/supervision.ts: 1 s doubling to 5 min, reset by a healthy
// run; the agent's SCALEGATE_RESTART_* settings). Meanwhile the task is `restarting`; its status
// counts `restarts` and says how it last ended, when it starts again and whether it crash-loops.
// A drain, a stop or the agent's shutdown cancels a pending restart: nothing stopped is restarted.
//
// The files, one role each: process-task.ts the task across its runs (restarts, status, drain,
// kill); process-lifecycle.ts its state machine and one run of its process (spawn or adoption,
// readiness, its end); process-spawn.ts how a process is started (environment, log, own group);
// process-probes.ts the readiness probes; process-records.ts what a task keeps in its folder;
// process-adoption.ts what a restarted agent does with the process an earlier one left;
// process-group.ts signals to a group and the kill of what is left of it. This file: the driver.
import { AgentServiceSpecSchema, describeIssues } from '../../protocol';
import { messageOf } from '../../lib/errors';
import { portKeyFor, type PortAllocator } from '../ports';
import { DriverError, serviceHasNoEndpoints, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from './driver';
import { takeOverLeftProcess } from './process-adoption';
import { readSupervisionRecord } from './process-records';
import { ProcessTask } from './process-task';

// The latency probes' period, which test/e2e/web-ui.test.ts reads here.
export { LATENCY_PROBE_MS } from './process-probes';

/** Task ids become folder names; refuse anything that could escape the tasks folder. */
const SAFE_TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function createProcessDriver(ctx: DriverContext, ports: PortAllocator): TaskDriver {
  const tasks = new Map<string, ProcessTask>();

  const start = async (task: TaskStart): Promise<TaskHandle> => {
    if (task.kind !== 'service') throw new DriverError('invalid-spec', `the process driver runs service tasks, not ${task.kind}`);
    if (!SAFE_TASK_ID.test(task.taskId)) throw new DriverError('invalid-spec', `task id ${JSON.stringify(task.taskId)} is not a safe folder name`);
    const parsed = AgentServiceSpecSchema.safeParse(task.spec);
    if (!parsed.success) throw new DriverError('invalid-spec', `service spec for ${task.workload}: ${describeIssues(parsed.error)}`);

    const running = tasks.get(task.taskId);
    if (running?.isSupervised) return running; // the same start retried: it is already running (or restarting)

    const adopted = await takeOverLeftProcess(ctx, ports, task, parsed.data);
    if (adopted) {
      tasks.set(task.taskId, adopted);
      return adopted;
    }

    const key = portKeyFor(task);
    const acquisition = await ports.acquire(key).catch((error: unknown) => {
      if (error instanceof DriverError) throw error;
      // e.g. port records edited by hand: the control plane should see why, not a bare 500.
      throw new DriverError('placement-unavailable', `no port pair for ${key}: ${messageOf(error)}`);
    });
    if (acquisition.moved) {
      ctx.log('port-pair-moved', { workload: task.workload, index: task.index, taskId: task.taskId, from: acquisition.moved.from, to: acquisition.moved.to });
    }
    const handle = new ProcessTask(ctx, ports, task, parsed.data, acquisition.ports);
    handle.resumeSupervision(readSupervisionRecord(ctx.stateDir, task.taskId));
    // If the command cannot be run the pair stays recorded: the replica still belongs here.
    await handle.launch();
    tasks.set(task.taskId, handle);
    return handle;
  };

  return {
    kind: 'service',
    start,
    probe: async () => serviceHasNoEndpoints(),
    // Kill what still runs but keep the port records, so a restarted agent gives each replica its pair back.
    close: async () => {
      await Promise.all([...tasks.values()].map((task) => task.kill()));
      tasks.clear();
    },
  };
}
