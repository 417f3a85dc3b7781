// A task's process group (each task process is spawned detached, leading its own group): signals
// to the whole group, the wait for an identified process to be gone, and the one-by-one kill of
// what is left in a group once its leader has ended, never touching a process that is not the task's.
import { setTimeout as sleep } from 'node:timers/promises';
import { messageOf } from '../../lib/errors';
import { environmentVariable, groupMembers, isSameProcess, type ProcessIdentity } from './proc';

/** After SIGKILL the exit should follow at once; this only bounds a wait that should never be long. */
export const KILL_WAIT_MS = 5000;
/** How often the end of an adopted process (not this agent's child: no exit event) is looked for. */
export const ADOPTED_POLL_MS = 100;

/** a pause that does not keep the process alive */
export const delay = (ms: number) => sleep(ms, undefined, { ref: false });

/**
 * Signals the whole process group the task leads (spawned detached). Never throws: called from
 * exit handlers and timers, where a throw would take the agent down. Returns why it failed, if it
 * did; a group already gone (ESRCH) is what we wanted and no failure.
 */
export function signalGroup(pid: number, signal: NodeJS.Signals): string | undefined {
  try {
    process.kill(-pid, signal);
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    return `${signal} to process group ${pid} failed: ${messageOf(error)}`;
  }
}

/**
 * Kills, one by one, what is left in the process group of a task process that has ended: only
 * members that started no earlier than it and carry its incarnation in their environment, so that
 * a group id the kernel has handed on never gets another process killed. Returns how many.
 */
export function killStragglers(leader: ProcessIdentity, incarnation: string): number {
  let killed = 0;
  for (const member of groupMembers(leader.pid)) {
    if (Number(member.startTime) < Number(leader.startTime)) continue;
    if (environmentVariable(member.pid, 'SCALEGATE_INCARNATION') !== incarnation) continue;
    try {
      process.kill(member.pid, 'SIGKILL');
      killed++;
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

/** Polls until the identified process is gone; false if it still runs after `ms`. */
export async function waitGone(identity: ProcessIdentity, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isSameProcess(identity)) {
    if (Date.now() >= deadline) return false;
    await delay(ADOPTED_POLL_MS);
  }
  return true;
}
