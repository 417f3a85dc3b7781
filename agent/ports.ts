// Port pairs for process tasks (DESIGN.md §5, placement-records "Port pairs"). Each task key (a
// workload replica on this node) keeps one {public, internal} pair for as long as the node knows
// it, because ingresses re-read routing on a timer: a port that changed hands would, for a while,
// receive the old application's traffic. Hence: records persisted in the state folder and reused
// across agent restarts, a fresh pair only when the recorded one is taken, and quarantine on
// release before any other key may be given the ports.
import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { PortPairSchema, type PortPair, type TaskStart } from '../protocol';
import { DriverError } from './drivers/driver';
import { writePrivateFile } from './state-files';

/** Linux hands out outgoing source ports from 32768 up; a range there could be taken at any moment. */
export const HIGHEST_ALLOWED_PORT = 32767;
export const PORT_RECORDS_FILE = 'ports.json';
/** The host ports are test-bound on by default: the node's address is loopback unless it is given one (DESIGN.md §7). */
const BIND_HOST = '127.0.0.1';

export interface PortAllocatorOptions {
  /** the agent's state folder; the records live in `<stateDir>/ports.json` */
  stateDir: string;
  rangeStart: number;
  /** inclusive, at most 32767 */
  rangeEnd: number;
  /** how long a released port waits before another key may be given it */
  quarantineMs: number;
  /** the node's bind address, where tasks listen and so where each port is test-bound (default 127.0.0.1) */
  bindHost?: string;
  /** injectable clock for quarantine expiry (ms since epoch) */
  now?: () => number;
  /** injectable source of randomness in [0, 1) for the draws */
  random?: () => number;
}

export interface PortMove {
  from: PortPair;
  to: PortPair;
}

export interface PortAcquisition {
  ports: PortPair;
  /** true when the key got back a pair it already had (recorded, or its own still in quarantine) */
  reused: boolean;
  /** set when the recorded pair was found taken and a new one was chosen; the caller logs it */
  moved?: PortMove;
}

const QuarantineEntrySchema = z.object({
  pair: PortPairSchema,
  /** the key that released it; only that key may take it back early */
  formerKey: z.string(),
  /** ms since epoch after which any key may be given its ports */
  until: z.number(),
});

const PortRecordsSchema = z.object({
  version: z.literal(1),
  pairs: z.record(z.string(), PortPairSchema),
  /** oldest first */
  quarantine: z.array(QuarantineEntrySchema),
});
type PortRecords = z.infer<typeof PortRecordsSchema>;

const emptyRecords = (): PortRecords => ({ version: 1, pairs: {}, quarantine: [] });

/** The pair belongs to the replica on this node, not to one task id, so restarts keep it. */
export function portKeyFor(task: Pick<TaskStart, 'workload' | 'index'>): string {
  return `${task.workload}/${task.index}`;
}

/** Binds the port on `host` (loopback by default) and releases it again; true if nothing else holds it. */
export function isPortBindable(port: number, host = BIND_HOST): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

export class PortAllocator {
  readonly rangeStart: number;
  readonly rangeEnd: number;
  private readonly recordsPath: string;
  private readonly quarantineMs: number;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly bindHost: string;
  /** acquire/release run one at a time, so two keys can never draw the same port concurrently */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: PortAllocatorOptions) {
    const { rangeStart, rangeEnd, quarantineMs } = options;
    if (!Number.isInteger(rangeStart) || !Number.isInteger(rangeEnd) || rangeStart < 1) {
      throw new RangeError(`port range ${rangeStart}-${rangeEnd} must be whole numbers from 1`);
    }
    if (rangeEnd > HIGHEST_ALLOWED_PORT) {
      throw new RangeError(`port range ${rangeStart}-${rangeEnd} must end at or below ${HIGHEST_ALLOWED_PORT} (above it is the ephemeral range)`);
    }
    if (rangeStart > rangeEnd) throw new RangeError(`port range ${rangeStart}-${rangeEnd} starts after it ends`);
    if (!(quarantineMs >= 0)) throw new RangeError(`quarantineMs must be ≥ 0, got ${quarantineMs}`);
    this.rangeStart = rangeStart;
    this.rangeEnd = rangeEnd;
    this.quarantineMs = quarantineMs;
    this.recordsPath = path.join(options.stateDir, PORT_RECORDS_FILE);
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.bindHost = options.bindHost ?? BIND_HOST;
  }

  get rangeLabel(): string {
    return `${this.rangeStart}-${this.rangeEnd}`;
  }

  /**
   * The key's pair: the recorded one if both ports still bind, else a fresh random pair (reported
   * as `moved` when it replaces a recorded one). Throws DriverError('placement-unavailable') when
   * fewer than two free ports are left in the range.
   */
  acquire(key: string): Promise<PortAcquisition> {
    return this.serialise(async () => {
      const records = await this.load();
      const recorded = records.pairs[key];
      if (recorded) {
        if (await this.bothBindable(recorded)) return { ports: recorded, reused: true };
        // The recorded pair is taken; it stops being this key's, so quarantine it like a release.
        delete records.pairs[key];
        this.quarantine(records, recorded, key);
        const fresh = await this.drawPair(records, key);
        records.pairs[key] = fresh;
        await this.save(records);
        return { ports: fresh, reused: false, moved: { from: recorded, to: fresh } };
      }
      const reclaimed = await this.reclaimOwnQuarantined(records, key);
      const ports = reclaimed ?? (await this.drawPair(records, key));
      records.pairs[key] = ports;
      await this.save(records);
      return { ports, reused: reclaimed !== undefined };
    });
  }

  /**
   * Forgets the key's pair and quarantines both ports. A key without a record is a no-op, and so is
   * one whose record is no longer `onlyIf` (a newer task of the key has moved to another pair).
   */
  release(key: string, onlyIf?: PortPair): Promise<void> {
    return this.serialise(async () => {
      const records = await this.load();
      const recorded = records.pairs[key];
      if (!recorded) return;
      if (onlyIf && (recorded.public !== onlyIf.public || recorded.internal !== onlyIf.internal)) return;
      delete records.pairs[key];
      this.quarantine(records, recorded, key);
      await this.save(records);
    });
  }

  /**
   * For a process a restarted agent adopts, which holds `pair` already (so no bind check can pass):
   * true when `pair` is the key's recorded pair; or when the key has none and no other key holds
   * or quarantines either port, in which case it is recorded as the key's. False otherwise (the
   * replica's pair is another one now): the process is then not adopted.
   */
  claim(key: string, pair: PortPair): Promise<boolean> {
    return this.serialise(async () => {
      const records = await this.load();
      const recorded = records.pairs[key];
      if (recorded) return recorded.public === pair.public && recorded.internal === pair.internal;
      const ports = [pair.public, pair.internal];
      const heldByOthers = Object.entries(records.pairs).some(([other, held]) => other !== key && (ports.includes(held.public) || ports.includes(held.internal)));
      const quarantinedForOthers = records.quarantine.some((entry) => entry.formerKey !== key && (ports.includes(entry.pair.public) || ports.includes(entry.pair.internal)));
      if (heldByOthers || quarantinedForOthers) return false;
      records.quarantine = records.quarantine.filter((entry) => !(ports.includes(entry.pair.public) || ports.includes(entry.pair.internal)));
      records.pairs[key] = pair;
      await this.save(records);
      return true;
    });
  }

  /** The key's recorded pair, if any (no bind check). */
  recorded(key: string): Promise<PortPair | undefined> {
    return this.serialise(async () => (await this.load()).pairs[key]);
  }

  private serialise<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.catch(() => undefined).then(work);
    this.queue = next;
    return next;
  }

  private async bothBindable(pair: PortPair): Promise<boolean> {
    return (await isPortBindable(pair.public, this.bindHost)) && (await isPortBindable(pair.internal, this.bindHost));
  }

  private quarantine(records: PortRecords, pair: PortPair, formerKey: string): void {
    records.quarantine.push({ pair, formerKey, until: this.now() + this.quarantineMs });
  }

  /**
   * A key that released its pair and comes back within the quarantine (drain, then a restart of the
   * same replica) gets the same pair: quarantine keeps ports from *other* keys only.
   */
  private async reclaimOwnQuarantined(records: PortRecords, key: string): Promise<PortPair | undefined> {
    // The newest entry is the pair the key used last (an older one may be a pair it moved away from).
    let latest = -1;
    records.quarantine.forEach((entry, index) => {
      if (entry.formerKey === key) latest = index;
    });
    if (latest < 0) return undefined;
    const { pair } = records.quarantine[latest]!;
    if (!(await this.bothBindable(pair))) return undefined;
    records.quarantine.splice(latest, 1);
    return pair;
  }

  /**
   * Draws public and internal independently at random from the ports no other key holds and no
   * quarantine covers, each really bound and released before it is accepted.
   */
  private async drawPair(records: PortRecords, key: string): Promise<PortPair> {
    const held = new Set<number>();
    for (const [otherKey, pair] of Object.entries(records.pairs)) {
      if (otherKey === key) continue;
      held.add(pair.public);
      held.add(pair.internal);
    }
    const quarantined = new Set(records.quarantine.flatMap((entry) => [entry.pair.public, entry.pair.internal]));
    const candidates: number[] = [];
    for (let port = this.rangeStart; port <= this.rangeEnd; port++) {
      if (!held.has(port) && !quarantined.has(port)) candidates.push(port);
    }
    let boundElsewhere = 0;
    const unavailable = () =>
      new DriverError(
        'placement-unavailable',
        `fewer than two free ports in ${this.rangeLabel} (${held.size} held by other tasks, ${quarantined.size} in quarantine, ${boundElsewhere} bound by other processes)`,
      );
    const drawOne = async (): Promise<number> => {
      while (candidates.length > 0) {
        const index = Math.min(candidates.length - 1, Math.floor(this.random() * candidates.length));
        const [port] = candidates.splice(index, 1) as [number];
        if (await isPortBindable(port, this.bindHost)) return port;
        boundElsewhere++;
      }
      throw unavailable();
    };
    if (candidates.length < 2) throw unavailable();
    const publicPort = await drawOne();
    // Drawn afresh from what is left, never derived from the public port.
    const internalPort = await drawOne();
    return { public: publicPort, internal: internalPort };
  }

  private async load(): Promise<PortRecords> {
    let text: string;
    try {
      text = await fs.readFile(this.recordsPath, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyRecords();
      throw error;
    }
    // Writes are atomic, so a file that does not parse was edited by hand: refuse rather than
    // silently forget pairs and hand them to other keys.
    let parsed: ReturnType<typeof PortRecordsSchema.safeParse>;
    try {
      parsed = PortRecordsSchema.safeParse(JSON.parse(text));
    } catch (error) {
      throw new Error(`port records ${this.recordsPath} are not JSON: ${(error as Error).message}`);
    }
    if (!parsed.success) throw new Error(`port records ${this.recordsPath} are malformed: ${parsed.error.message}`);
    const records = parsed.data;
    const now = this.now();
    records.quarantine = records.quarantine.filter((entry) => entry.until > now);
    return records;
  }

  /** tmp + fsync + rename (mode 600, folder 700), so a crash leaves either the old records or the new ones. */
  private async save(records: PortRecords): Promise<void> {
    await writePrivateFile(this.recordsPath, `${JSON.stringify(records, null, 2)}\n`);
  }
}
