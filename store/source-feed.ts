// The source feed (DESIGN.md §5 contract): what a producer writes into a consumer's input table.
// Records hash their key over partitions and take increasing offsets per partition, allocated under
// a per-(source, partition) advisory transaction lock, so two producers at once never collide and a
// consumer never sees offset N+1 before N is committed. runLoad paces appends at a steady rate
// (scripts/loadgen.ts is its command line; tests and benches call it directly).
import type { Pool } from 'pg';
import { CONSUMER_DDL_LOCK_KEY, consumerTablesDdl, quoteIdentifier } from '../protocol/consumer-tables';
import { inTransaction, withPool } from './db';

export interface LoadOptions extends PacedLoad {
  databaseUrl: string;
  /** source table (a plain lowercase SQL identifier) */
  source: string;
}

export interface LoadResult {
  written: number;
  /** records written per partition */
  perPartition: Record<string, number>;
  /** highest offset this run wrote per partition */
  lastOffset: Record<string, number>;
}

const TICK_MS = 20; // small batches: a tick's worth of records per partition per transaction
const MAX_RECORDS_PER_TICK = 5_000;

/** FNV-1a: a stable key → partition mapping any other producer can reproduce. */
export function partitionForKey(key: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

const abortableSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done);
  });

export function createSourceFeed(db: Pool) {
  return {
    /** Creates, if missing, the source table and the consumer's bookkeeping tables. */
    async ensureTables(source: string): Promise<void> {
      await inTransaction(db, async (client) => {
        await client.query('select pg_advisory_xact_lock($1)', [CONSUMER_DDL_LOCK_KEY]);
        for (const statement of consumerTablesDdl(source)) await client.query(statement);
      });
    },

    /** Appends one partition's batch; returns the offsets it was given. */
    async append(source: string, partition: number, keys: string[], payloads: string[]): Promise<number[]> {
      const table = quoteIdentifier(source);
      return inTransaction(db, async (client) => {
        // Held until commit: the next writer of this partition reads max(offset) only after our rows are visible.
        await client.query('select pg_advisory_xact_lock(hashtext($1), $2)', [`scalegate-source:${source}`, partition]);
        const { rows } = await client.query<{ offset: string }>(
          `with last as (select coalesce(max("offset"), -1) as last_offset from ${table} where partition = $1)
           insert into ${table} (partition, "offset", key, payload)
           select $1, last.last_offset + u.ordinal, u.record_key, u.record_payload::jsonb
             from last, unnest($2::text[], $3::text[]) with ordinality as u(record_key, record_payload, ordinal)
           returning "offset"`,
          [partition, keys, payloads],
        );
        return rows.map((r) => Number(r.offset));
      });
    },
  };
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { databaseUrl, source } = options;
  quoteIdentifier(source); // validates early
  const result: LoadResult = { written: 0, perPartition: {}, lastOffset: {} };
  return withPool(databaseUrl, 4, async (pool) => {
    const feed = createSourceFeed(pool);
    await feed.ensureTables(source);
    await runPaced(options, async (byPartition) => {
      await Promise.all(
        [...byPartition].map(async ([partition, records]) => {
          const offsets = await feed.append(source, partition, records.map((r) => r.key), records.map((r) => r.payload));
          result.written += offsets.length;
          result.perPartition[partition] = (result.perPartition[partition] ?? 0) + offsets.length;
          result.lastOffset[partition] = Math.max(result.lastOffset[partition] ?? -1, ...offsets);
        }),
      );
      return [...byPartition.values()].reduce((n, records) => n + records.length, 0);
    });
    return result;
  });
}

/** How a load is paced, whatever it writes to: a table (runLoad) or a Kafka topic (kafka-feed.ts). */
export interface PacedLoad {
  partitions: number;
  ratePerSec: number;
  /** stop after this long */
  durationMs?: number;
  /** stop after this many records */
  count?: number;
  /** distinct keys cycled through (default 1024) */
  keySpace?: number;
  signal?: AbortSignal;
}

/**
 * Calls `write` every tick with the records due by the rate (keys cycled over `keySpace`, each
 * hashed to its partition, payloads numbered), until the count, the duration or the signal ends it.
 * `write` answers how many it wrote.
 */
export async function runPaced(
  options: PacedLoad,
  write: (byPartition: Map<number, { key: string; payload: string }[]>) => Promise<number>,
): Promise<void> {
  const { partitions, ratePerSec, durationMs, count, signal } = options;
  const keySpace = options.keySpace ?? 1024;
  if (!Number.isInteger(partitions) || partitions < 1) throw new Error(`partitions must be an integer ≥ 1, got ${partitions}`);
  if (!(ratePerSec > 0)) throw new Error(`ratePerSec must be > 0, got ${ratePerSec}`);
  if (!Number.isInteger(keySpace) || keySpace < 1) throw new Error(`keySpace must be an integer ≥ 1, got ${keySpace}`);
  const startedAt = Date.now();
  let written = 0;
  let sequence = 0;
  for (;;) {
    const elapsed = Date.now() - startedAt;
    if (signal?.aborted) break;
    if (count !== undefined && written >= count) break;
    if (durationMs !== undefined && elapsed >= durationMs) break;

    // Catch up to where the rate says we should be (by count, never ahead of schedule).
    const due = Math.floor((elapsed * ratePerSec) / 1000) + 1 - written;
    const remaining = count === undefined ? Infinity : count - written;
    const take = Math.min(due, remaining, MAX_RECORDS_PER_TICK);
    if (take <= 0) {
      await abortableSleep(Math.min(TICK_MS, Math.ceil(1000 / ratePerSec)), signal);
      continue;
    }

    const byPartition = new Map<number, { key: string; payload: string }[]>();
    for (let i = 0; i < take; i++) {
      const key = `key-${sequence % keySpace}`;
      const partition = partitionForKey(key, partitions);
      const batch = byPartition.get(partition) ?? [];
      batch.push({ key, payload: JSON.stringify({ sequence, producedAt: new Date().toISOString() }) });
      byPartition.set(partition, batch);
      sequence += 1;
    }
    written += await write(byPartition);
    await abortableSleep(TICK_MS, signal);
  }
}
