// A consumer task's claim on its partitions (DESIGN.md §5), as SQL on the offsets table: an owner
// and its placement fence per (workload, partition), changed only under the row lock, and every
// change written to the ownership log in the same transaction, so the log is a true record of who
// held what (the audit's "no two owners at once" reads it). The batches check the same row.
import type { Pool, PoolClient } from 'pg';
import { OFFSETS_TABLE, OWNERSHIP_LOG_TABLE, withTransaction } from './consumer-schema';

export type AcquireOutcome =
  | { granted: true; committed: number; from: string | null }
  | { granted: false; holder: string; holderFence: number };

export interface PartitionOwnership {
  /** Takes the partition at `fence` (free, ours already, or held under a lower fence); answers its committed offset. */
  acquire(partition: number, fence: number): Promise<AcquireOutcome>;
  /** Lets the partition go; its committed offset, or null if this task no longer held it. */
  release(partition: number, fence: number): Promise<number | null>;
}

export function partitionOwnership(pool: Pool, owner: { workload: string; taskId: string; incarnation: string }): PartitionOwnership {
  const { workload, taskId, incarnation } = owner;
  const log = (client: PoolClient, partition: number, task: string, taskIncarnation: string | null, fence: number, event: 'acquire' | 'release') =>
    client.query(
      `insert into ${OWNERSHIP_LOG_TABLE} (workload, partition, task_id, incarnation, fence, event) values ($1, $2, $3, $4, $5, $6)`,
      [workload, partition, task, taskIncarnation, fence, event],
    );
  return {
    acquire: (partition, fence) => withTransaction(pool, async (client) => {
      await client.query(
        `insert into ${OFFSETS_TABLE} (workload, partition, committed_offset) values ($1, $2, -1)
         on conflict (workload, partition) do nothing`,
        [workload, partition],
      );
      const current = await client.query<{ owner_task: string | null; owner_fence: string | null }>(
        `select owner_task, owner_fence from ${OFFSETS_TABLE} where workload = $1 and partition = $2 for update`,
        [workload, partition],
      );
      const previous = current.rows[0];
      const granted = await client.query<{ committed_offset: string }>(
        `update ${OFFSETS_TABLE} set owner_task = $3, owner_fence = $4
          where workload = $1 and partition = $2 and (owner_task is null or owner_task = $3 or owner_fence < $4)
          returning committed_offset`,
        [workload, partition, taskId, fence],
      );
      if (granted.rowCount === 0) return { granted: false, holder: previous.owner_task ?? '?', holderFence: Number(previous.owner_fence) };
      if (previous.owner_task !== null && previous.owner_task !== taskId) {
        // A higher fence takes over from a stale holder. From this commit on the stale holder can
        // commit nothing (its batches check owner_task/owner_fence under the row lock), so its
        // ownership ends here: log that release for it.
        await log(client, partition, previous.owner_task, null, Number(previous.owner_fence), 'release');
      }
      await log(client, partition, taskId, incarnation, fence, 'acquire');
      return { granted: true, committed: Number(granted.rows[0].committed_offset), from: previous.owner_task };
    }),
    release: (partition, fence) => withTransaction(pool, async (client) => {
      const released = await client.query<{ committed_offset: string }>(
        `update ${OFFSETS_TABLE} set owner_task = null, owner_fence = null
          where workload = $1 and partition = $2 and owner_task = $3
          returning committed_offset`,
        [workload, partition, taskId],
      );
      if (released.rowCount === 0) return null;
      await log(client, partition, taskId, incarnation, fence, 'release');
      return Number(released.rows[0].committed_offset);
    }),
  };
}
