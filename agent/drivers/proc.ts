// What the process driver reads of other processes, from Linux's /proc, so that a restarted agent can
// find the task processes its previous incarnation left running (DESIGN.md §3 "Static stability":
// one process per task, never two) without ever mistaking some other process for one of them.
//
// A pid alone identifies nothing once its process is gone: the kernel hands it out again. A process
// is identified here by pid + start time (field 22 of /proc/<pid>/stat, clock ticks since boot) +
// the boot id (/proc/sys/kernel/random/boot_id): a recycled pid has another start time, and after a
// reboot the boot id differs. Nothing here throws: what cannot be read is "not that process".
import fs from 'node:fs';

export interface ProcessIdentity {
  pid: number;
  /** /proc/<pid>/stat field 22: when the process started, in clock ticks since boot */
  startTime: string;
  /** the kernel's boot id when it was read; null where the kernel does not expose one */
  bootId: string | null;
}

export interface ProcStat {
  pid: number;
  /** R, S, D, T, Z, X, … */
  state: string;
  ppid: number;
  pgrp: number;
  startTime: string;
  /** fields 14 and 15: user and system CPU time, in clock ticks (USER_HZ) */
  cpuTicks: number;
}

let cachedBootId: string | null | undefined;

/** The kernel's boot id (constant until the next boot), or null where /proc does not offer it. */
export function bootId(): string | null {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      cachedBootId = null;
    }
  }
  return cachedBootId;
}

/** Whether this system lets the driver identify processes at all (Linux /proc). */
export function canIdentifyProcesses(): boolean {
  return readStat(process.pid) !== null;
}

/** /proc/<pid>/stat, parsed; null when the process does not exist (or /proc cannot be read). */
export function readStat(pid: number): ProcStat | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
  // cutime cstime priority nice threads itrealvalue starttime …": comm may hold spaces and
  // parentheses, so the fields are counted from the last ')'.
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const fields = text.slice(close + 2).trim().split(/\s+/);
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  const startTime = fields[22 - 3];
  if (fields.length < 20 || startTime === undefined) return null;
  return { pid, state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]), startTime, cpuTicks: Number(fields[14 - 3]) + Number(fields[15 - 3]) };
}

/** The identity of a live process, to be recorded and compared later; null when it is not running. */
export function identify(pid: number): ProcessIdentity | null {
  const stat = readStat(pid);
  if (!stat || isDead(stat)) return null;
  return { pid, startTime: stat.startTime, bootId: bootId() };
}

/** A zombie (exited, not reaped yet) or a dying process runs nothing any more. */
function isDead(stat: ProcStat): boolean {
  return stat.state === 'Z' || stat.state === 'X' || stat.state === 'x';
}

/**
 * True only when `identity.pid` is running and is the very process that was identified: same
 * start time, same boot. A recycled pid, a zombie, or a process of an earlier boot is not.
 */
export function isSameProcess(identity: ProcessIdentity): boolean {
  const stat = readStat(identity.pid);
  if (!stat || isDead(stat)) return false;
  if (stat.startTime !== identity.startTime) return false;
  const boot = bootId();
  return identity.bootId === null || boot === null || identity.bootId === boot;
}

/** One variable of a process's initial environment; undefined when unreadable or absent. */
export function environmentVariable(pid: number, name: string): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    return undefined;
  }
  const prefix = `${name}=`;
  for (const entry of text.split('\0')) if (entry.startsWith(prefix)) return entry.slice(prefix.length);
  return undefined;
}

/** Every live (non-zombie) process `wanted` accepts. */
function liveProcesses(wanted: (stat: ProcStat) => boolean): ProcStat[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  const found: ProcStat[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && !isDead(stat) && wanted(stat)) found.push(stat);
  }
  return found;
}

/** Every live (non-zombie) process in process group `pgid`. */
export function groupMembers(pgid: number): ProcStat[] {
  return liveProcesses((stat) => stat.pgrp === pgid);
}

/**
 * Every live process whose initial environment has `name=value`. Task processes carry their
 * incarnation (a random UUID) in SCALEGATE_INCARNATION, so this finds one task's processes even
 * when no record says which pids they are.
 */
export function processesWithEnvironment(name: string, value: string): number[] {
  return liveProcesses((stat) => environmentVariable(stat.pid, name) === value).map((stat) => stat.pid);
}

/** What /proc reports in clock ticks counts USER_HZ of them per second: 100 on Linux's ABI. */
export const USER_HZ = 100;

/** A process's resident memory (VmRSS of /proc/<pid>/status) in bytes; null when it cannot be read. */
export function residentBytes(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * A process's CPU use as a share of one core (100 = one core busy), measured between samples at
 * least `minIntervalMs` apart: a read sooner answers the last figure; the first read answers null.
 */
export class CpuSampler {
  private last: { at: number; ticks: number } | null = null;
  private percent: number | null = null;

  constructor(private readonly minIntervalMs = 500) {}

  sample(pid: number, now = Date.now()): number | null {
    const stat = readStat(pid);
    if (!stat) return this.percent;
    if (this.last && now - this.last.at < this.minIntervalMs) return this.percent;
    if (this.last && stat.cpuTicks >= this.last.ticks) {
      this.percent = Math.round(((stat.cpuTicks - this.last.ticks) / USER_HZ / ((now - this.last.at) / 1000)) * 1000) / 10;
    }
    this.last = { at: now, ticks: stat.cpuTicks };
    return this.percent;
  }
}
