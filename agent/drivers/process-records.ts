// What a process task keeps in its folder (`tasks/<taskId>/` of the agent's state folder) for the
// agent that comes after this one: its log, the record of who its process is (process.json), the
// marker of a spawn under way (spawning.json) and its restarts (supervision.json). Read, written
// and removed only here; process-adoption.ts reads them to find what an earlier agent left.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { TaskReportSchema, type PortPair, type ServiceSpec } from '../../protocol';
import type { SupervisionRecord } from '../../domain/supervision';
import { messageOf } from '../../lib/errors';
import { writePrivateFileSync } from '../state-files';
import type { DriverContext } from './driver';
import { identify, type ProcessIdentity } from './proc';

/** The task's process record, in its folder. */
export const PROCESS_RECORD_FILE = 'process.json';

/** The per-task folder: working directory of the process and home of its log. */
export function taskFolder(stateDir: string, taskId: string): string {
  return path.join(stateDir, 'tasks', taskId);
}

export function taskLogPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), 'output.log');
}

export function processRecordPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), PROCESS_RECORD_FILE);
}

/**
 * Written before a task's process is spawned, removed once its process record is: an agent killed
 * between the two (chaos seed 70) leaves a process no record identifies, and this names the
 * incarnation its environment carries, so the restarted agent finds it and stops it.
 */
export function spawnMarkerPath(stateDir: string, taskId: string): string {
  return path.join(taskFolder(stateDir, taskId), 'spawning.json');
}

export function readSpawnMarker(stateDir: string, taskId: string): { incarnation: string } | null {
  try {
    const parsed = z.object({ incarnation: z.string().min(1) }).safeParse(JSON.parse(fs.readFileSync(spawnMarkerPath(stateDir, taskId), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Refused by the state folder (503 state-unwritable), it throws: nothing may be spawned then. */
export function writeSpawnMarker(stateDir: string, taskId: string, incarnation: string): void {
  writePrivateFileSync(spawnMarkerPath(stateDir, taskId), JSON.stringify({ incarnation }));
}

/** The process is recorded (or never ran): a marker left behind is only noise, so a failure is logged. */
export function forgetSpawnMarker(ctx: DriverContext, taskId: string, incarnation: string): void {
  try {
    fs.rmSync(spawnMarkerPath(ctx.stateDir, taskId), { force: true });
  } catch (error) {
    ctx.log('task-spawn-marker-left', { taskId, incarnation, error: messageOf(error) });
  }
}

/**
 * The task's restarts (domain/supervision.ts's record), written at each restart it schedules, so
 * that an agent restarted while the task waits for its restart counts on, and backs off on, from
 * there (no process record is left then: the process ended). Removed when the task is drained.
 */
export const SUPERVISION_RECORD_FILE = 'supervision.json';

const SupervisionRecordSchema = z.object({
  restarts: z.int().min(0),
  consecutive: z.int().min(0),
  recentRestartsAtMs: z.array(z.number()).max(10_000),
  lastExit: TaskReportSchema.shape.lastExit.unwrap().nullable(),
});

export function readSupervisionRecord(stateDir: string, taskId: string): SupervisionRecord | null {
  try {
    const parsed = SupervisionRecordSchema.safeParse(JSON.parse(fs.readFileSync(path.join(taskFolder(stateDir, taskId), SUPERVISION_RECORD_FILE), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Keeps the restarts on disk; a failure is logged (an agent restart would then count from 0). */
export function writeSupervisionRecord(ctx: DriverContext, taskId: string, record: SupervisionRecord): void {
  try {
    writePrivateFileSync(path.join(taskFolder(ctx.stateDir, taskId), SUPERVISION_RECORD_FILE), JSON.stringify(record));
  } catch (error) {
    ctx.log('task-supervision-record-failed', { taskId, error: messageOf(error) });
  }
}

/** Drained, the task is over: its restarts are not carried to anything later. */
export function removeSupervisionRecord(ctx: DriverContext, taskId: string): void {
  try {
    fs.rmSync(path.join(taskFolder(ctx.stateDir, taskId), SUPERVISION_RECORD_FILE), { force: true });
  } catch (error) {
    ctx.log('task-supervision-record-failed', { taskId, error: messageOf(error) });
  }
}

/** Who a task's process is, written the moment it exists, so a restarted agent can find it again. */
export const ProcessRecordSchema = z.object({
  version: z.literal(1),
  taskId: z.string(),
  incarnation: z.string(),
  generation: z.int(),
  /** sha256 of the spec it was started with: a process of another spec is not adopted */
  specHash: z.string(),
  /** the process's pid, which is also its process group id (spawned detached) */
  pid: z.int().min(1),
  pgid: z.int().min(1),
  startTime: z.string(),
  bootId: z.string().nullable(),
  ports: z.object({ public: z.int(), internal: z.int() }),
  spawnedAt: z.string(),
  /** the task's restarts so far, so an agent that adopts the process keeps counting from there */
  restarts: z.int().min(0).optional(),
});
export type ProcessRecord = z.infer<typeof ProcessRecordSchema>;

export function specFingerprint(spec: ServiceSpec): string {
  return createHash('sha256').update(JSON.stringify(spec)).digest('hex');
}

/** The task's process record, if there is a usable one. */
export function readProcessRecord(stateDir: string, taskId: string): ProcessRecord | null {
  let text: string;
  try {
    text = fs.readFileSync(processRecordPath(stateDir, taskId), 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = ProcessRecordSchema.safeParse(JSON.parse(text));
    return parsed.success && parsed.data.taskId === taskId ? parsed.data : null;
  } catch {
    return null;
  }
}

export const identityOf = (record: ProcessRecord): ProcessIdentity => ({ pid: record.pid, startTime: record.startTime, bootId: record.bootId });

/**
 * Writes who the process is into the task's folder, so that an agent restarted after a crash
 * finds it instead of starting a second one. Throws when the record cannot be written.
 */
export function writeProcessRecord(
  stateDir: string,
  pid: number,
  run: { taskId: string; incarnation: string; generation: number; spec: ServiceSpec; ports: PortPair; restarts: number },
): void {
  const identity = identify(pid);
  if (!identity) return; // already gone: nothing to find again
  const record: ProcessRecord = {
    version: 1,
    taskId: run.taskId,
    incarnation: run.incarnation,
    generation: run.generation,
    specHash: specFingerprint(run.spec),
    pid,
    pgid: pid,
    startTime: identity.startTime,
    bootId: identity.bootId,
    ports: run.ports,
    spawnedAt: new Date().toISOString(),
    restarts: run.restarts,
  };
  writePrivateFileSync(processRecordPath(stateDir, run.taskId), JSON.stringify(record));
}

/**
 * Removes the task's process record; a failure is logged. With `incarnation`, only a record of that
 * incarnation (whose process is gone) is removed: a newer one's stays.
 */
export function removeProcessRecord(ctx: DriverContext, taskId: string, incarnation?: string): void {
  const file = processRecordPath(ctx.stateDir, taskId);
  if (incarnation !== undefined && readProcessRecord(ctx.stateDir, taskId)?.incarnation !== incarnation) return;
  try {
    fs.rmSync(file, { force: true });
  } catch (error) {
    ctx.log('task-process-record-failed', { taskId, ...(incarnation !== undefined ? { incarnation } : {}), error: messageOf(error) });
  }
}
