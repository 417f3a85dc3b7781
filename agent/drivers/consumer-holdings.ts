// Which partitions a consumer task holds (DESIGN.md §5 "consumer"): it acquires each partition its
// start assigns under its placement fence, releases what is no longer assigned, and backs off from
// a partition held at a newer fence (it is superseded there: it can commit nothing).
import type { AcquireOutcome, PartitionOwnership } from './consumer-ownership';
import type { SourcePort } from './sources';
import { exponentialDelayMs } from '../../lib/backoff';

const ACQUIRE_RETRY_MS = 100;
/**
 * A partition held under a NEWER fence than this task's means this task's placement is superseded
 * (e.g. recovery moved the work while this agent was unreachable): it can commit nothing there, and
 * asks again only with a growing pause, up to this, until the holder lets go, an update raises its
 * fence, or the control plane revokes the task.
 */
const FENCED_OUT_RETRY_MAX_MS = 2_000;

export interface OwnedPartition {
  fence: number;
  committed: number;
  /** highest offset in the source at the last backlog refresh; null until the first one */
  maxOffset: number | null;
}

export interface HoldingCounts {
  acquired: number;
  released: number;
  ownershipLost: number;
  acquireDenied: number;
}

export class PartitionHoldings {
  readonly owned = new Map<number, OwnedPartition>();
  /** partition → who holds it, for partitions waiting to be acquired */
  private readonly waitingOn = new Map<number, string>();
  private readonly nextAcquireAttemptAt = new Map<number, number>();
  /** partition → refused acquisitions in a row by a holder with a newer fence (fenced out) */
  private readonly fencedOut = new Map<number, number>();

  constructor(
    private readonly ownership: PartitionOwnership,
    private readonly source: SourcePort,
    private readonly who: { taskId: string; workload: string },
    private readonly counts: HoldingCounts,
    private readonly pollMs: number,
    private readonly log: (event: string, fields: Record<string, unknown>) => void,
  ) {}

  /** Between batches (nothing in flight): release what is no longer desired, acquire (or re-fence) what is. */
  async reconcile(desired: ReadonlySet<number>, fence: number): Promise<void> {
    for (const p of [...this.owned.keys()]) {
      if (!desired.has(p)) {
        await this.release(p, fence);
        this.owned.delete(p);
      }
    }
    const now = Date.now();
    for (const p of [...desired].sort((a, b) => a - b)) {
      const owned = this.owned.get(p);
      if (owned && owned.fence === fence) continue;
      if ((this.nextAcquireAttemptAt.get(p) ?? 0) > now) continue;
      const outcome = await this.acquire(p, fence);
      if (outcome.granted) {
        this.owned.set(p, { fence, committed: outcome.committed, maxOffset: owned?.maxOffset ?? null });
        this.waitingOn.delete(p);
        this.nextAcquireAttemptAt.delete(p);
        this.fencedOut.delete(p);
        continue;
      }
      // Held by another task at a fence ≥ ours: it is being drained/released, or we are stale. Poll.
      if (owned) this.lose(p, `held by ${outcome.holder} at fence ${outcome.holderFence}`);
      this.counts.acquireDenied += 1;
      this.waitingOn.set(p, `${outcome.holder} at fence ${outcome.holderFence}`);
      let retryMs = Math.max(ACQUIRE_RETRY_MS, this.pollMs);
      if (outcome.holderFence > fence) {
        // Superseded, not a handover in progress: back off, and say so once.
        const refusals = (this.fencedOut.get(p) ?? 0) + 1;
        this.fencedOut.set(p, refusals);
        if (refusals === 1) this.log('consumer.fenced-out', { ...this.who, partition: p, fence, holder: outcome.holder, holderFence: outcome.holderFence });
        retryMs = Math.min(FENCED_OUT_RETRY_MAX_MS, Math.max(retryMs, exponentialDelayMs(refusals, ACQUIRE_RETRY_MS, FENCED_OUT_RETRY_MAX_MS)));
      } else {
        this.fencedOut.delete(p);
      }
      this.nextAcquireAttemptAt.set(p, now + retryMs);
    }
  }

  private async acquire(partition: number, fence: number): Promise<AcquireOutcome> {
    const outcome = await this.ownership.acquire(partition, fence);
    if (outcome.granted) {
      this.counts.acquired += 1;
      this.log('consumer.acquired', { ...this.who, partition, fence, from: outcome.from });
    }
    return outcome;
  }

  /** Clears our ownership of a partition; returns its committed offset, or null if we no longer held it. */
  async release(partition: number, fence: number): Promise<number | null> {
    const committed = await this.ownership.release(partition, this.owned.get(partition)?.fence ?? fence);
    if (committed !== null) this.counts.released += 1;
    await this.source.forget(partition).catch(() => {});
    this.log('consumer.released', { ...this.who, partition, committed });
    return committed;
  }

  lose(partition: number, why: string): void {
    this.owned.delete(partition);
    this.counts.ownershipLost += 1;
    this.log('consumer.ownership-lost', { ...this.who, partition, why });
  }

  /** Desired partitions not (yet) held at `fence`. */
  pending(desired: ReadonlySet<number>, fence: number): number[] {
    return [...desired].filter((p) => this.owned.get(p)?.fence !== fence).sort((a, b) => a - b);
  }

  /** "p3 (held by c-1 at fence 4)", saying when this task is fenced out of it. */
  describeWaiting(partition: number, fence: number): string {
    const holder = this.waitingOn.get(partition);
    if (holder === undefined) return `p${partition}`;
    const fencedOut = this.fencedOut.has(partition) ? `, newer than this task's fence ${fence}: fenced out, nothing is committed there` : '';
    return `p${partition} (held by ${holder}${fencedOut})`;
  }

  /** A new start (another fence or assignment): ask for every partition again at once. */
  retryNow(): void {
    this.nextAcquireAttemptAt.clear();
    this.fencedOut.clear();
  }
}
