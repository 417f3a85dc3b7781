// What each stream operator keeps between checkpoints, and how it snapshots and restores it: a
// source's offsets per partition, a keyed aggregate's counts per key (by key group), a sink's
// epoch of updates since the last checkpoint. The subtask (subtask.ts) moves records and barriers;
// these hold the state the barriers cut.
import { keyGroupOf } from '../../../domain/stream';
import type { CountUpdate } from '../../../protocol';

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

/** A keyed aggregate's counts, restored and snapshotted per key group. */
export class KeyedCounts {
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly maxParallelism: number,
    /** the key groups this subtask owns: [start, end) */
    private readonly owned: { start: number; end: number },
  ) {}

  /** Loads the owned key groups' counts from a checkpoint's aggregate snapshots (whichever subtask wrote them). */
  restore(snapshots: readonly { groups: Record<string, Record<string, number>> }[]): void {
    for (const snapshot of snapshots) {
      for (const [group, keys] of Object.entries(snapshot.groups)) {
        if (Number(group) < this.owned.start || Number(group) >= this.owned.end) continue;
        for (const [key, count] of Object.entries(keys)) this.counts.set(key, count);
      }
    }
  }

  get size(): number {
    return this.counts.size;
  }

  /** Counts one more record of `key`; answers its new count. */
  increment(key: string): number {
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    return count;
  }

  snapshot(): { groups: Record<string, Record<string, number>> } {
    const groups: Record<string, Record<string, number>> = {};
    for (const [key, count] of this.counts) (groups[keyGroupOf(key, this.maxParallelism)] ??= {})[key] = count;
    return { groups };
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
