// The agent's state folder holds what only this node knows (its runtime's credential, recorded task
// starts, port pairs, the newest placement fence per workload, drain receipts): private to the
// agent's user. The
// folder is mode 700 and every record in it is written atomically (temp file, fsync, rename) with
// mode 600, so a crash leaves either the old record or the new one and nobody else can read either.
// The task host's records (tasks.json, fences.json, receipts.json) are read and written here too
// (HostRecords); a record that cannot be used is set aside and logged, never fatal.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { describeIssues, DrainReceiptSchema, TaskIdSchema, TaskStartBodySchema, type DrainReceipt, type TaskStart } from '../protocol';
import { messageOf } from '../lib/errors';
import { DriverError } from './drivers/driver';
import { setTimeout as sleep } from 'node:timers/promises';

export const PRIVATE_DIR_MODE = 0o700;

/**
 * A record that cannot be written (the folder made read-only or immutable, the disk full) refuses
 * what needed it with a code a caller may retry (503 state-unwritable), not a bare 500.
 */
function unwritable(file: string, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (!code) return error as Error;
  return new DriverError('state-unwritable', `the agent cannot write ${path.basename(file)} in its state folder (${code}); nothing was changed, retry`);
}
export const PRIVATE_FILE_MODE = 0o600;

/** Creates the folder (and missing parents) mode 700, and tightens it to 700 if it existed. */
export function ensurePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  fs.chmodSync(dir, PRIVATE_DIR_MODE);
}

/** Writes `text` to `file` atomically, mode 600, creating its folder mode 700 when missing. */
export function writePrivateFileSync(file: string, text: string): void {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  } catch (error) {
    throw unwritable(file, error);
  }
  const staging = `${file}.${process.pid}.${randomUUID()}.tmp`;
  try {
    const fd = fs.openSync(staging, 'w', PRIVATE_FILE_MODE);
    try {
      fs.writeFileSync(fd, text);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    // The mode given to open is reduced by the umask; set it outright.
    fs.chmodSync(staging, PRIVATE_FILE_MODE);
    fs.renameSync(staging, file);
  } catch (error) {
    try {
      fs.rmSync(staging, { force: true });
    } catch {
      // an immutable folder refuses this too; the staging file was never made there
    }
    throw unwritable(file, error);
  }
}

/** The async twin of writePrivateFileSync. */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  await fs.promises.mkdir(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  const staging = `${file}.${process.pid}.${randomUUID()}.tmp`;
  try {
    const handle = await fs.promises.open(staging, 'w', PRIVATE_FILE_MODE);
    try {
      await handle.writeFile(text);
      await handle.sync();
      await handle.chmod(PRIVATE_FILE_MODE);
    } finally {
      await handle.close();
    }
    await fs.promises.rename(staging, file);
  } catch (error) {
    await fs.promises.rm(staging, { force: true }).catch(() => {});
    throw unwritable(file, error);
  }
}

/**
 * At agent start: the state folder to 700 and the records already in it to 600 (an older agent
 * wrote them with the umask's mode). Missing files are skipped.
 */
export function tightenStateDir(stateDir: string, files: readonly string[]): void {
  ensurePrivateDir(stateDir);
  for (const name of files) {
    try {
      fs.chmodSync(path.join(stateDir, name), PRIVATE_FILE_MODE);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/**
 * Runs `prepare` (tightenStateDir at an agent's start) until the folder takes it, waiting between
 * tries (0.25 s doubling to 5 s). An agent that cannot write its state folder (read-only, immutable,
 * full) waits for it rather than exiting: the processes its previous incarnation left can only be
 * adopted or stopped by it, and an agent that exits leaves them unmanaged (chaos seeds 12 and 73).
 */
export async function untilStateDirWritable(
  prepare: () => void,
  log: (event: string, fields: Record<string, unknown>) => void,
  wait: (ms: number) => Promise<void> = (ms) => sleep(ms),
): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      prepare();
      return attempt;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (!code) throw error; // not the folder refusing: a bug, which must not be retried forever
      if (attempt % 10 === 0) log('state-folder-unwritable', { error: (error as Error).message, attempt, retrying: true });
      await wait(Math.min(5_000, 250 * 2 ** Math.min(attempt, 5)));
    }
  }
}

/** The starts of the tasks hosted here, so a restarted agent starts them again. */
export const TASK_RECORDS_FILE = 'tasks.json';
/** The newest placement fence seen per workload. */
export const FENCE_RECORDS_FILE = 'fences.json';
/** The drain receipts of the last stopped tasks, so a retried stop answers the same receipt. */
export const RECEIPT_RECORDS_FILE = 'receipts.json';
/** How many receipts are kept: enough for any retry, bounded so the file cannot grow forever. */
export const RECEIPTS_KEPT = 1000;

const RecordedStartSchema = TaskStartBodySchema.extend({ taskId: TaskIdSchema });
const ReceiptRecordsSchema = z.object({ version: z.literal(1), receipts: z.array(DrainReceiptSchema).max(RECEIPTS_KEPT) });
const FenceRecordsSchema = z.object({
  version: z.literal(1),
  fences: z.record(z.string(), z.int().min(0)),
});

export type StateLog = (event: string, fields?: Record<string, unknown>) => void;

/**
 * The task host's records in the state folder: its recorded starts, the newest placement fence per
 * workload and its drain receipts. Without a state folder nothing is read and nothing is written.
 */
export class HostRecords {
  readonly taskFile: string | undefined;
  private readonly fenceFile: string | undefined;
  private readonly receiptFile: string | undefined;

  constructor(
    stateDir: string | undefined,
    private readonly log: StateLog,
  ) {
    this.taskFile = stateDir === undefined ? undefined : path.join(stateDir, TASK_RECORDS_FILE);
    this.fenceFile = stateDir === undefined ? undefined : path.join(stateDir, FENCE_RECORDS_FILE);
    this.receiptFile = stateDir === undefined ? undefined : path.join(stateDir, RECEIPT_RECORDS_FILE);
  }

  /** Reads a JSON record of the state folder; undefined when absent or unusable (set aside and logged). */
  private readRecord(file: string | undefined, what: string): unknown {
    if (!file) return undefined;
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.log('state-record-unreadable', { file, what, error: messageOf(error) });
      return undefined;
    }
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      this.setAside(file, what, `not JSON: ${messageOf(error)}`);
      return undefined;
    }
  }

  /** Keeps an unusable record for the operator under another name, so the next write does not erase it. */
  private setAside(file: string, what: string, reason: string): void {
    const aside = `${file}.unusable-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    try {
      fs.renameSync(file, aside);
    } catch (error) {
      this.log('state-record-unusable', { file, what, reason, error: `could not set it aside: ${messageOf(error)}` });
      return;
    }
    this.log('state-record-unusable', { file, what, reason, setAsideAs: aside });
  }

  /** A record of the state folder as `schema` reads it; undefined when absent or unusable (set aside and logged). */
  private readValid<T>(file: string | undefined, what: string, schema: z.ZodType<T>): T | undefined {
    const raw = this.readRecord(file, what);
    if (raw === undefined) return undefined;
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      this.setAside(file!, what, describeIssues(parsed.error));
      return undefined;
    }
    return parsed.data;
  }

  /** The newest placement fence per workload, as recorded. */
  readFences(): [workload: string, fence: number][] {
    return Object.entries(this.readValid(this.fenceFile, 'placement fences', FenceRecordsSchema)?.fences ?? {});
  }

  writeFences(fences: Map<string, number>): void {
    if (this.fenceFile) writePrivateFileSync(this.fenceFile, JSON.stringify({ version: 1, fences: Object.fromEntries(fences) }));
  }

  /** The recorded drain receipts, oldest first. */
  readReceipts(): DrainReceipt[] {
    return this.readValid(this.receiptFile, 'drain receipts', ReceiptRecordsSchema)?.receipts ?? [];
  }

  writeReceipts(receipts: Iterable<DrainReceipt>): void {
    if (this.receiptFile) writePrivateFileSync(this.receiptFile, JSON.stringify({ version: 1, receipts: [...receipts] }));
  }

  /** The recorded task starts, one per task id; an entry that is no valid start is logged and skipped. */
  readStarts(): TaskStart[] {
    const raw = this.readRecord(this.taskFile, 'recorded task starts');
    if (raw === undefined) return [];
    if (!Array.isArray(raw)) {
      this.setAside(this.taskFile!, 'recorded task starts', 'not a list of task starts');
      return [];
    }
    const starts: TaskStart[] = [];
    const seen = new Set<string>();
    raw.forEach((entry: unknown, index) => {
      const parsed = RecordedStartSchema.safeParse(entry);
      if (!parsed.success) {
        this.log('task-record-invalid', { file: this.taskFile, index, error: describeIssues(parsed.error) });
        return;
      }
      if (seen.has(parsed.data.taskId)) return;
      seen.add(parsed.data.taskId);
      starts.push(parsed.data);
    });
    return starts;
  }

  writeStarts(starts: TaskStart[]): void {
    if (this.taskFile) writePrivateFileSync(this.taskFile, JSON.stringify(starts));
  }
}
