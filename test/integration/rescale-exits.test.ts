// Every way a hot rescale ends says what happened and leaves the job running (issue 33, item 5;
// DESIGN.md §4 "Exits": a paused checkpoint clock is always resumed or the job replanned).
//
// - Cancelled at once, while preparing: planRescale pauses the clock and waits for the checkpoint in
//   flight, held here by an agent stopped with SIGSTOP (a checkpoint that takes long under load).
//   Before patch rescale-prepare-ends-before-resume the workflow resumed the clock at once, while
//   planRescale went on pausing it: the rescale ended `cancelled` and no checkpoint completed after
//   the one in flight, ever. Now the resume comes after planRescale ended: checkpoints go on.
// - Joining a running replan that applies another parallelism (a replan asked by someone else,
//   waiting for room): before patch rescale-joined-replan-judged the rescale ended `replanned`
//   (`completed`) at the replan's size; now `refused` (superseded: nothing of its own changed),
//   naming requested and applied.
//
// Real Temporal, PostgreSQL, API, worker and agent processes running the stream job.
import { temporal } from '@temporalio/proto';
import { OperationStatusSchema } from '../../protocol';
import { createSourceFeed } from '../../store/source-feed';
import { streamJobReads } from '../../store/stream-jobs';
import { rescaleOperator, rescaleStatusQuery, type RescaleStatus } from '../../workflows/rescale-operator';
import { stopTheWorldReplan, type StreamReplanOutcome } from '../../workflows/stop-the-world-replan';
import { startStack, type Stack } from '../../harness/stack';
import { GiveUp } from '../../harness/wait-for';
import { defineWorkload, tasksOf } from '../../harness/workloads';

const AGENTS = ['rx-a', 'rx-b', 'rx-c'];
const JOB = 'exits';
const TABLES = { source: 'exits_in', sink: 'exits_out' };
const CONTRACT = { ownership: 'partitioned', partitions: 4, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' };

let stack: Stack;

beforeAll(async () => {
  // A lease far longer than an agent is held stopped here: the stop must not become a recovery.
  stack = await startStack({ leaseTtlMs: 30_000, agents: AGENTS.map((id) => ({ id, slots: 3 })) });
  await createSourceFeed(stack.db).ensureTables(TABLES.source);
  await stack.db.query(`insert into ${TABLES.source} (partition, "offset", key) select i % 4, i / 4, 'k-' || (i % 50) from generate_series(0, 399) i`);
  await defineWorkload(stack, JOB, {
    kind: 'stream', selector: {}, contract: CONTRACT,
    spec: {
      ...TABLES, partitions: 4, checkpointIntervalMs: 300, maxParallelism: 64,
      operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    },
  }, 4);
});
afterAll(async () => {
  await stack?.stop();
});

const checkpoints = () => streamJobReads(stack.db);
const lastCompleted = async () => (await checkpoints().lastCompletedCheckpoint(JOB))?.id ?? 0;
const parallelismOf = async (operator: string) =>
  ((await stack.api('GET', `/v1/jobs/${JOB}`, { role: 'viewer' })).body.operators as { id: string; parallelism: number }[]).find((o) => o.id === operator)?.parallelism;

describe('rescaleOperator exits', () => {
  test('cancelled at once, while planRescale waits for a checkpoint in flight: cancelled, and the clock runs again', async () => {
    // An agent hosting a subtask of the job but not its coordinator (the sink subtask) is stopped:
    // the next checkpoint cannot complete until it continues.
    const view = (await stack.api('GET', `/v1/jobs/${JOB}`, { role: 'viewer' })).body;
    const coordinatorRuntime = view.subtasks.find((s: { operator: string }) => s.operator === 'out').runtimeId as string;
    const victim = (await tasksOf(stack, JOB)).map((t) => t.runtimeId as string).find((runtimeId) => runtimeId !== coordinatorRuntime)!;
    expect(victim).toBeDefined();
    const triggeredBefore = (await checkpoints().nextCheckpointId(JOB)) - 1;
    stack.agents[victim].process.kill('SIGSTOP');
    let continued = false;
    const resume = () => {
      if (!continued) stack.agents[victim].process.kill('SIGCONT');
      continued = true;
    };
    try {
      // Held: one checkpoint stays in flight across polls a second apart (at a 300 ms interval an
      // unheld one completes within that). It may be the one in flight when the agent stopped
      // (triggeredBefore, before its ack reached the coordinator): the coordinator triggers no other
      // while it waits, so requiring a later id waited forever (CI, 01220c8's clean clone).
      let seen: { id: number; since: number } | null = null;
      const held = await stack.waitFor('a checkpoint held in flight by the stop', async () => {
        const inFlight = await checkpoints().checkpointInFlight(JOB);
        if (!inFlight || inFlight.id < triggeredBefore) return (seen = null);
        if (seen?.id !== inFlight.id) seen = { id: inFlight.id, since: Date.now() };
        return Date.now() - seen.since >= 1_000 ? inFlight.id : null;
      });
      const handle = await stack.temporal.workflow.start(rescaleOperator, {
        taskQueue: stack.taskQueue, workflowId: `rescale:${JOB}`, args: [{ job: JOB, operator: 'agg', parallelism: 4, reason: 'test: cancel at once' }],
      });
      // planRescale paused the clock and reports the held checkpoint in flight (its heartbeat).
      const pendingPrepare = async () => (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'planRescale');
      await stack.waitFor('planRescale pausing the clock with the held checkpoint in flight', async () => {
        const data = (await pendingPrepare())?.heartbeatDetails?.payloads?.[0]?.data;
        const details = data ? (JSON.parse(Buffer.from(data).toString()) as { inFlight: number | null }) : null;
        if (details?.inFlight === held) return true;
        const status = await handle.query(rescaleStatusQuery);
        // Past preparing (not hot, say), the window this test is about is gone: say why at once.
        if (status.phase !== 'preparing') throw new GiveUp(`the rescale left preparing: ${JSON.stringify(status)}`);
        throw new Error(`planRescale's last heartbeat: ${JSON.stringify(details)}; the checkpoint held: ${held}`);
      }, { intervalMs: 20 });
      await handle.cancel();
      // The cancellation is taken (the run ended, or planRescale is asked to stop) before the agent continues.
      await stack.waitFor('the cancellation taken', async () => {
        const description = await handle.describe();
        return description.status.name !== 'RUNNING' || (await pendingPrepare())?.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED;
      }, { intervalMs: 20 });
      resume();

      const status = (await handle.result()) as RescaleStatus;
      expect(status).toMatchObject({ outcome: 'cancelled', phase: 'cancelled', added: [] });
      expect((await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body.status).toBe('cancelled');
      // The held checkpoint completes once the agent continues; the clock must trigger the ones after it.
      await stack.waitFor(`a checkpoint completed after the held ${held}`, async () => (await lastCompleted()) > held, 30_000);
      expect(await parallelismOf('agg')).toBe(2);
      const ledger = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
      expect(ledger).toMatchObject({ outcome: 'cancelled', inputs: { clockResumed: true } });
    } finally {
      resume();
    }
  });

  test('joining a running replan that applied another parallelism: refused (superseded), naming the requested and the applied parallelism', async () => {
    // A replan asked by another (a recovery's, say) at agg = 8: 10 subtasks, more than the fleet's 9
    // slots, so it waits for room, running, until a fourth agent joins.
    const replan = await stack.temporal.workflow.start(stopTheWorldReplan, {
      taskQueue: stack.taskQueue, workflowId: `replan:${JOB}`, args: [{ workload: JOB, parallelism: { agg: 8 }, reason: 'test: a replan asked by another', cause: 'test' }],
    });
    // 2 → 3 is no integer factor: the rescale goes to the replan, finds replan:<job> running, joins it.
    const handle = await stack.temporal.workflow.start(rescaleOperator, {
      taskQueue: stack.taskQueue, workflowId: `rescale:${JOB}`, args: [{ job: JOB, operator: 'agg', parallelism: 3, reason: 'test: join a replan' }],
    });
    await stack.waitFor('the rescale joined the running replan', async () => (await handle.query(rescaleStatusQuery).catch(() => null))?.compensation?.joined === `replan:${JOB}`);
    await stack.startAgent({ id: 'rx-d', slots: 3 });

    const replanned = (await replan.result()) as StreamReplanOutcome;
    expect(replanned.parallelism.to).toMatchObject({ agg: 8 });
    const status = (await handle.result()) as RescaleStatus;
    expect(status).toMatchObject({ outcome: 'refused', hot: false, from: 2, to: 3, compensation: { joined: `replan:${JOB}`, applied: 8 } });
    expect(status.error).toBe(`requested agg = 3; the running replan:${JOB} it joined applied agg = 8`);
    expect(status.compensation?.outcome?.parallelism?.to).toMatchObject({ agg: 8 });
    // The protocol's status of its kind carries what was applied (protocol/operation-status.ts).
    expect(OperationStatusSchema.safeParse(status)).toMatchObject({ success: true, data: { kind: 'rescaleOperator', compensation: { applied: 8 } } });
    const operation = (await stack.api('GET', `/v1/operations/rescale:${JOB}`, { role: 'viewer' })).body;
    expect(operation.status).toBe('refused');
    const ledger = (await stack.api('GET', `/v1/ledger?workload=${JOB}&kind=rescale`, { role: 'viewer' })).body.events[0];
    expect(ledger).toMatchObject({ outcome: 'refused', toReplicas: 3, inputs: { joined: `replan:${JOB}`, applied: 8 } });
    expect(await parallelismOf('agg')).toBe(8);
  });
});
