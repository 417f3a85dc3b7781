// What each stream operator keeps between checkpoints, and how it snapshots and restores it: a
// source's offsets per partition, a keyed aggregate's counts per key (incrementally), a sink's
// epoch of updates since the last checkpoint. The subtask (subtask.ts) moves records and barriers;
// these hold the state the barriers cut.
import type { CountUpdate } from '../../../protocol';
import type { ChangedCounts } from './job-state';

/** A source's read position: the last offset emitted per partition (-1: none). */
export class SourceOffsets {
  readonly offsets: Map<number, number>;

  constructor(readonly partitions: readonly number[]) {
    this.offsets = new Map(partitions.map((p) => [p, -1]));
  }

  /** Takes the offsets of the partitions read here from a checkpoint's source snapshots. */
  restore(snapshots: readonly { offsets: Record<string, number> }[]): void {
    for (const snapshot of snapshots) {
      for (const [partition, offset] of Object.entries(snapshot.offsets)) if (this.offsets.has(Number(partition))) this.offsets.set(Number(partition), offset);
    }
  }

  advance(partition: number, offset: number): void {
    this.offsets.set(partition, offset);
  }

  snapshot(): { offsets: Record<string, number> } {
    return { offsets: Object.fromEntries(this.offsets) };
  }

  /** Records up to the read offsets (offsets start at 0 per partition): with recordsRead, what a restore re-read. */
  get position(): number {
    return [...this.offsets.values()].reduce((sum, offset) => sum + offset + 1, 0);
  }

  /** Records behind the newest offsets per partition. */
  backlog(newest: ReadonlyMap<number, number>): number {
    return this.partitions.reduce((sum, p) => sum + Math.max(0, (newest.get(p) ?? -1) - this.offsets.get(p)!), 0);
  }
}

/**
 * A keyed aggregate's counts. Neither a checkpoint nor a restore costs more as the state grows: a
 * snapshot takes only the keys counted since the previous one, and a restored subtask loads no
 * state up front; a key's count at the restore point is loaded (batched) when its first record
 * here arrives, so the subtask holds the keys it counted, not every key of its key groups.
 */
export class KeyedCounts {
  private readonly counts = new Map<string, number>();
  private changed = new Set<string>();

  /** restored false: the subtask started empty, so every key it has not counted counts 0 */
  constructor(private readonly restored: boolean) {}

  get size(): number {
    return this.counts.size;
  }

  /** The keys among `keys` whose count at the restore point this subtask has not loaded yet. */
  unloaded(keys: Iterable<string>): string[] {
    if (!this.restored) return [];
    const missing = new Set<string>();
    for (const key of keys) if (!this.counts.has(key)) missing.add(key);
    return [...missing];
  }

  /** Takes the restore point's counts of `keys`; a key `found` lacks counted nothing up to it. */
  load(keys: readonly string[], found: ReadonlyMap<string, number>): void {
    for (const key of keys) if (!this.counts.has(key)) this.counts.set(key, found.get(key) ?? 0);
  }

  /** Counts one more record of `key`; answers its new count. */
  increment(key: string): number {
    const current = this.counts.get(key);
    // Counting on a count the restore point holds but this subtask has not loaded would lose it.
    if (current === undefined && this.restored) throw new Error(`key ${JSON.stringify(key)} was counted before its restored count was loaded`);
    const count = (current ?? 0) + 1;
    this.counts.set(key, count);
    this.changed.add(key);
    return count;
  }

  /** The keys counted since the previous snapshot, with their counts; the next epoch starts empty. */
  takeChanged(): ChangedCounts {
    const keys = [...this.changed];
    this.changed = new Set();
    return { keys, counts: keys.map((k) => this.counts.get(k)!) };
  }
}

/** A sink's updates since the last checkpoint: the newest count per key, and its oldest record's append time. */
export class SinkEpoch {
  private counts = new Map<string, number>();
  private oldestAt = Infinity;

  add([, key, count, appendedAt]: CountUpdate): void {
    if (count > (this.counts.get(key) ?? 0)) this.counts.set(key, count);
    if (appendedAt < this.oldestAt) this.oldestAt = appendedAt;
  }

  /** The epoch's keys and counts (to pre-commit) and its oldest append time (null: no record), starting the next epoch. */
  take(): { keys: string[]; counts: number[]; oldestAt: number | null } {
    const keys = [...this.counts.keys()];
    const taken = { keys, counts: keys.map((k) => this.counts.get(k)!), oldestAt: this.oldestAt === Infinity ? null : this.oldestAt };
    this.counts = new Map();
    this.oldestAt = Infinity;
    return taken;
  }
}
