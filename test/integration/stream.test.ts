// The stream runtime on the real stack (DESIGN.md §5 "stream", issue 14): a keyed job across three
// agents with records over TCP, checkpoints in PostgreSQL and a two-phase-commit sink; exactly-once
// is proved by counting every key against its source rows, under load, through a stop-the-world
// replan, a SIGKILLed agent and a proportional scale.
import { runLoad } from '../../store/source-feed';
import { auditStreamCheckpoint, auditStreamSink } from '../../store/sink-audit';
import { createStreamJobStore } from '../../store/stream-jobs';
import { STREAM_CHECKPOINTS_TABLE } from '../../protocol/stream-tables';
import { STREAM_APPLICATION_NAME } from '../../agent/drivers/stream';
import { stopTheWorldReplan, type StreamReplanOutcome } from '../../workflows/stop-the-world-replan';
import { handleSubtaskFailures, subtasksFailedSignal } from '../../workflows/subtask-failures';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, tasksOf } from '../../harness/workloads';
import { setTimeout as sleep } from 'node:timers/promises';

const AGENTS = ['st-a', 'st-b', 'st-c'];
const STREAM_CONTRACT = { ownership: 'partitioned', state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' };
const PARTITIONS = 4;

const jobDefinition = (tables: Tables, parallelism: { src: number; agg: number; out: number }, checkpointIntervalMs = 500) => ({
  kind: 'stream', selector: {}, contract: { ...STREAM_CONTRACT, partitions: PARTITIONS },
  spec: {
    ...tables, partitions: PARTITIONS, checkpointIntervalMs, maxParallelism: 64,
    operators: [
      { id: 'src', kind: 'source', parallelism: parallelism.src },
      { id: 'agg', kind: 'keyed-aggregate', parallelism: parallelism.agg },
      { id: 'out', kind: 'sink', parallelism: parallelism.out },
    ],
  },
});
type Tables = { source: string; sink: string };

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, agents: AGENTS.map((id) => ({ id, slots: 8 })) });
});
afterAll(async () => {
  await stack?.stop();
});

const written = async (tables: Tables) => (await stack.db.query<{ n: number }>(`select count(*)::int as n from ${tables.source}`)).rows[0].n;

/** Waits until a checkpoint completed after every record written so far (the sink then holds them all). */
async function awaitCheckpointCovering(job: string, tables: Tables) {
  const total = await written(tables);
  let last: unknown = null;
  return stack.waitFor(`a completed checkpoint of ${job} covering all ${total} records`, async () => {
    const audit = await auditStreamCheckpoint(stack.db, { job, ...tables });
    last = audit;
    return audit.coveredSourceRows === total ? audit : null;
  }, { timeoutMs: 90_000, context: () => `last audit: ${JSON.stringify(last)}` });
}

/** The job's subtasks as the agents run them, all ready, in the given generation (or any). */
async function readySubtasks(job: string, count: number, generation?: number) {
  return stack.waitFor(`${count} ready subtasks of ${job}${generation ? ` in generation ${generation}` : ''}`, async () => {
    const tasks = (await tasksOf(stack, job)).filter((t) => t.state === 'ready' && (generation === undefined || t.generation === generation));
    return tasks.length === count ? tasks : null;
  }, 90_000);
}

const sum = (tasks: any[], counter: string) => tasks.reduce((total, t) => total + t.counts[counter], 0);

describe('a keyed job: source 2, aggregate 2, sink 1 across three agents', () => {
  const job = 'clicks';
  const tables = { source: 'clicks_in', sink: 'clicks_out' };

  test('after 20,000 records and a completed checkpoint, every key counts its source rows exactly', async () => {
    const ready = await defineWorkload(stack, job, jobDefinition(tables, { src: 2, agg: 2, out: 1 }), 5);
    expect(ready.map((t) => t.counts.subtask).sort()).toEqual([0, 1, 2, 3, 4]);
    // The job created its source and sink tables: the load generator writes into the first.
    const load = await runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 10_000, count: 20_000, keySpace: 500 });
    expect(load.written).toBe(20_000);
    expect(await awaitCheckpointCovering(job, tables)).toMatchObject({ consistent: true, sinkTotal: 20_000, rowsAboveCheckpoint: 0 });
    expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: 20_000, sinkTotal: 20_000, keys: 500, mismatchedKeys: 0, extraKeys: 0, exact: true });
    // Every record was read once, by the two sources, and crossed the network to the aggregates.
    const running = await tasksOf(stack, job);
    expect(sum(running.filter((t) => t.counts.subtask < 2), 'recordsRead')).toBe(20_000);
    expect(sum(running.filter((t) => t.counts.subtask >= 2 && t.counts.subtask < 4), 'recordsIn')).toBe(20_000);
    // Watermarks flowed with the records, source to sink: each is an append time, and none runs ahead of its inputs.
    const newestAppend = Number((await stack.db.query(`select (extract(epoch from max(appended_at)) * 1000)::bigint as at from ${tables.source}`)).rows[0].at);
    const watermark = (subtask: number) => running.find((t) => t.counts.subtask === subtask).counts.watermark as number;
    expect(watermark(4)).toBeGreaterThan(0);
    expect(watermark(4)).toBeLessThanOrEqual(Math.min(watermark(2), watermark(3)));
    expect(Math.min(watermark(2), watermark(3))).toBeLessThanOrEqual(Math.max(watermark(0), watermark(1)));
    expect(Math.max(watermark(0), watermark(1))).toBeLessThanOrEqual(newestAppend);

    const view = (await stack.api('GET', `/v1/jobs/${job}`, { role: 'viewer' })).body;
    expect(view.operators.map((o: any) => `${o.id}:${o.parallelism}`)).toEqual(['src:2', 'agg:2', 'out:1']);
    expect(view.subtasks).toHaveLength(5);
    expect(view.subtasks[0]).toMatchObject({ operator: 'src', index: 0, incarnation: expect.any(String), recordsRead: expect.any(Number) });
    expect(view.lastCompletedCheckpoint.id).toBeGreaterThan(0);
  });

  test('the sink table never shows a count from an uncompleted checkpoint, read while checkpoints are in flight', async () => {
    const controller = new AbortController();
    const loading = runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 2_000, durationMs: 8_000, keySpace: 500, signal: controller.signal });
    const samples: Awaited<ReturnType<typeof auditStreamCheckpoint>>[] = [];
    try {
      await stack.waitFor('10 reads of the sink while a checkpoint was in flight', async () => {
        const audit = await auditStreamCheckpoint(stack.db, { job, ...tables });
        samples.push(audit);
        return samples.filter((s) => s.checkpointInFlight !== null).length >= 10;
      }, { timeoutMs: 30_000, intervalMs: 20 });
    } finally {
      controller.abort();
      await loading;
    }
    // Each read, one snapshot: the sink total is exactly the source rows the last completed checkpoint covers.
    expect(samples.filter((s) => !s.consistent)).toEqual([]);
    expect(new Set(samples.map((s) => s.checkpoint?.id)).size).toBeGreaterThan(1);
  });

  test("the checkpoint clock pauses and resumes through the agent protocol, on the job's coordinator only", async () => {
    const running = await tasksOf(stack, job);
    const coordinator = running.find((t) => t.counts.subtask === 4)!;
    const source = running.find((t) => t.counts.subtask === 0)!;
    const newestCheckpoint = async () => Number((await stack.db.query(`select coalesce(max(id), 0) as id from ${STREAM_CHECKPOINTS_TABLE} where job = $1`, [job])).rows[0].id);

    const notCoordinator = await stack.agentApi(source.runtimeId, 'POST', `/v1/tasks/${source.taskId}/checkpoint-clock`, { state: 'paused' });
    expect(notCoordinator).toMatchObject({ status: 409, body: { error: 'conflict' } });
    const paused = await stack.agentApi(coordinator.runtimeId, 'POST', `/v1/tasks/${coordinator.taskId}/checkpoint-clock`, { state: 'paused' });
    expect(paused).toMatchObject({ status: 200, body: { state: 'paused' } });
    const atPause = await stack.waitFor('the in-flight checkpoint completed', async () => {
      const audit = await auditStreamCheckpoint(stack.db, { job, ...tables });
      return audit.checkpointInFlight === null && audit.checkpoint ? audit.checkpoint.id : null;
    });
    // Six intervals pass with the clock paused: no checkpoint is triggered.
    await sleep(3_000);
    expect(await newestCheckpoint()).toBe(atPause);
    const resumed = await stack.agentApi(coordinator.runtimeId, 'POST', `/v1/tasks/${coordinator.taskId}/checkpoint-clock`, { state: 'running' });
    expect(resumed).toMatchObject({ status: 200, body: { state: 'running', lastTriggered: atPause } });
    await stack.waitFor('a checkpoint after the resume', async () => (await newestCheckpoint()) > atPause);
  });

  test("static stability: PostgreSQL dropping every subtask's connection, again and again, stops no subtask and loses nothing", async () => {
    const before = await tasksOf(stack, job);
    const errorsBefore = sum(before.map((t) => ({ counts: { errors: t.errors } })), 'errors');
    const controller = new AbortController();
    const loading = runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 2_000, durationMs: 5_000, keySpace: 500, signal: controller.signal });
    let terminated = 0;
    const errorsNow = async () => sum((await tasksOf(stack, job)).map((t) => ({ counts: { errors: t.errors } })), 'errors');
    try {
      // Until some subtask's database step was cut off mid-query (an idle connection just reconnects).
      await stack.waitFor('a subtask database step cut off by a dropped connection', async () => {
        const { rows } = await stack.db.query(
          `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = current_database() and application_name like $1`,
          [`${STREAM_APPLICATION_NAME}:%`],
        );
        terminated += rows[0].n;
        return (await errorsNow()) > errorsBefore;
      }, { timeoutMs: 30_000, intervalMs: 100 });
    } finally {
      controller.abort();
      await loading;
    }
    expect(terminated).toBeGreaterThan(0);
    await awaitCheckpointCovering(job, tables);
    const after = await tasksOf(stack, job);
    // The same incarnations, all ready: nothing restarted; their database steps failed and were retried.
    expect(after.map((t) => `${t.taskId}/${t.incarnation}/${t.state}`).sort()).toEqual(before.map((t) => `${t.taskId}/${t.incarnation}/ready`).sort());
    const total = await written(tables);
    expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: total, sinkTotal: total, mismatchedKeys: 0, exact: true });
  });

  test('a stop-the-world replan of the aggregate 2 → 3 under load: exactly-once, sources resume from the checkpoint', async () => {
    const before = await tasksOf(stack, job);
    const readBefore = sum(before.filter((t) => t.counts.subtask < 2), 'recordsRead');
    const controller = new AbortController();
    const loading = runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 2_000, durationMs: 6_000, keySpace: 500, signal: controller.signal });
    let outcome: StreamReplanOutcome;
    try {
      await sleep(1_500); // under load: records flow when the world stops
      outcome = (await stack.temporal.workflow.execute(stopTheWorldReplan, {
        taskQueue: stack.taskQueue, workflowId: `replan:${job}`, args: [{ workload: job, parallelism: { agg: 3 }, reason: 'test: aggregate 2 → 3' }],
      })) as StreamReplanOutcome;
    } finally {
      await loading;
    }
    expect(outcome.parallelism).toEqual({ from: { src: 2, agg: 2, out: 1 }, to: { src: 2, agg: 3, out: 1 } });
    expect(outcome.restoredFrom).toBeGreaterThan(0);
    const restoredOffsetsCover = await createStreamJobStore(stack.db).recordsCoveredBy(job, tables.source, outcome.restoredFrom!);

    const after = await readySubtasks(job, 6, outcome.generation);
    expect(after.every((t) => t.counts.restoredFrom === outcome.restoredFrom)).toBe(true);
    await awaitCheckpointCovering(job, tables);
    const total = await written(tables);
    expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: total, sinkTotal: total, mismatchedKeys: 0, extraKeys: 0, exact: true });
    // The new sources read exactly the records after the checkpoint: nothing before it again.
    const readAfter = sum((await tasksOf(stack, job)).filter((t) => t.counts.subtask < 2), 'recordsRead');
    expect(readAfter).toBe(total - restoredOffsetsCover);
    // The stopped sources had read at least up to the checkpoint: what they read beyond it is what the restore re-read.
    expect(outcome.recordsReadBeforeStop).toBeGreaterThanOrEqual(restoredOffsetsCover);
    expect(readBefore).toBeGreaterThan(0);

    const ledger = (await stack.api('GET', `/v1/ledger?workload=${job}&kind=replan`, { role: 'viewer' })).body;
    expect(ledger.events[0]).toMatchObject({ kind: 'replan', outcome: 'completed', inputs: { restoredFrom: outcome.restoredFrom, parallelism: outcome.parallelism } });
    // The evidence before the stop and after the converge counted nothing lost or doubled.
    expect(outcome.comparison).toMatchObject({ verdict: 'pass', conservation: { duplicates: 0, extra: 0 } });
  });

  test('reported subtask failures: the workflow replans for a current subtask, once however often reported, and ignores any other', async () => {
    const running = await readySubtasks(job, 6);
    const victim = running[0];
    const workflowId = `subtask-failures:${job}`;
    const report = (taskIds: string[]) => ({ runtimeId: victim.runtimeId, taskIds });
    // The replan of the test before made the survivors report their peers' failures, which started
    // this workflow with the route's idle window (60 s): signalWithStart would only signal that run
    // and wait out its window. This test starts its own.
    await stack.temporal.workflow.getHandle(workflowId).terminate('the test starts its own').catch(() => undefined);
    // A report naming no subtask of the current placement decides nothing.
    const stale = await stack.temporal.workflow.signalWithStart(handleSubtaskFailures, {
      taskQueue: stack.taskQueue, workflowId, args: [{ workload: job, idleMs: 500 }], signal: subtasksFailedSignal, signalArgs: [report(['no-such-subtask'])],
    });
    expect(await stale.result()).toEqual({ replans: 0 });
    // Three heartbeats' worth of the same failure: one replan, started by this workflow.
    const reported = await stack.temporal.workflow.signalWithStart(handleSubtaskFailures, {
      taskQueue: stack.taskQueue, workflowId, args: [{ workload: job, idleMs: 3_000, backoffMs: 0 }], signal: subtasksFailedSignal, signalArgs: [report([victim.taskId])],
    });
    await reported.signal(subtasksFailedSignal, report([victim.taskId]));
    const replan = await stack.waitFor('the replan it started', async () => {
      const description = await stack.temporal.workflow.getHandle(`replan:${job}`).describe().catch(() => null);
      return description?.parentExecution?.workflowId === workflowId ? description : null;
    });
    await reported.signal(subtasksFailedSignal, report([victim.taskId]));
    expect(await reported.result()).toEqual({ replans: 1 });
    const outcome = (await stack.temporal.workflow.getHandle(`replan:${job}`, replan.runId).result()) as StreamReplanOutcome;
    await readySubtasks(job, 6, outcome.generation);
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${job}&kind=replan`, { role: 'viewer' })).body;
    expect(ledger.events.filter((e: any) => e.workflowId === `replan:${job}` && e.runId === replan.runId)).toEqual([
      expect.objectContaining({ outcome: 'completed', reason: `subtask ${victim.taskId} on ${victim.runtimeId} failed` }),
    ]);
  });

  test('SIGKILL of the agent hosting an aggregate subtask: the job replans from the last completed checkpoint, exactly-once', async () => {
    const running = await tasksOf(stack, job);
    const generation = running[0].generation;
    const aggregateHost = running.find((t) => t.counts.subtask >= 2 && t.counts.subtask < 5)!.runtimeId as string;
    const controller = new AbortController();
    const loading = runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 2_000, durationMs: 6_000, keySpace: 500, signal: controller.signal });
    try {
      await sleep(1_500);
      const killedAt = Date.now();
      stack.agents[aggregateHost].process.kill('SIGKILL');
      const replanned = await stack.waitFor('the job running again in a newer generation, without the killed agent', async () => {
        const tasks = (await tasksOf(stack, job)).filter((t) => t.generation > generation);
        return tasks.length === 6 && tasks.every((t) => t.state === 'ready' && t.runtimeId !== aggregateHost) ? tasks : null;
      }, 90_000);
      expect(new Set(replanned.map((t) => t.counts.restoredFrom)).size).toBe(1);
      // The survivors' heartbeats reported the subtasks whose peer died (the route reports, a workflow decides).
      const reports = [];
      for await (const run of stack.temporal.workflow.list({ query: `WorkflowId = 'subtask-failures:${job}'` })) reports.push(run);
      expect(reports.some((run) => run.startTime.getTime() >= killedAt)).toBe(true);
    } finally {
      await loading;
    }
    await awaitCheckpointCovering(job, tables);
    const total = await written(tables);
    expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: total, sinkTotal: total, mismatchedKeys: 0, extraKeys: 0, exact: true });
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${job}&kind=replan`, { role: 'viewer' })).body;
    expect(ledger.events[0]).toMatchObject({ outcome: 'completed', reason: expect.stringMatching(/failed|lost/) });
    expect(ledger.events[0].inputs.restoredFrom).toBeGreaterThan(0);
  });
});

describe('scaling and bad input', () => {
  const job = 'views';
  const tables = { source: 'views_in', sink: 'views_out' };

  test('POST /scale on a stream job scales every operator proportionally through the replan', async () => {
    await defineWorkload(stack, job, jobDefinition(tables, { src: 1, agg: 2, out: 1 }, 300), 4);
    await runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 5_000, count: 3_000, keySpace: 100 });
    const scaled = await stack.api('POST', `/v1/workloads/${job}/scale`, { body: { replicas: 8 } });
    expect(scaled).toMatchObject({ status: 202, body: { workflowId: `replan:${job}`, kind: 'stopTheWorldReplan' } });
    const outcome = (await stack.temporal.workflow.getHandle(scaled.body.workflowId, scaled.body.runId).result()) as StreamReplanOutcome;
    expect(outcome.parallelism.to).toEqual({ src: 2, agg: 4, out: 2 });
    const definition = (await stack.api('GET', `/v1/workloads/${job}`, { role: 'viewer' })).body;
    expect(definition.spec.operators.map((o: any) => o.parallelism)).toEqual([2, 4, 2]);
    await readySubtasks(job, 8, outcome.generation);
    await runLoad({ databaseUrl: stack.databaseUrl, source: tables.source, partitions: PARTITIONS, ratePerSec: 5_000, count: 3_000, keySpace: 100 });
    await awaitCheckpointCovering(job, tables);
    expect(await auditStreamSink(stack.db, tables)).toMatchObject({ sourceRows: 6_000, sinkTotal: 6_000, exact: true });

    // A size the free slots cannot hold is refused before anything stops: the same incarnations run on.
    const incarnations = (await tasksOf(stack, job)).map((t) => t.incarnation).sort();
    const tooBig = await stack.api('POST', `/v1/workloads/${job}/scale`, { body: { replicas: 60 } });
    expect(tooBig.status).toBe(202);
    await expect(stack.temporal.workflow.getHandle(tooBig.body.workflowId, tooBig.body.runId).result()).rejects.toThrow();
    const operation = (await stack.api('GET', `/v1/operations/${encodeURIComponent(tooBig.body.workflowId)}`, { role: 'viewer' })).body;
    expect(operation.status).toBe('failed');
    expect(JSON.stringify(operation)).toMatch(/do not fit the eligible runtimes' free slots \(nothing was changed\)/);
    expect((await tasksOf(stack, job)).map((t) => t.incarnation).sort()).toEqual(incarnations);
    expect((await stack.api('GET', `/v1/workloads/${job}`, { role: 'viewer' })).body.spec.operators.map((o: any) => o.parallelism)).toEqual([2, 4, 2]);
  });

  test.each([
    ['operators not source → keyed-aggregate → sink', { operators: [{ id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'src', kind: 'source', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }] }, 'body.spec.operators'],
    ['parallelism above maxParallelism', { maxParallelism: 4, operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 5 }, { id: 'out', kind: 'sink', parallelism: 1 }] }, 'body.spec.operators.1.parallelism'],
    ['a source equal to the sink', { sink: 'bad_in' }, 'body.spec.sink'],
  ])('%s → 422 naming the field', async (_what, change, field) => {
    const definition = jobDefinition({ source: 'bad_in', sink: 'bad_out' }, { src: 1, agg: 1, out: 1 });
    const response = await stack.api('PUT', '/v1/workloads/bad', { body: { ...definition, spec: { ...definition.spec, ...change } } });
    expect(response.status).toBe(422);
    expect(response.body.issues.map((i: { path: string }) => i.path)).toContain(field);
    expect((await stack.api('GET', '/v1/workloads/bad', { role: 'viewer' })).status).toBe(404);
  });
});
