// Re-adoption (DESIGN.md §3 "Static stability"): what an earlier agent left running for a task the
// restarted agent starts. That very process (identity checked in /proc) of the same generation and
// spec, on the replica's recorded pair, is adopted; any other is stopped, its whole group, before a
// fresh one starts; a spawn no record names is found by its incarnation and killed. Never two.
import type { ServiceSpec } from '../../protocol';
import { portKeyFor, type PortAllocator } from '../ports';
import { DriverError, type DriverContext, type TaskStart } from './driver';
import { canIdentifyProcesses, isSameProcess, processesWithEnvironment } from './proc';
import { KILL_WAIT_MS, killStragglers, signalGroup, waitGone } from './process-group';
import {
  forgetSpawnMarker,
  identityOf,
  readProcessRecord,
  readSpawnMarker,
  removeProcessRecord,
  specFingerprint,
  type ProcessRecord,
} from './process-records';
import { ProcessTask } from './process-task';

/**
 * Stops a process an earlier agent left for a task that cannot adopt it: SIGTERM to its group,
 * its grace period, then SIGKILL; and whatever of its group is left. True once it is gone.
 */
async function stopLeftProcess(record: ProcessRecord, graceMs: number): Promise<boolean> {
  const identity = identityOf(record);
  if (isSameProcess(identity)) {
    signalGroup(record.pgid, 'SIGTERM');
    if (!(await waitGone(identity, graceMs)) && isSameProcess(identity)) signalGroup(record.pgid, 'SIGKILL');
  }
  const gone = await waitGone(identity, KILL_WAIT_MS);
  killStragglers(identity, record.incarnation);
  return gone;
}

/**
 * An earlier agent killed after spawning a process for this task but before recording it: no
 * record can identify that process for adoption, so every process carrying its incarnation is
 * killed (it never reported ready) and the start that follows is the only one.
 */
function stopUnrecordedSpawn(ctx: DriverContext, taskId: string): void {
  const marker = readSpawnMarker(ctx.stateDir, taskId);
  if (!marker) return;
  if (readProcessRecord(ctx.stateDir, taskId)?.incarnation !== marker.incarnation) {
    const left = processesWithEnvironment('SCALEGATE_INCARNATION', marker.incarnation);
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    ctx.log('task-left-process-unrecorded', { taskId, incarnation: marker.incarnation, killed: left });
  }
  // A marker that cannot be removed is logged: left, it finds nothing of that incarnation next time.
  forgetSpawnMarker(ctx, taskId, marker.incarnation);
}

/**
 * The process an earlier agent left running for this task, if any: adopted when it is that very
 * process, of this generation and spec, on the replica's recorded pair; otherwise stopped (its
 * whole group) so that the fresh start that follows is the only one. Never touches a process the
 * record does not identify (a recycled pid is somebody else's).
 */
export async function takeOverLeftProcess(ctx: DriverContext, ports: PortAllocator, task: TaskStart, spec: ServiceSpec): Promise<ProcessTask | null> {
  stopUnrecordedSpawn(ctx, task.taskId);
  const record = readProcessRecord(ctx.stateDir, task.taskId);
  if (!record) return null;
  const forget = () => removeProcessRecord(ctx, task.taskId);
  if (!canIdentifyProcesses()) {
    ctx.log('task-left-process-unverifiable', { taskId: task.taskId, pid: record.pid, reason: 'no /proc to tell that process from another with its pid' });
    return null;
  }
  const identity = identityOf(record);
  if (!isSameProcess(identity)) {
    // Gone, or its pid now belongs to another process: that one is left alone.
    const stragglers = killStragglers(identity, record.incarnation);
    ctx.log('task-left-process-gone', { taskId: task.taskId, pid: record.pid, incarnation: record.incarnation, ...(stragglers ? { stragglersKilled: stragglers } : {}) });
    forget();
    return null;
  }
  let refusal: string | undefined;
  if (record.generation !== task.generation) refusal = `it runs generation ${record.generation}, the start is ${task.generation}`;
  else if (record.specHash !== specFingerprint(spec)) refusal = 'it runs another spec';
  else {
    const claimed = await ports.claim(portKeyFor(task), record.ports).catch(async (error: unknown) => {
      // Neither adopted nor stopped, the left process would run on unseen: it is stopped.
      await stopLeftProcess(record, spec.graceMs);
      throw error;
    });
    if (!claimed) refusal = `its ports ${record.ports.public}/${record.ports.internal} are no longer this replica's pair`;
  }
  if (refusal === undefined) {
    const handle = new ProcessTask(ctx, ports, task, spec, record.ports, record.incarnation);
    handle.adopt(record);
    return handle;
  }
  ctx.log('task-left-process-replaced', { taskId: task.taskId, pid: record.pid, incarnation: record.incarnation, reason: refusal });
  if (!(await stopLeftProcess(record, spec.graceMs))) {
    throw new DriverError('task-draining', `task ${task.taskId}: the process ${record.pid} an earlier agent left could not be stopped yet; retry`);
  }
  forget();
  return null;
}
