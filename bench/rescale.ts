// bench/rescale: `npm run bench:rescale` (tsx bench/rescale.ts [ratePerSec]) prints one JSON object.
//
// The same stream job (source 2 → keyed-aggregate 2 → sink 1, checkpoints every 500 ms) under the
// same steady load, on a real stack (Temporal dev server, PostgreSQL, API, worker, 3 agent
// processes), rescaled 2 → 4 twice: once hot at a checkpoint barrier (rescaleOperator), once by
// the stop-the-world replan (the fallback), with a hot 4 → 2 in between to get back. For each:
//   - the output stall: the longest gap between sink commits (completed checkpoints) from the
//     operation's start until 3 s after its end;
//   - the worst end-to-end record latency: over the checkpoints completed in that window, commit
//     time minus the append time of the oldest record that commit made visible;
//   - records re-read by sources: hot, the sources' recordsRead beyond the records offered (0 when
//     nothing rewinds); stop-the-world, what the stopped sources had read beyond the checkpoint
//     the new generation restored from.
// The reference is the same job's steady state in the same run: the commit gap and the worst
// latency in the 5 s before the first operation. Ratios: stop-the-world ÷ hot, and each ÷ steady.
// Exactly-once is audited at the end (every key's count against its source rows).
import os from 'node:os';
import { STREAM_CHECKPOINTS_TABLE, STREAM_SNAPSHOTS_TABLE } from '../protocol/stream-tables';
import { auditStreamCheckpoint, auditStreamSink } from '../store/sink-audit';
import { runLoad } from '../store/source-feed';
import { createStreamJobStore } from '../store/stream-jobs';
import { startStack, type Stack } from '../test/support/stack';
import { startSharedServers } from '../test/support/shared-servers';
import { defineWorkload, tasksOf } from '../test/support/workloads';
import type { RescaleStatus } from '../workflows/rescale-operator';
import { stopTheWorldReplan, type StreamReplanOutcome } from '../workflows/stop-the-world-replan';

const JOB = 'bench-rescale';
const TABLES = { source: 'bench_rescale_in', sink: 'bench_rescale_out' };
const PARTITIONS = 4;
const INTERVAL_MS = 500;
const TAIL_MS = 3_000;
const round = (value: number) => Math.round(value);

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
         from ${STREAM_CHECKPOINTS_TABLE} where job = $1 and state = 'completed'),
     offsets as (
       select s.checkpoint, (o).key::int as partition, (o).value::bigint as "offset"
         from ${STREAM_SNAPSHOTS_TABLE} s, jsonb_each_text(s.state->'offsets') o
        where s.job = $1 and s.kind = 'source'
          and exists (select 1 from done d where d.id = s.checkpoint and d.generation = s.generation))
     select d.id, d.generation, d.completed_at,
            (select extract(epoch from d.completed_at - min(r.appended_at)) * 1000
               from ${TABLES.source} r
               join offsets cur on cur.checkpoint = d.id and cur.partition = r.partition and r."offset" <= cur."offset"
               left join offsets prev on prev.checkpoint = d.previous and prev.partition = r.partition
              where r."offset" > coalesce(prev."offset", -1)) as worst_ms
       from done d where d.id > $2 order by d.id`,
    [JOB, after],
  );
  return rows.map((r) => ({ id: Number(r.id), completedAt: r.completed_at.getTime(), worstLatencyMs: r.worst_ms === null ? null : Number(r.worst_ms) }));
}

/** The longest gap between consecutive commits in [from, to], counting from `from` to the first commit. */
function stall(list: Commit[], from: number, to: number): { longestGapMs: number; worstLatencyMs: number; commits: number } {
  const inWindow = list.filter((c) => c.completedAt >= from && c.completedAt <= to);
  let previous = from;
  let longest = 0;
  for (const commit of inWindow) {
    longest = Math.max(longest, commit.completedAt - previous);
    previous = commit.completedAt;
  }
  const worst = Math.max(0, ...inWindow.map((c) => c.worstLatencyMs ?? 0));
  return { longestGapMs: round(longest), worstLatencyMs: round(worst), commits: inWindow.length };
}

async function main() {
  const ratePerSec = Number(process.argv[2] ?? 2_000);
  const servers = await startSharedServers({ prefix: 'scalegate-bench-rescale' });
  const stack = await startStack({ leaseTtlMs: 5000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `bench-${zone}`, labels: { zone }, slots: 8 })) });
  const controller = new AbortController();
  let loading: Promise<unknown> = Promise.resolve();
  try {
    await defineWorkload(stack, JOB, {
      kind: 'stream', contract: { ownership: 'partitioned', partitions: PARTITIONS, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
      spec: {
        ...TABLES, partitions: PARTITIONS, checkpointIntervalMs: INTERVAL_MS, maxParallelism: 128,
        operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
      },
    }, 5);
    // Commits are sampled as they happen (their snapshots are pruned later).
    const seen = new Map<number, Commit>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const commit of await commitsAfter(stack, Math.max(0, ...seen.keys()))) seen.set(commit.id, commit);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    loading = runLoad({ databaseUrl: stack.databaseUrl, source: TABLES.source, partitions: PARTITIONS, ratePerSec, durationMs: 600_000, keySpace: 1000, signal: controller.signal });
    const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const steadyFrom = Date.now() + 2_000;
    await settle(7_000);
    const steadyTo = Date.now();

    const rescale = async (parallelism: number) => {
      const started = await stack.api('POST', `/v1/jobs/${JOB}/operators/agg/rescale`, { body: { parallelism } });
      if (started.status !== 202) throw new Error(`rescale: ${started.status} ${JSON.stringify(started.body)}`);
      const status = (await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result()) as RescaleStatus;
      if (status.outcome !== 'completed' || !status.hot) throw new Error(`the hot rescale ended ${status.outcome}: ${status.reason ?? status.error}`);
      return status;
    };

    // hot 2 → 4
    const readBefore = (await tasksOf(stack, JOB)).filter((t) => t.counts.subtask < 2);
    const hotStart = Date.now();
    const hot = await rescale(4);
    const hotEnd = Date.now();
    await settle(TAIL_MS);
    const hotSources = (await tasksOf(stack, JOB)).filter((t) => readBefore.some((b) => b.taskId === t.taskId));
    if (hotSources.length !== 2 || hotSources.some((t) => !readBefore.some((b) => b.incarnation === t.incarnation))) throw new Error('a source restarted during the hot rescale');
    // The job started empty, so these sources started at position 0: what they read beyond their position, they read twice.
    const hotReread = hotSources.reduce((n, t) => n + t.counts.recordsRead - t.counts.readPosition, 0);

    // back to 2, hot (not measured), then stop-the-world 2 → 4
    await rescale(2);
    await settle(3_000);
    const stwStart = Date.now();
    const replanned = (await stack.temporal.workflow.execute(stopTheWorldReplan, {
      taskQueue: stack.taskQueue, workflowId: `replan:${JOB}`, args: [{ workload: JOB, parallelism: { agg: 4 }, reason: 'bench: stop-the-world 2 → 4' }],
    })) as StreamReplanOutcome;
    const stwEnd = Date.now();
    const coveredAtRestore = await createStreamJobStore(stack.db).recordsCoveredBy(JOB, TABLES.source, replanned.restoredFrom ?? 0);
    await settle(TAIL_MS);

    controller.abort();
    await loading;
    const written = (await stack.db.query<{ n: number }>(`select count(*)::int as n from ${TABLES.source}`)).rows[0].n;
    await stack.waitFor('the job caught up with the load', async () => (await auditStreamCheckpoint(stack.db, { job: JOB, ...TABLES })).coveredSourceRows === written, 120_000);
    const audit = await auditStreamSink(stack.db, TABLES);

    sampling = false;
    await sampler;
    const list = [...seen.values()].sort((a, b) => a.id - b.id);
    const steady = stall(list, steadyFrom, steadyTo);
    const hotWindow = stall(list, hotStart, hotEnd + TAIL_MS);
    const stwWindow = stall(list, stwStart, stwEnd + TAIL_MS);
    const result = {
      bench: 'rescale', node: process.version, cpus: os.cpus().length, ratePerSec, checkpointIntervalMs: INTERVAL_MS, recordsWritten: written,
      exactlyOnce: audit.exact,
      steady: { ...steady, what: 'the 5 s before the first operation: the reference' },
      hot: { ...hotWindow, durationMs: hotEnd - hotStart, cutoverCheckpoint: hot.checkpoint, recordsReread: hotReread },
      stopTheWorld: {
        ...stwWindow, durationMs: stwEnd - stwStart, restoredFrom: replanned.restoredFrom,
        recordsReread: replanned.recordsReadBeforeStop - coveredAtRestore,
      },
      ratios: {
        stallStopTheWorldToHot: +(stwWindow.longestGapMs / Math.max(1, hotWindow.longestGapMs)).toFixed(2),
        worstLatencyStopTheWorldToHot: +(stwWindow.worstLatencyMs / Math.max(1, hotWindow.worstLatencyMs)).toFixed(2),
        hotStallToSteadyGap: +(hotWindow.longestGapMs / Math.max(1, steady.longestGapMs)).toFixed(2),
        stopTheWorldStallToSteadyGap: +(stwWindow.longestGapMs / Math.max(1, steady.longestGapMs)).toFixed(2),
      },
      note: 'longestGapMs: longest time without a sink commit in the window (from the operation start to 3 s after its end); worstLatencyMs: commit time minus append time of the oldest record a commit in the window made visible; recordsReread: source reads of records already read (hot: the sources never rewound; stop-the-world: read by the stopped sources after the checkpoint the job restored from)',
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (!audit.exact) process.exitCode = 1;
  } finally {
    controller.abort();
    await loading.catch(() => undefined);
    await stack.stop();
    await servers.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
