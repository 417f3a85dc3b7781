// A load generator for consumer workloads: appends records to a source table at a steady rate,
// hashing keys over partitions, with increasing offsets per partition (DESIGN.md §5 contract).
// Offsets are allocated under a per-(source, partition) advisory transaction lock, so two
// generators at once never collide and a consumer never sees offset N+1 before N is committed.
//
//   tsx scripts/loadgen.ts --db URL --source orders --partitions 8 --rate 200 --count 1000
//   (or --duration-ms 10000; without either it runs until Ctrl-C) → prints JSON of what it wrote
import { Pool } from 'pg';
import { ensureConsumerTables, quoteIdentifier, withTransaction } from '../agent/drivers/consumer-schema';

export interface LoadOptions {
  databaseUrl: string;
  /** source table (a plain lowercase SQL identifier) */
  source: string;
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

/** Appends one partition's batch; returns the offsets it was given. */
async function appendBatch(pool: Pool, source: string, partition: number, keys: string[], payloads: string[]): Promise<number[]> {
  const table = quoteIdentifier(source);
  return withTransaction(pool, async (client) => {
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
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { databaseUrl, source, partitions, ratePerSec, durationMs, count, signal } = options;
  const keySpace = options.keySpace ?? 1024;
  quoteIdentifier(source); // validates early
  if (!Number.isInteger(partitions) || partitions < 1) throw new Error(`partitions must be an integer ≥ 1, got ${partitions}`);
  if (!(ratePerSec > 0)) throw new Error(`ratePerSec must be > 0, got ${ratePerSec}`);
  if (!Number.isInteger(keySpace) || keySpace < 1) throw new Error(`keySpace must be an integer ≥ 1, got ${keySpace}`);

  const result: LoadResult = { written: 0, perPartition: {}, lastOffset: {} };
  const pool = new Pool({ connectionString: databaseUrl, max: 4, connectionTimeoutMillis: 5_000 });
  pool.on('error', () => {});
  try {
    await ensureConsumerTables(pool, source);
    const startedAt = Date.now();
    let sequence = 0;
    for (;;) {
      const elapsed = Date.now() - startedAt;
      if (signal?.aborted) break;
      if (count !== undefined && result.written >= count) break;
      if (durationMs !== undefined && elapsed >= durationMs) break;

      // Catch up to where the rate says we should be (by count, never ahead of schedule).
      const due = Math.floor((elapsed * ratePerSec) / 1000) + 1 - result.written;
      const remaining = count === undefined ? Infinity : count - result.written;
      const take = Math.min(due, remaining, MAX_RECORDS_PER_TICK);
      if (take <= 0) {
        await abortableSleep(Math.min(TICK_MS, Math.ceil(1000 / ratePerSec)), signal);
        continue;
      }

      const byPartition = new Map<number, { keys: string[]; payloads: string[] }>();
      for (let i = 0; i < take; i++) {
        const key = `key-${sequence % keySpace}`;
        const partition = partitionForKey(key, partitions);
        const batch = byPartition.get(partition) ?? { keys: [], payloads: [] };
        batch.keys.push(key);
        batch.payloads.push(JSON.stringify({ sequence, producedAt: new Date().toISOString() }));
        byPartition.set(partition, batch);
        sequence += 1;
      }
      await Promise.all(
        [...byPartition].map(async ([partition, batch]) => {
          const offsets = await appendBatch(pool, source, partition, batch.keys, batch.payloads);
          result.written += offsets.length;
          result.perPartition[partition] = (result.perPartition[partition] ?? 0) + offsets.length;
          result.lastOffset[partition] = Math.max(result.lastOffset[partition] ?? -1, ...offsets);
        }),
      );
      await abortableSleep(TICK_MS, signal);
    }
    return result;
  } finally {
    await pool.end().catch(() => {});
  }
}

function parseArgs(argv: string[]): Record<string, string> {
  const args: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!match) throw new Error(`unexpected argument ${argv[i]}`);
    args[match[1]] = match[2] ?? argv[++i] ?? '';
  }
  return args;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const databaseUrl = args.db ?? process.env.DATABASE_URL;
  if (!databaseUrl || !args.source) {
    throw new Error('usage: loadgen --db URL --source TABLE [--partitions 8] [--rate 200] [--count N | --duration-ms MS] [--keys 1024]');
  }
  const optionalNumber = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  process.once('SIGTERM', () => controller.abort());
  const result = await runLoad({
    databaseUrl,
    source: args.source,
    partitions: Number(args.partitions ?? 8),
    ratePerSec: Number(args.rate ?? 200),
    count: optionalNumber(args.count),
    durationMs: optionalNumber(args['duration-ms'] ?? args.duration),
    keySpace: optionalNumber(args.keys),
    signal: controller.signal,
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
