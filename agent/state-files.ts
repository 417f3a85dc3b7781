// The agent's state folder holds what only this node knows (its runtime's credential, recorded task
// starts, port pairs, the newest placement fence per workload, drain receipts): private to the
// agent's user. The
// folder is mode 700 and every record in it is written atomically (temp file, fsync, rename) with
// mode 600, so a crash leaves either the old record or the new one and nobody else can read either.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
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
