// HotRescale (issue 11, reference/hot-rescale-at-a-barrier.txt) on real agent processes under load:
// the keyed aggregate rescales 2 → 4 → 2 at a checkpoint barrier without stopping the job (no
// source re-reads, every other subtask keeps its incarnation, the sink's commits go on), nothing
// crosses the rescaled edge between barrier C and the release, a SIGKILL mid-window falls back to
// the stop-the-world replan, and a non-integer factor goes to that replan directly, saying why.
// Exactly-once is proved by counting every key against its source rows. The job holds 20,000 keys
// of state before its first rescale; a new aggregate loads only the counts of the keys it meets.
import { createSourceFeed, runLoad } from '../../store/source-feed';
import { auditStreamCheckpoint, auditStreamSink } from '../../store/sink-audit';
import { OperationStatusSchema } from '../../protocol';
import { rescaleOperator, rescaleStatusQuery, type RescaleStatus } from '../../workflows/rescale-operator';
import { runCli } from '../support/cli';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, tasksOf } from '../../harness/workloads';
import { setTimeout as sleep } from 'node:timers/promises';

const AGENTS = ['hr-a', 'hr-b', 'hr-c'];
const PARTITIONS = 4;
const JOB = 'hot';
const TABLES = { source: 'hot_in', sink: 'hot_out' };
/** distinct keys counted before any rescale; the load cycles through LOAD_KEYS others */
const STATE_KEYS = 20_000;
const LOAD_KEYS = 400;
const CONTRACT = { ownership: 'partitioned', partitions: PARTITIONS, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' };

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, agents: AGENTS.map((id) => ({ id, slots: 8 })) });
  // Keyed state far beyond what the load touches: a new aggregate must not load it all to cut over.
  await createSourceFeed(stack.db).ensureTables(TABLES.source);
  await stack.db.query(`insert into ${TABLES.source} (partition, "offset", key) select i % $2, i / $2, 'state-' || i from generate_series(0, $1::int - 1) i`, [STATE_KEYS, PARTITIONS]);
  await defineWorkload(stack, JOB, {
    kind: 'stream', selector: {}, contract: CONTRACT,
    spec: {
      ...TABLES, partitions: PARTITIONS, checkpointIntervalMs: 300, maxParallelism: 64,
      operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    },
  }, 5);
});
afterAll(async () => {
  await stack?.stop();
});

const sum = (tasks: any[], counter: string) => tasks.reduce((total, t) => total + (t.counts[counter] ?? 0), 0);
const written = async () => (await stack.db.query<{ n: number }>(`select count(*)::int as n from ${TABLES.source}`)).rows[0].n;

/** The job's subtasks as the agents run them, with their operator from GET /v1/jobs/:job. */
async function subtasks(): Promise<any[]> {
  const view = (await stack.api('GET', `/v1/jobs/${JOB}`, { role: 'viewer' })).body;
  const running = await tasksOf(stack, JOB);
  return view.subtasks.map((s: any) => ({ ...s, task: running.find((t) => t.taskId === s.taskId) }));
}

/** Waits until a completed checkpoint covers every record written so far, then audits every key. */
async function expectExactlyOnce(): Promise<number> {
  const total = await written();
  await stack.waitFor(`a completed checkpoint covering all ${total} records`, async () => {
    const audit = await auditStreamCheckpoint(stack.db, { job: JOB, ...TABLES });
    return audit.coveredSourceRows === total;
  }, 90_000);
  expect(await auditStreamSink(stack.db, TABLES)).toMatchObject({ sourceRows: total, sinkTotal: total, mismatchedKeys: 0, extraKeys: 0, exact: true });
  return total;
}

/** Runs `during` with the load generator writing, and waits for the load to end. */
async function underLoad<T>(during: () => Promise<T>, durationMs = 6_000): Promise<T> {
  const loading = runLoad({ databaseUrl: stack.databaseUrl, source: TABLES.source, partitions: PARTITIONS, ratePerSec: 2_000, durationMs, keySpace: LOAD_KEYS });
  try {
    await sleep(1_000); // records are flowing when the rescale starts
    return await during();
  } finally {
    await loading;
  }
}

async function rescaleViaApi(parallelism: number): Promise<{ status: RescaleStatus; secondRequest: { status: number; body: any } }> {
  const started = await stack.api('POST', `/v1/jobs/${JOB}/operators/agg/rescale`, { body: { parallelism } });
  expect(started).toMatchObject({ status: 202, body: { workflowId: `rescale:${JOB}`, kind: 'rescaleOperator' } });
  const secondRequest = await stack.api('POST', `/v1/jobs/${JOB}/operators/agg/rescale`, { body: { parallelism } });
  const status = (await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result()) as RescaleStatus;
  // What it answers is the protocol's status of its kind (protocol/operation-status.ts).
  expect(OperationStatusSchema.safeParse(status)).toMatchObject({ success: true, data: { kind: 'rescaleOperator' } });
  return { status, secondRequest };
}

const cli = (args: string[]) => runCli(stack, args);

describe('HotRescale', () => {
  /** records the aggregates retired by earlier cutovers took in (the sources' counters span every cutover) */
  let intoEarlierAggregates = 0;

  test.each([
    [2, 4],
    [4, 2],
  ])('aggregate %i → %i under load: exactly-once, non-stopping, nothing across the rescaled edge in the held window', async (from, to) => {
    await expectExactlyOnce();
    const before = await subtasks();
    expect(before.filter((s) => s.operator === 'agg')).toHaveLength(from);
    const outside = before.filter((s) => s.operator !== 'agg').map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort();
    const sinkBefore = before.find((s) => s.operator === 'out').task;

    const { status, secondRequest } = await underLoad(() => rescaleViaApi(to));
    // One rescale per job at a time: the second request was refused with the running workflow's id.
    expect(secondRequest).toMatchObject({ status: 409, body: { error: 'operation-in-progress', workflowId: `rescale:${JOB}` } });
    expect(status).toMatchObject({ outcome: 'completed', hot: true, phase: 'complete', from, to, compensation: null });
    expect(status.added).toHaveLength(to);
    expect(status.retired).toHaveLength(from);
    const total = await expectExactlyOnce();

    const after = await subtasks();
    const aggregates = after.filter((s) => s.operator === 'agg');
    expect(aggregates).toHaveLength(to);
    // Append-only identity: the new subtasks took fresh indices and restored from barrier C.
    expect(aggregates.every((s) => s.task.state === 'ready' && s.task.counts.restoredFrom === status.checkpoint)).toBe(true);
    // ... loading the counts of the keys the load sent them since, not the state of their key groups (about STATE_KEYS / to each).
    for (const { task } of aggregates) {
      expect(task.counts.keysLoaded).toBeLessThanOrEqual(LOAD_KEYS);
      expect(task.counts.stateKeys).toBeLessThanOrEqual(LOAD_KEYS);
    }
    expect(aggregates.map((s) => s.taskId).sort()).toEqual([...status.added].sort());
    // On release the sources re-emitted their watermark into the new channels: downstream time resumed.
    expect(aggregates.every((s) => s.task.counts.watermark > 0)).toBe(true);
    // Everything outside the aggregate kept running: same incarnations, and the sink's commits went on.
    expect(after.filter((s) => s.operator !== 'agg').map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort()).toEqual(outside);
    const sinkAfter = after.find((s) => s.operator === 'out').task;
    expect(sinkAfter.counts.commits).toBeGreaterThan(sinkBefore.counts.commits);
    expect(sinkAfter.counts.lastCheckpoint).toBeGreaterThan(status.checkpoint!);
    // No source re-read a record: every record offered was read exactly once by the running sources.
    const sources = after.filter((s) => s.operator === 'src').map((s) => s.task);
    expect(sum(sources, 'recordsRead')).toBe(total);
    expect(sources.every((s) => s.counts.cutovers >= 1)).toBe(true);
    // The held window: nothing reached the old subtasks after barrier C, and the edge conserved every record:
    // what the old subtasks took in up to C plus what the new ones took in since is what the sources emitted.
    const retired = Object.values(status.retiredCounts);
    expect(retired).toHaveLength(from);
    expect(retired.map((c) => c.receivedAfterCutover)).toEqual(retired.map(() => 0));
    const intoRetired = retired.reduce((n, c) => n + c.recordsIn, 0);
    expect(intoEarlierAggregates + intoRetired + sum(aggregates.map((s) => s.task), 'recordsIn')).toBe(sum(sources, 'recordsOut'));
    intoEarlierAggregates += intoRetired;

    const ledger = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
    expect(ledger).toMatchObject({ kind: 'rescale', outcome: 'completed', fromReplicas: from, toReplicas: to, inputs: { operator: 'agg', hot: true, checkpoint: status.checkpoint } });
  });

  test('a size the fleet has no room for (2 → 32: 35 subtasks, 24 slots) is refused, nothing changed: exit 3, the same incarnations, the clock running', async () => {
    const before = (await subtasks()).map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort();
    const run = await cli(['rescale', JOB, 'agg', '32', '--wait']);
    expect(run.code).toBe(3); // refused (failed was 1)
    expect(run.stdout).toMatch(/^refused/m);
    const operation = (await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body;
    expect(operation).toMatchObject({ kind: 'rescaleOperator', status: 'refused', result: { outcome: 'refused', phase: 'refused', hot: null, compensation: null } });
    expect(operation.result.error).toMatch(/no free slot for \d+ of the 32 new subtasks next to the running ones, and \d+ of the job's 35 subtasks at agg = 32 do not fit the eligible runtimes' free slots in a new generation either \(nothing was changed\)/);
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
    expect(ledger).toMatchObject({ outcome: 'refused', toReplicas: 32 });
    expect((await subtasks()).map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort()).toEqual(before);
    expect((await stack.api('GET', `/v1/workloads/${JOB}`, { role: 'viewer' })).body.spec.operators.map((o: any) => o.parallelism)).toEqual([2, 2, 1]);
    // the clock was never left paused: the load is checkpointed and exactly-once
    await underLoad(async () => undefined, 2_000);
    await expectExactlyOnce();
  });

  test('the autoscaler sizes the job through rescaleOperator: twice the capacity cuts over hot, bounded by the source partitions, a non-factor size replans once, nothing loops', async () => {
    const tier = 'hot-tier';
    const rescales = async () => (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale&limit=1000`, { role: 'viewer' })).body.events as any[];
    const decisions = async () => ((await stack.api('GET', '/v1/ledger?kind=autoscale&limit=50', { role: 'viewer' })).body.events as any[]).filter((r) => r.tier === tier);
    const seen = (await rescales()).length;
    const before = await subtasks();
    const from = before.filter((s) => s.operator === 'agg').length;
    expect(from).toBe(2);
    const outside = before.filter((s) => s.operator !== 'agg').map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort();
    const put = await stack.api('PUT', `/v1/tiers/${tier}/policy`, {
      body: { workloads: [JOB], minReplicas: 1, maxReplicas: 16, targets: { qpsPerInstance: 100 }, tolerance: 0.1, scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 16 },
    });
    expect(put.status).toBeLessThan(300);
    const signal = async (qps: number) => expect((await stack.api('POST', `/v1/tiers/${tier}/signals`, { body: { qps } })).status).toBe(202);
    const nextRescale = (count: number) => stack.waitFor(`rescale row ${count}`, async () => {
      const rows = await rescales();
      return rows.length >= count ? rows[0] : null;
    }, 90_000);
    try {
      // Twice the capacity of the aggregate: an integer factor, so hot.
      await signal(from * 2 * 100);
      const hot = await nextRescale(seen + 1);
      expect(hot).toMatchObject({ outcome: 'completed', fromReplicas: from, toReplicas: from * 2, inputs: { operator: 'agg', hot: true } });
      expect(hot.reason).toMatch(/autoscale hot-tier/);
      const total = await expectExactlyOnce();
      const after = await subtasks();
      expect(after.filter((s) => s.operator === 'agg')).toHaveLength(from * 2);
      // No other subtask restarted, and no record was read twice.
      expect(after.filter((s) => s.operator !== 'agg').map((s) => `${s.operator}/${s.index}/${s.task?.incarnation}`).sort()).toEqual(outside);
      expect(sum(after.filter((s) => s.operator === 'src').map((s) => s.task), 'recordsRead')).toBe(total);

      // Four times more: bounded by the job's 4 source partitions, nothing started.
      await signal(1600);
      const bounded = await stack.waitFor('a bounded decision', async () => (await decisions()).find((r) => r.reason.startsWith('no-change: bounded')) ?? null);
      expect(bounded.reason).toMatch(/at most 4 agg subtasks \(its 4 source partitions\)/);
      expect((await rescales()).length).toBe(seen + 1);

      // A size that is no integer factor of the current one: the replan, once.
      await signal(300);
      const replanned = await nextRescale(seen + 2);
      expect(replanned).toMatchObject({ outcome: 'replanned', fromReplicas: from * 2, toReplicas: 3, inputs: { hot: false } });
      await expectExactlyOnce();
      // Settled: the next decision is "no change" at 3, and no further rescale was started (counted).
      await stack.waitFor('a no-change decision after the replan', async () => (await decisions()).find((r) => r.outcome === 'no-change' && r.toReplicas === 3) ?? null);
      expect((await rescales()).length).toBe(seen + 2);
      const view = (await stack.api('GET', `/v1/jobs/${JOB}`, { role: 'viewer' })).body;
      expect(view.operators.find((o: any) => o.id === 'agg').parallelism).toBe(3);
    } finally {
      await stack.temporal.workflow.getHandle(`autoscale:${tier}`).terminate('test over').catch(() => undefined);
    }
    // Back to 2 for the tests after this one (an operator's rescale: 3 → 2 is the replan too).
    expect((await rescaleViaApi(2)).status).toMatchObject({ outcome: 'replanned', to: 2 });
  });

  test('3 → 4 is not an integer factor: the stop-the-world replan, exactly-once, and the reason', async () => {
    // A typo gets the server's message and a non-zero exit, and changes nothing.
    const typo = await cli(['rescale', JOB, 'aggr', '4']);
    expect(typo.code).not.toBe(0);
    expect(typo.stderr).toMatch(/has no operator aggr/);
    // 2 → 3 first (through the CLI): not an integer factor either.
    const viaCli = async () => {
      const run = await cli(['rescale', JOB, 'agg', '3', '--reason', 'test via the CLI', '--json']);
      expect(run.code).toBe(0);
      const started = JSON.parse(run.stdout);
      expect(started).toMatchObject({ workflowId: `rescale:${JOB}`, kind: 'rescaleOperator' });
      return { status: (await stack.temporal.workflow.getHandle(started.workflowId, started.runId).result()) as RescaleStatus };
    };
    for (const [from, to] of [[2, 3], [3, 4]]) {
      const { status } = await underLoad(() => (to === 3 ? viaCli() : rescaleViaApi(to)), 4_000);
      expect(status).toMatchObject({ outcome: 'replanned', hot: false, from, to });
      expect(status.reason).toMatch(/not an integer factor/);
      expect(status.compensation?.outcome?.parallelism?.to).toMatchObject({ agg: to });
      await expectExactlyOnce();
      const operation = (await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body;
      expect(operation).toMatchObject({ kind: 'rescaleOperator', status: 'completed' });
    }
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
    expect(ledger).toMatchObject({ outcome: 'replanned', inputs: { hot: false, why: expect.stringMatching(/not an integer factor/) } });
  });

  test('a Temporal cancellation mid-window (the Web UI\'s Request Cancellation): compensated by the replan, the clock runs again, exactly-once', async () => {
    const from = (await subtasks()).filter((s) => s.operator === 'agg').length;
    const to = from / 2;
    const handle = await stack.temporal.workflow.start(rescaleOperator, {
      taskQueue: stack.taskQueue, workflowId: `rescale:${JOB}`, args: [{ job: JOB, operator: 'agg', parallelism: to, reason: 'test: cancel mid-window' }],
    });
    // The window opens with the layout write: cancel as soon as the rescale is in it.
    await stack.waitFor('the rescale in its window', async () => (await handle.query(rescaleStatusQuery).catch(() => null))?.phase === 'draining', { timeoutMs: 30_000, intervalMs: 5 });
    await handle.cancel();
    const status = (await handle.result()) as RescaleStatus;
    expect(status).toMatchObject({ outcome: 'compensated', hot: true, phase: 'aborted' });
    expect(status.compensation?.reason).toMatch(/cancellation requested/);
    expect(status.compensation?.outcome?.parallelism?.to).toMatchObject({ agg: to });
    expect((await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body.status).toBe('compensated');
    // The checkpoint clock is not left paused: checkpoints complete again, and every key is exact.
    const completed = async () => (await stack.api('GET', `/v1/jobs/${JOB}`, { role: 'viewer' })).body.lastCompletedCheckpoint?.id ?? 0;
    const after = await completed();
    await stack.waitFor('a checkpoint completed after the compensation', async () => (await completed()) > after);
    await underLoad(async () => undefined, 2_000);
    await expectExactlyOnce();
    expect((await subtasks()).filter((s) => s.operator === 'agg')).toHaveLength(to);
  });

  test('SIGKILL of the agent hosting a new subtask mid-window: replan from the last completed checkpoint, compensated, exactly-once', async () => {
    const before = await subtasks();
    const from = before.filter((s) => s.operator === 'agg').length;
    const start = () => stack.temporal.workflow.start(rescaleOperator, {
      taskQueue: stack.taskQueue, workflowId: `rescale:${JOB}`, args: [{ job: JOB, operator: 'agg', parallelism: from * 2, reason: 'test: kill mid-window', stepTimeoutMs: 10_000 }],
    });
    let handle!: Awaited<ReturnType<typeof start>>;
    const killed = await underLoad(async () => {
      handle = await start();
      // The window is open once the new subtasks are deployed: kill the agent that hosts one of them.
      const victim = await stack.waitFor('a new subtask deployed', async () => {
        const status = await handle.query(rescaleStatusQuery).catch(() => null);
        if (!status?.added.length) return null;
        const deployed = (await tasksOf(stack, JOB)).find((t) => status.added.includes(t.taskId));
        return deployed ? (deployed.runtimeId as string) : null;
      }, { timeoutMs: 30_000, intervalMs: 5 });
      stack.agents[victim].process.kill('SIGKILL');
      return victim;
    });
    const status = (await handle.result()) as RescaleStatus;
    expect(status).toMatchObject({ outcome: 'compensated', hot: true, phase: 'aborted' });
    expect(status.compensation?.reason).toMatch(/the cutover failed/);
    expect(status.compensation?.outcome?.restoredFrom).toBeGreaterThan(0);
    expect(status.compensation?.outcome?.parallelism?.to).toMatchObject({ agg: from * 2 });
    const operation = (await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body;
    expect(operation.status).toBe('compensated');
    const running = await stack.waitFor('the job running again without the killed agent', async () => {
      const tasks = await tasksOf(stack, JOB);
      return tasks.length === 2 + from * 2 + 1 && tasks.every((t) => t.state === 'ready' && t.runtimeId !== killed) ? tasks : null;
    }, 90_000);
    expect(new Set(running.map((t) => t.generation)).size).toBe(1);
    await expectExactlyOnce();
  });
});

