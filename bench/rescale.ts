// bench/rescale: `npm run bench:rescale` (tsx bench/rescale.ts [ratePerSec] [keys,keys,...]) prints one
// JSON object: one case per key count (default 1,000, 100,000 and 1,000,000 keys).
//
// Each case runs on a stack of its own (API, worker, 3 agent processes, a database of its own; the
// Temporal dev server and PostgreSQL are shared and idle between cases), so one case's job never
// runs beside another's. Its state is built first: `keys` source rows with distinct keys are
// bulk-inserted, the job (source 2 → keyed-aggregate 2 → sink 1, checkpoints every 500 ms) is
// defined and consumes them, and a completed checkpoint covers them all. Then the steady load
// starts (over 1,000 of those keys) and runs through every operation; the job is rescaled 2 → 4
// hot at a checkpoint barrier (rescaleOperator), back 4 → 2 hot (not measured), then 2 → 4 by the
// stop-the-world replan (the fallback). For each of the two measured operations:
//   - the output stall: the longest gap between sink commits (completed checkpoints) from the
//     operation's start until 3 s after its end, and which checkpoint ended it;
//   - the worst end-to-end record latency: over the checkpoints completed in that window, commit
//     time minus the append time of the oldest record that commit made visible;
//   - records re-read by sources: hot, the sources' recordsRead beyond the records offered (0 when
//     nothing rewinds); stop-the-world, what the stopped sources had read beyond the checkpoint
//     the new generation restored from;
//   - where the time went: each activity of the operation's workflow (from its history), and the
//     new aggregate subtasks' restore time and the keys they loaded (restoreMs, keysLoaded).
// The reference is the same job's steady state in the same case: the commit gap and the worst
// latency in the 5 s before the first operation, and how long the aggregates' snapshots held their
// barrier meanwhile. State size: the keys, the keyed state as stored, and what the aggregates wrote
// for one checkpoint. Exactly-once is audited at the end of each case (every key's count against
// its source rows).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { STREAM_CHECKPOINTS_TABLE, STREAM_KEYED_STATE_TABLE, STREAM_SNAPSHOTS_TABLE } from '../protocol/stream-tables';
import { quoteIdentifier } from '../protocol/consumer-tables';
import { auditStreamCheckpoint, auditStreamSink } from '../store/sink-audit';
import { createSourceFeed, runLoad } from '../store/source-feed';
import { createStreamJobStore } from '../store/stream-jobs';
import { startStack, type Stack } from '../harness/stack';
import { startSharedServers } from '../harness/shared-servers';
import { defineWorkload, tasksOf } from '../harness/workloads';
import type { RescaleStatus } from '../workflows/rescale-operator';
import { eventMillis } from './support/history';
import { stopTheWorldReplan, type StreamReplanOutcome } from '../workflows/stop-the-world-replan';
import { messageOf } from '../lib/errors';
import { setTimeout as sleep } from 'node:timers/promises';

const JOB = 'bench-rescale';
const TABLES = { source: 'bench_rescale_in', sink: 'bench_rescale_out' };
const PARTITIONS = 4;
const INTERVAL_MS = 500;
const TAIL_MS = 3_000;
const STEADY_KEYS = 1_000;
const DEFAULT_KEY_COUNTS = [1_000, 100_000, 1_000_000];
const round = (value: number) => Math.round(value);
const ratio = (value: number, reference: number) => +(value / Math.max(1, reference)).toFixed(2);

interface Commit {
  id: number;
  completedAt: number;
  /** commit time minus the oldest append time among the records this commit made visible (null: none) */
  worstLatencyMs: number | null;
}

/**
 * The completed checkpoints above `after`, with the worst latency of the records each made visible.
 * Read while their source snapshots are still kept (the job keeps the last 20 checkpoints').
 */
async function commitsAfter(stack: Stack, after: number): Promise<Commit[]> {
  const { rows } = await stack.db.query<{ id: string; generation: number; completed_at: Date; worst_ms: number | null }>(
    `with done as (
       select id, generation, completed_at, lag(id) over (order by id) as previous
         from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and state = 'completed' and id >= $2),
     offsets as (
       select s.checkpoint, (o).key::int as partition, (o).value::bigint as "offset"
         from ${STREAM_SNAPSHOTS_TABLE} s, jsonb_each_text(s.state->'offsets') o
        where s.job = $1 and s.kind = 'source'
          and exists (select 1 from done d where d.id = s.checkpoint and d.generation = s.generation))
     select d.id, d.generation, d.completed_at,
            (select extract(epoch from d.completed_at - min(first.appended_at)) * 1000
               from offsets cur
               left join offsets prev on prev.checkpoint = d.previous and prev.partition = cur.partition
              -- both bounds in the index condition: the rows this commit added, not every row below it (1M at 1M keys)
              cross join lateral (
                select min(r.appended_at) as appended_at from ${TABLES.source} r
                 where r.partition = cur.partition and r."offset" > coalesce(prev."offset", -1) and r."offset" <= cur."offset") first
              where cur.checkpoint = d.id) as worst_ms
       from done d where d.id > $2 order by d.id`,
    [JOB, after],
  );
  return rows.map((r) => ({ id: Number(r.id), completedAt: r.completed_at.getTime(), worstLatencyMs: r.worst_ms === null ? null : Number(r.worst_ms) }));
}

/**
 * The longest time without a commit in [from, to]: between consecutive commits, from `from` to the
 * first and from the last to `to` (a stall still running when the window closes counts so far).
 */
function stall(list: Commit[], from: number, to: number) {
  const inWindow = list.filter((c) => c.completedAt >= from && c.completedAt <= to);
  let previous = from;
  let longest = 0;
  let endedBy: number | null = null;
  const gaps: number[] = [];
  for (const commit of inWindow) {
    const gap = commit.completedAt - previous;
    if (previous !== from) gaps.push(gap);
    if (gap > longest) {
      longest = gap;
      endedBy = commit.id;
    }
    previous = commit.completedAt;
  }
  if (to - previous > longest) {
    longest = to - previous;
    endedBy = null;
  }
  gaps.sort((a, b) => a - b);
  const worst = Math.max(0, ...inWindow.map((c) => c.worstLatencyMs ?? 0));
  return {
    longestGapMs: round(longest), medianGapMs: gaps.length ? round(gaps[Math.floor(gaps.length / 2)]) : null,
    worstLatencyMs: round(worst), commits: inWindow.length,
    /** the commit that ended the longest gap (null: the window closed on it) */
    longestGapEndedByCheckpoint: endedBy,
    /** each commit in the window: [checkpoint, ms after the window opened] */
    commitsAtMs: inWindow.map((c) => [c.id, c.completedAt - from]),
  };
}

/** Each activity of a finished workflow, in order: when it was scheduled (ms after `origin`) and how long it took to complete. */
async function activityTimeline(stack: Stack, workflowId: string, runId: string | undefined, origin: number) {
  const history = await stack.temporal.workflow.getHandle(workflowId, runId).fetchHistory();
  const scheduled = new Map<string, { activity: string; at: number }>();
  const timeline: { activity: string; atMs: number; ms: number }[] = [];
  for (const event of history.events ?? []) {
    const at = eventMillis(event);
    const attributes = event.activityTaskScheduledEventAttributes;
    if (attributes) scheduled.set(String(event.eventId), { activity: attributes.activityType?.name ?? '?', at });
    const done = event.activityTaskCompletedEventAttributes;
    const started = done ? scheduled.get(String(done.scheduledEventId)) : undefined;
    if (started) timeline.push({ activity: started.activity, atMs: started.at - origin, ms: at - started.at });
  }
  return timeline;
}

/**
 * What the aggregates wrote for one checkpoint: their snapshot marks (as JSON text) and a keyed
 * state row per key they changed (the marks count them; the rows themselves are compacted away
 * once a later checkpoint writes their keys again), at the keyed state's average row size.
 */
async function aggregateCheckpointWrites(stack: Stack, checkpoint: number) {
  const { rows } = await stack.db.query<{ snapshots: number; json_bytes: string; changed_keys: string; row_bytes: string | null }>(
    `select count(*)::int as snapshots, coalesce(sum(octet_length(state::text)), 0) as json_bytes,
            coalesce(sum((state ->> 'changedKeys')::bigint), 0) as changed_keys,
            (select avg(pg_column_size(k.*)) from ${STREAM_KEYED_STATE_TABLE} k where k.job = $1) as row_bytes
       from ${STREAM_SNAPSHOTS_TABLE} where job = $1 and checkpoint = $2 and kind = 'keyed-aggregate'`,
    [JOB, checkpoint],
  );
  const row = rows[0];
  const changedKeys = Number(row.changed_keys);
  return { checkpoint, snapshots: row.snapshots, changedKeys, bytes: Number(row.json_bytes) + round(changedKeys * Number(row.row_bytes ?? 0)) };
}

/** The keyed state as stored: its rows (a key's newest completed count, and any newer) and the table's bytes, indexes included. */
async function keyedStateSize(stack: Stack) {
  const { rows } = await stack.db.query<{ rows: string; bytes: string }>(
    `select (select count(*) from ${STREAM_KEYED_STATE_TABLE} where job = $1) as rows, pg_total_relation_size('${STREAM_KEYED_STATE_TABLE}') as bytes`,
    [JOB],
  );
  return { rows: Number(rows[0].rows), bytes: Number(rows[0].bytes) };
}

/** The bytes every stream bookkeeping table of the job's database takes now (tables, indexes, TOAST). */
async function bookkeepingBytes(stack: Stack): Promise<Record<string, number>> {
  const { rows } = await stack.db.query<{ name: string; bytes: string }>(
    `select c.relname as name, pg_total_relation_size(c.oid) as bytes from pg_class c
      where c.relkind = 'r' and c.relname like 'scalegate_stream_%' order by 1`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.bytes)]));
}

const aggregatesOf = (tasks: any[]) => tasks.filter((t) => t.counts.stateKeys !== undefined);
const aggregateCounters = (t: any) => ({ restoreMs: t.counts.restoreMs, keysLoaded: t.counts.keysLoaded, stateKeys: t.counts.stateKeys, snapshotMs: t.counts.snapshotMs });

/** A case that failed: why, the job's replans (their reasons) and where the stack's last log lines are. */
async function failureOf(stack: Stack, keys: number, error: unknown) {
  const logFile = path.join(os.tmpdir(), `bench-rescale-${keys}-${Date.now()}.log`);
  fs.writeFileSync(logFile, `${stack.logs.join('\n')}\n`);
  const ledger = await stack.api('GET', `/v1/ledger?workload=${JOB}&limit=20`, { role: 'viewer' }).catch(() => null);
  const events = (ledger?.body?.events ?? []) as { kind: string; outcome: string; reason: string; inputs: { why?: string } }[];
  return { failed: messageOf(error), logFile, ledger: events.map((e) => ({ kind: e.kind, outcome: e.outcome, reason: e.reason, why: e.inputs?.why })) };
}

const progress = (keys: number, what: string) => process.stderr.write(`bench:rescale: ${keys} keys: ${what} (${new Date().toISOString()})\n`);

async function runCase(keys: number, ratePerSec: number) {
  const stack = await startStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `bench-${zone}`, labels: { zone }, slots: 8 })) });
  try {
    return await measureCase(stack, keys, ratePerSec);
  } catch (error) {
    return { keys, ...(await failureOf(stack, keys, error)) };
  } finally {
    await stack.stop();
  }
}

async function measureCase(stack: Stack, keys: number, ratePerSec: number) {
  const controller = new AbortController();
  let loading: Promise<unknown> = Promise.resolve();
  let sampling = false;
  let sampler: Promise<void> = Promise.resolve();
  try {
    // The state: one source row per key, spread over the partitions, consumed before the load starts.
    const insertStarted = Date.now();
    await createSourceFeed(stack.db).ensureTables(TABLES.source);
    await stack.db.query(
      `insert into ${quoteIdentifier(TABLES.source)} (partition, "offset", key)
       select i % $2, i / $2, 'key-' || i from generate_series(0, $1::int - 1) i`,
      [keys, PARTITIONS],
    );
    const insertMs = Date.now() - insertStarted;
    progress(keys, `state rows inserted in ${insertMs} ms`);
    const lastOffsets = Object.fromEntries(Array.from({ length: PARTITIONS }, (_, p) => [String(p), Math.floor((keys - 1 - p) / PARTITIONS)]));
    const catchUpStarted = Date.now();
    await defineWorkload(stack, JOB, {
      kind: 'stream', contract: { ownership: 'partitioned', partitions: PARTITIONS, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
      spec: {
        ...TABLES, partitions: PARTITIONS, checkpointIntervalMs: INTERVAL_MS, maxParallelism: 128,
        operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
      },
    }, 5);
    const jobs = createStreamJobStore(stack.db);
    const built = await stack.waitFor(`a completed checkpoint covering the ${keys} state rows`, async () => {
      const last = await jobs.lastCompletedCheckpoint(JOB);
      if (!last) return null;
      const offsets = await jobs.sourceOffsetsAt(JOB, last.id);
      return Object.entries(lastOffsets).every(([p, offset]) => (offsets[p] ?? -1) >= offset) ? last : null;
    }, { timeoutMs: 30 * 60_000, intervalMs: 500 });
    const catchUpMs = Date.now() - catchUpStarted;
    progress(keys, `checkpoint ${built.id} covers the state, after ${catchUpMs} ms`);

    // Commits are sampled as they happen (their snapshots are pruned later).
    const seen = new Map<number, Commit>();
    sampling = true;
    sampler = (async () => {
      while (sampling) {
        for (const commit of await commitsAfter(stack, Math.max(built.id, ...seen.keys()))) seen.set(commit.id, commit);
        await sleep(200);
      }
    })();
    loading = runLoad({ databaseUrl: stack.databaseUrl, source: TABLES.source, partitions: PARTITIONS, ratePerSec, durationMs: 3_600_000, keySpace: STEADY_KEYS, signal: controller.signal });
    const steadyFrom = Date.now() + 2_000;
    // The aggregates' snapshot time on the barrier path, sampled through the steady window.
    const steadySnapshotMs: number[] = [];
    while (Date.now() < steadyFrom + 5_000) {
      await sleep(250);
      if (Date.now() >= steadyFrom) for (const t of aggregatesOf(await tasksOf(stack, JOB))) steadySnapshotMs.push(t.counts.snapshotMs);
    }
    const steadyTo = Date.now();
    const steadyCheckpoint = (await jobs.lastCompletedCheckpoint(JOB))!.id;
    const [steadyWrites, keyedState] = await Promise.all([aggregateCheckpointWrites(stack, steadyCheckpoint), keyedStateSize(stack)]);

    const rescale = async (parallelism: number) => {
      const started = await stack.api('POST', `/v1/jobs/${JOB}/operators/agg/rescale`, { body: { parallelism } });
      if (started.status !== 202) throw new Error(`rescale: ${started.status} ${JSON.stringify(started.body)}`);
      const status = (await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result()) as RescaleStatus;
      if (status.outcome !== 'completed' || !status.hot) throw new Error(`the hot rescale ended ${status.outcome}: ${status.reason ?? status.error}`);
      return { status, workflowId: started.body.workflowId as string, runId: started.body.runId as string };
    };

    progress(keys, 'steady window measured; hot 2 → 4');
    const readBefore = (await tasksOf(stack, JOB)).filter((t) => t.counts.subtask < 2);
    const hotStart = Date.now();
    const hot = await rescale(4);
    const hotEnd = Date.now();
    await sleep(TAIL_MS);
    const afterHot = await tasksOf(stack, JOB);
    const hotSources = afterHot.filter((t) => readBefore.some((b) => b.taskId === t.taskId));
    if (hotSources.length !== 2 || hotSources.some((t) => !readBefore.some((b) => b.incarnation === t.incarnation))) throw new Error('a source restarted during the hot rescale');
    // The job started empty, so these sources started at position 0: what they read beyond their position, they read twice.
    const hotReread = hotSources.reduce((n, t) => n + t.counts.recordsRead - t.counts.readPosition, 0);
    const hotAggregates = aggregatesOf(afterHot).filter((t) => hot.status.added.includes(t.taskId));
    const hotTimeline = await activityTimeline(stack, hot.workflowId, hot.runId, hotStart);

    // back to 2, hot (not measured), then stop-the-world 2 → 4
    await rescale(2);
    await sleep(3_000);
    progress(keys, 'stop-the-world 2 → 4');
    const stwStart = Date.now();
    const replanHandle = await stack.temporal.workflow.start(stopTheWorldReplan, {
      taskQueue: stack.taskQueue, workflowId: `replan:${JOB}`, args: [{ workload: JOB, parallelism: { agg: 4 }, reason: 'bench: stop-the-world 2 → 4' }],
    });
    const replanned = (await replanHandle.result()) as StreamReplanOutcome;
    const stwEnd = Date.now();
    const coveredAtRestore = await jobs.recordsCoveredBy(JOB, TABLES.source, replanned.restoredFrom ?? 0);
    await sleep(TAIL_MS);
    const stwAggregates = aggregatesOf(await tasksOf(stack, JOB));
    const stwTimeline = await activityTimeline(stack, replanHandle.workflowId, replanHandle.firstExecutionRunId, stwStart);

    controller.abort();
    await loading;
    const written = (await stack.db.query<{ n: number }>(`select count(*)::int as n from ${TABLES.source}`)).rows[0].n;
    await stack.waitFor('the job caught up with the load', async () => (await auditStreamCheckpoint(stack.db, { job: JOB, ...TABLES })).coveredSourceRows === written, { timeoutMs: 300_000, intervalMs: 1_000 });
    const audit = await auditStreamSink(stack.db, TABLES);

    sampling = false;
    await sampler;
    const list = [...seen.values()].sort((a, b) => a.id - b.id);
    const steady = stall(list, steadyFrom, steadyTo);
    const hotWindow = stall(list, hotStart, hotEnd + TAIL_MS);
    const stwWindow = stall(list, stwStart, stwEnd + TAIL_MS);
    return {
      keys, recordsWritten: written,
      exactlyOnce: { exact: audit.exact, keys: audit.keys, sourceRows: audit.sourceRows, sinkTotal: audit.sinkTotal, mismatchedKeys: audit.mismatchedKeys, extraKeys: audit.extraKeys },
      state: {
        keys: audit.keys, insertMs, catchUpMs, catchUpRecordsPerSec: round((keys * 1000) / Math.max(1, catchUpMs)),
        keyedStateAtSteady: keyedState, bookkeepingBytesAtEnd: await bookkeepingBytes(stack),
      },
      steady: {
        ...steady, aggregateSnapshotMs: { max: Math.max(0, ...steadySnapshotMs), samples: steadySnapshotMs.length },
        aggregateWritesPerCheckpoint: steadyWrites, what: 'the 5 s before the first operation: the reference',
      },
      hot: {
        ...hotWindow, durationMs: hotEnd - hotStart, cutoverCheckpoint: hot.status.checkpoint, recordsReread: hotReread,
        newAggregates: hotAggregates.map(aggregateCounters),
        activities: hotTimeline,
      },
      stopTheWorld: {
        ...stwWindow, durationMs: stwEnd - stwStart, restoredFrom: replanned.restoredFrom,
        recordsReread: replanned.recordsReadBeforeStop - coveredAtRestore,
        newAggregates: stwAggregates.map(aggregateCounters),
        activities: stwTimeline,
      },
      ratios: {
        hotStallToSteadyGap: ratio(hotWindow.longestGapMs, steady.longestGapMs),
        stopTheWorldStallToSteadyGap: ratio(stwWindow.longestGapMs, steady.longestGapMs),
        stallStopTheWorldToHot: ratio(stwWindow.longestGapMs, hotWindow.longestGapMs),
        worstLatencyStopTheWorldToHot: ratio(stwWindow.worstLatencyMs, hotWindow.worstLatencyMs),
      },
    };
  } finally {
    controller.abort();
    await loading.catch(() => undefined);
    sampling = false;
    await sampler.catch(() => undefined);
  }
}

async function main() {
  const ratePerSec = Number(process.argv[2] ?? 2_000);
  const keyCounts = (process.argv[3] ?? DEFAULT_KEY_COUNTS.join(',')).split(',').map(Number);
  if (keyCounts.some((n) => !Number.isInteger(n) || n < STEADY_KEYS)) throw new Error(`key counts must be integers ≥ ${STEADY_KEYS} (the steady load's keys are among them), got ${process.argv[3]}`);
  const servers = await startSharedServers({ prefix: 'scalegate-bench-rescale' });
  const cases: unknown[] = [];
  try {
    for (const keys of keyCounts) {
      const started = Date.now();
      // A case that cannot run here (memory, time) is reported as such; the next one still runs.
      cases.push(await runCase(keys, ratePerSec).then(
        (result) => ({ ...result, caseMs: Date.now() - started }),
        (error: unknown) => ({ keys, failed: messageOf(error), caseMs: Date.now() - started }),
      ));
      progress(keys, `done in ${Math.round((Date.now() - started) / 1000)} s`);
    }
  } finally {
    await servers.stop();
  }
  const result = {
    bench: 'rescale', node: process.version, cpus: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), ratePerSec, checkpointIntervalMs: INTERVAL_MS,
    cases,
    note: 'per case, one stack of its own. longestGapMs: longest time without a sink commit in the window (steady: its 5 s; an operation: from its start to 3 s after its end); worstLatencyMs: commit time minus append time of the oldest record a commit in the window made visible; recordsReread: source reads of records already read (hot: the sources never rewound; stop-the-world: read by the stopped sources after the checkpoint the job restored from); activities: the workflow\'s activities, scheduled atMs after the operation started, each taking ms; newAggregates.restoreMs: how long each new aggregate subtask took to load its state',
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  if (cases.some((c) => (c as { exactlyOnce?: { exact: boolean } }).exactlyOnce?.exact !== true)) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
