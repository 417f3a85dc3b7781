// Port ranges for tests that need a range rather than one port (an agent's --port-range, a
// PortAllocator). A single port is `freePort()` (bind port 0); a range cannot be: the kernel hands
// out port 0 from the ephemeral ports (32768 and up on Linux), which the agent refuses for its
// ranges. So a test reserves a block below them: claimed with an exclusive lock file that names
// this process (so two test processes on one machine never share a block, and a block whose
// claimant died is taken back), and verified free by binding every port of it before use. A
// process that dies holding a block leaves its lock file behind; the next claimant sees the pid is
// gone and takes the block over.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isPortBindable } from '../agent/ports';

/** Ports per block; a test takes a whole block or slices of one. */
export const PORT_BLOCK_SIZE = 200;
/** Blocks lie in 10000-19999: below the ephemeral ports and outside the agent's default range (20000-29999). */
const FIRST_PORT = 10_000;
const BLOCK_COUNT = 50;
const LOCK_DIR = path.join(os.tmpdir(), 'scalegate-test-port-blocks');

export interface PortRange {
  start: number;
  /** inclusive */
  end: number;
  /** "start-end", as the agent's --port-range takes it */
  label: string;
  /** `size` ports of this range from `offset` on (no new reservation: the block is already ours) */
  slice(offset: number, size: number): PortRange;
  /** gives the block back (idempotent) */
  release(): void;
}

const held = new Set<string>(); // lock files this module holds, so a release happens once
/** Whether process `pid` still exists (one of another user counts as alive). */

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Creates the block's lock file, taking it over if its claimant is gone; false when it is taken. */
function claim(lockPath: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number(fs.readFileSync(lockPath, 'utf8').trim());
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) return false;
    // The claimant died without giving the block back: remove its lock and race for it once more
    // (only one `wx` create can win).
    fs.rmSync(lockPath, { force: true });
  }
  return false;
}

function rangeOf(start: number, end: number, release: () => void): PortRange {
  return {
    start,
    end,
    label: `${start}-${end}`,
    slice(offset, size) {
      if (!(offset >= 0 && size >= 1 && start + offset + size - 1 <= end)) {
        throw new RangeError(`slice ${offset}+${size} is outside ${start}-${end}`);
      }
      return rangeOf(start + offset, start + offset + size - 1, () => {});
    },
    release,
  };
}

/**
 * Reserves `size` consecutive ports (at most PORT_BLOCK_SIZE) below 32768, every one of them free
 * when this returns. Release it when done (a stack does on stop; a test file in afterAll).
 */
export async function reservePortRange(size: number = PORT_BLOCK_SIZE): Promise<PortRange> {
  if (!(Number.isInteger(size) && size >= 1 && size <= PORT_BLOCK_SIZE)) {
    throw new RangeError(`a reserved port range holds 1-${PORT_BLOCK_SIZE} ports, not ${size}`);
  }
  fs.mkdirSync(LOCK_DIR, { recursive: true });
  // Random order (Fisher-Yates), so test processes starting together do not all race for block 0.
  const order = Array.from({ length: BLOCK_COUNT }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let busy = 0;
  for (const block of order) {
    const start = FIRST_PORT + block * PORT_BLOCK_SIZE;
    const lockPath = path.join(LOCK_DIR, `${start}.lock`);
    if (!claim(lockPath)) continue;
    held.add(lockPath);
    const release = () => {
      if (!held.delete(lockPath)) return;
      fs.rmSync(lockPath, { force: true });
    };
    const ports = Array.from({ length: size }, (_, i) => start + i);
    const free = await Promise.all(ports.map((port) => isPortBindable(port)));
    if (free.every(Boolean)) return rangeOf(start, start + size - 1, release);
    busy += 1;
    release(); // something else listens in this block: leave it, try another
  }
  throw new Error(`no free block of ${size} ports in ${FIRST_PORT}-${FIRST_PORT + BLOCK_COUNT * PORT_BLOCK_SIZE - 1} (${busy} had a port in use; the rest are reserved by other test processes, see ${LOCK_DIR})`);
}
