// stopTheWorldReplan (DESIGN.md §4.5): the one compensation. Every abort path ends here as a child.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ActivityFailure, ApplicationFailure, CancellationScope, executeChild, isCancellation, log, proxyActivities, sleep, workflowInfo, WorkflowIdReusePolicy } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { compareEvidence, type EvidenceComparison } from '../domain/evidence';
import type { Plan } from '../domain/plan';
import { REPLAN_REASON_MAX } from '../protocol/bounds';
import type { CheckedInput } from '../protocol/workflow-inputs';
import { applyPlacement, withoutRemovalsOn, type PlacementOutcome } from './apply-placement';
import { checkInput, failureMessage, profiles, reportingOutcome, trackOperation } from './operation';
import { COMPENSATE_WAITS_FOR_RUNNING_REPLAN, REPLAN_CANCELLATION_LEDGERED, REPLAN_FINISHES_ONCE_BEGUN, REPLAN_PLACES_AGAIN, STREAM_REPLAN, STREAM_REPLAN_STOPS_AGAIN, STREAM_REPLAN_WAITS_FOR_ROOM, STREAM_RESIZE_WAITS_FOR_ROOM, askPatch } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);
const long = proxyActivities<Activities>(profiles.longCall);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export type { ReplanInput } from '../protocol/workflow-inputs';

/**
 * The one compensation: stop every task of the workload, recompute placement at the requested
 * size in a new generation, redeploy, converge, ledger. Hot when possible, correct always.
 */
export async function stopTheWorldReplan(rawInput: unknown): Promise<PlacementOutcome> {
  return reportingOutcome(() => runStopTheWorldReplan(rawInput));
}

async function runStopTheWorldReplan(rawInput: unknown): Promise<PlacementOutcome> {
  const input = await checkInput('stopTheWorldReplan', rawInput);
  // Runs recorded before stream jobs existed replay without this look-up.
  const workload = askPatch(STREAM_REPLAN) ? await store.loadWorkload.executeWithOptions({ summary: `load workload ${input.workload}` }, [input.workload]) : null;
  if (workload?.kind === 'stream') return replanStreamJob(input);
  if (input.replicas === undefined) {
    throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `stopTheWorldReplan: invalid input: replicas is required for a ${workload?.kind ?? 'workload'} (parallelism is for stream jobs)` });
  }
  const replicas = input.replicas;
  const { workflowId, runId } = workflowInfo();
  const op = trackOperation('replan', input.workload, `replan ${input.workload} → ${replicas}`);
  const before = await store.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
  try {
    const attempt = async () => {
      op.enter('stopping-the-world');
      const stopped = await long.stopAllTasksOfWorkload.executeWithOptions({ summary: `stop the world: every task of ${input.workload}` }, [{ workload: input.workload }]);
      op.enter('planning');
      const plan = await store.preparePlan.executeWithOptions(
        { summary: `plan ${input.workload} → ${replicas} in a new generation` },
        [{ workload: input.workload, replicas, newGeneration: true }],
      );
      // The size it replans at is the desired state from now on (DESIGN.md §3 "One desired state").
      const outcome = await applyPlacement(plan, { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p), desired: replicas });
      return { stopped, plan, outcome };
    };
    // The replan is the one compensation: an agent that died while it started the new generation
    // (chaos seed 6) is no end of it. The world is stopped again and placed anew, a few times;
    // runs recorded before this patch failed at the first error.
    const attempts = async () => {
      for (let tried = 1; ; tried++) {
        try {
          return await attempt();
        } catch (error) {
          if (isCancellation(error) || tried >= REPLAN_ATTEMPTS || !askPatch(REPLAN_PLACES_AGAIN)) throw error;
          log.warn('replan attempt failed; stopping the world again', { workload: input.workload, attempt: tried, error: failureMessage(error) });
          await sleep(2_000 * tried, { summary: `replan ${input.workload}: attempt ${tried + 1} after ${failureMessage(error).slice(0, 120)}` });
        }
      }
    };
    return await onceBegun(async () => {
      const { stopped, plan, outcome } = await attempts();
      await store.appendLedger.executeWithOptions({ summary: `ledger: replan ${input.workload} ${plan.unplaced ? 'degraded' : 'completed'}` }, [{
        kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: plan.target.length,
        reason: input.reason, inputs: { cause: input.cause ?? null, stoppedTasks: stopped.length, generation: outcome.generation, startedAt: workflowInfo().startTime.toISOString(), ...cancellationNote() },
        planId: plan.id, workflowId, runId, outcome: plan.unplaced ? 'degraded' : 'completed',
      }]);
      op.enter('done');
      return { ...outcome, stopped: stopped.map((t) => t.taskId) };
    });
  } catch (error) {
    await ledgerUnfinished(error, {
      kind: 'replan', workload: input.workload, fromReplicas: before?.assignments.length ?? 0, toReplicas: null,
      reason: input.reason, inputs: { cause: input.cause ?? null }, workflowId, runId,
    });
    throw error;
  }
}

type LedgerRow = Parameters<Activities['appendLedger']>[0];

/**
 * The row of a replan that ended unfinished: `failed`, or `cancelled` for a cancellation (one that
 * came before the first stop: after it a replan is not cut short). The cancelled row is written in
 * a scope the cancellation does not cut (patch replan-cancellation-ledgered); before, it was asked
 * for in the cancelled scope, which schedules no activity, so a replan cancelled by hand (the Web
 * UI's Request Cancellation) left no row at all.
 */
async function ledgerUnfinished(error: unknown, row: Omit<LedgerRow, 'outcome' | 'evidence'>): Promise<void> {
  const evidence = { error: failureMessage(error) };
  if (isCancellation(error) && askPatch(REPLAN_CANCELLATION_LEDGERED)) {
    await CancellationScope.nonCancellable(() => store.appendLedger.executeWithOptions({ summary: `ledger: replan ${row.workload} cancelled` }, [{ ...row, outcome: 'cancelled', evidence }]));
    return;
  }
  await store.appendLedger.executeWithOptions({ summary: `ledger: replan ${row.workload} failed` }, [{ ...row, outcome: 'failed', evidence }]);
}

export interface StreamReplanOutcome extends PlacementOutcome {
  /** the checkpoint the new generation restored from (null: none completed, it started empty) */
  restoredFrom: number | null;
  parallelism: { from: Record<string, number>; to: Record<string, number> };
  /** runtimes that did not answer the stop and got no subtask */
  unreachable: string[];
  /** before the stop against after the converge: a lost or doubled record is counted here */
  comparison: EvidenceComparison;
  /** what the stopped sources had read (their recordsRead at the stop): the records after restoredFrom among them are read again */
  recordsReadBeforeStop: number;
}

/**
 * A stream job: every subtask of every operator stops; the job is placed at the requested
 * parallelism in a new generation, whose subtasks restore from the newest completed checkpoint
 * (sources seek to its offsets, aggregates load the key groups they own now, the sink drops what
 * was pre-committed after it); converge; ledger.
 */
async function replanStreamJob(input: CheckedInput<'stopTheWorldReplan'>): Promise<StreamReplanOutcome> {
  const { workflowId, runId } = workflowInfo();
  const size = input.parallelism ? JSON.stringify(input.parallelism) : String(input.replicas ?? 'as defined');
  const op = trackOperation('replan', input.workload, `replan stream job ${input.workload} → ${size}`);
  const replicas = typeof input.replicas === 'number' ? input.replicas : undefined;
  let parallelism: StreamReplanOutcome['parallelism'] | null = null;
  try {
    op.enter('resizing');
    const resize = () => store.resizeStreamJob.executeWithOptions(
      { summary: `set the parallelism of ${input.workload} (${size})` }, [{ workload: input.workload, parallelism: input.parallelism, replicas }],
    );
    // A size that does not fit now (runtimes away, a recovery under way: chaos seed 64) is waited
    // for as the placement is, before the replan gives up; nothing was changed meanwhile.
    const resized = await resize().catch(async (error: unknown) => {
      // Only a compensation waits (it has a cause: a recovery, a failed rescale); a size asked for by
      // hand that does not fit is refused at once, before anything stops.
      for (let waited = 1; input.cause !== undefined && isPlacementShort(error) && waited <= STREAM_REPLAN_ROOM_WAITS && askPatch(STREAM_RESIZE_WAITS_FOR_ROOM); waited++) {
        await waitForRoom(input.workload, waited, ' to resize', error);
        try {
          return await resize();
        } catch (again) {
          error = again;
        }
      }
      throw error;
    });
    parallelism = { from: resized.from, to: resized.to };
    const resizedParallelism = parallelism;
    const baseline = await agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload}` }, [{ workload: input.workload }]);
    // One attempt: stop the world, restore, place, converge. A subtask that fails while the new
    // generation converges (its peer's agent died meanwhile) is no end of the replan: the world is
    // stopped again and the job placed anew, a few times, as the replan is the one compensation.
    const attempt = async () => {
      op.enter('stopping-the-world');
      const stop = await long.stopStreamJob.executeWithOptions({ summary: `stop the world: every subtask of ${input.workload}` }, [{ workload: input.workload }]);
      const restorePoint = await store.streamRestorePoint.executeWithOptions({ summary: `find the last completed checkpoint of ${input.workload}` }, [{ workload: input.workload }]);
      op.enter('planning');
      const plan = await store.preparePlan.executeWithOptions(
        { summary: `plan ${input.workload} at ${JSON.stringify(resized.to)} in a new generation` },
        [{ workload: input.workload, replicas: resized.replicas, newGeneration: true, avoidRuntimes: stop.unreachable }],
      );
      if (plan.unplaced) {
        // A partial job cannot run (its sources would wait for absent peers): say so rather than start part of it.
        throw ApplicationFailure.create({
          type: 'placement-unavailable', nonRetryable: true,
          message: `job ${input.workload}: ${plan.unplaced.missing} of ${resized.replicas} subtasks do not fit the runtimes that answered (unreachable: ${stop.unreachable.join(', ') || 'none'}); the job is stopped until a replan fits`,
        });
      }
      // The runtimes that did not answer the stop are not called again: their old subtasks can commit nothing, and are revoked when they come back.
      const outcome = await applyPlacement(withoutRemovalsOn(plan, stop.unreachable), { convergeTimeoutMs: input.convergeTimeoutMs, onPhase: (p) => op.enter(p) });
      return { stop, restorePoint, plan, outcome };
    };
    const attempts = async () => {
      for (let tried = 1, waitedForRoom = 0; ; tried++) {
        try {
          return await attempt();
        } catch (error) {
          const placementShort = isPlacementShort(error);
          const noPlacement = error instanceof ApplicationFailure && error.type === 'placement-unavailable';
          // The fleet is short now (agents away, chaos seed 7): the world is stopped either way, so the
          // replan waits for runtimes to come back, about two minutes, before it gives up.
          if (noPlacement && !isCancellation(error) && waitedForRoom < STREAM_REPLAN_ROOM_WAITS && askPatch(STREAM_REPLAN_WAITS_FOR_ROOM)) {
            waitedForRoom++;
            tried--; // waiting for room is not a failed attempt
            await waitForRoom(input.workload, waitedForRoom, '', error);
            continue;
          }
          if (isCancellation(error) || tried >= STREAM_REPLAN_ATTEMPTS || placementShort || noPlacement || !askPatch(STREAM_REPLAN_STOPS_AGAIN)) throw error;
          log.warn('stream replan attempt failed; stopping the world again', { workload: input.workload, attempt: tried, error: failureMessage(error) });
          await sleep(1_000 * tried, { summary: `replan ${input.workload}: attempt ${tried + 1} after ${failureMessage(error).slice(0, 120)}` });
        }
      }
    };
    return await onceBegun(async () => {
      const { stop, restorePoint, plan, outcome } = await attempts();
      const restoredFrom = restorePoint?.id ?? null;
      const recordsReadBeforeStop = stop.stopped.reduce((sum, t) => sum + (t.counts?.recordsRead ?? 0), 0);
      const after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload}` }, [{ workload: input.workload }]);
      const comparison = compareEvidence(baseline, after, { expectedTasks: plan.target.length });
      await store.appendLedger.executeWithOptions({ summary: `ledger: replan ${input.workload} from checkpoint ${restoredFrom ?? 'none'}` }, [{
        kind: 'replan', workload: input.workload, fromReplicas: subtotal(resized.from), toReplicas: plan.target.length,
        reason: input.reason, inputs: { cause: input.cause ?? null, stoppedTasks: stop.stopped.length, unreachable: stop.unreachable, generation: outcome.generation, restoredFrom, parallelism, recordsReadBeforeStop, startedAt: workflowInfo().startTime.toISOString(), ...cancellationNote() },
        planId: plan.id, workflowId, runId, outcome: 'completed', evidence: { verdict: comparison.verdict, reasons: comparison.reasons, conservation: comparison.conservation },
      }]);
      op.enter('done');
      return { ...outcome, stopped: stop.stopped.map((t) => t.taskId), restoredFrom, parallelism: resizedParallelism, unreachable: stop.unreachable, comparison, recordsReadBeforeStop };
    });
  } catch (error) {
    await ledgerUnfinished(error, {
      kind: 'replan', workload: input.workload, fromReplicas: parallelism ? subtotal(parallelism.from) : 0, toReplicas: null,
      reason: input.reason, inputs: { cause: input.cause ?? null, parallelism }, workflowId, runId,
    });
    throw error;
  }
}

/**
 * From its first stop on, a replan is not cut short (patch replan-finishes-once-begun): a
 * cancellation then (the Web UI's Request Cancellation, `temporal workflow cancel replan:<w>`) would
 * leave the world stopped, every task of the workload down with the placement still naming them
 * (network chaos seed 42). So the stop, the new placement, the convergence and the ledger run to
 * their end, and the ledger row says the cancellation came too late. A cancellation before the
 * first stop still ends the replan with nothing changed. Runs recorded before the patch replay as
 * they ran.
 */
async function onceBegun<T>(fn: () => Promise<T>): Promise<T> {
  return askPatch(REPLAN_FINISHES_ONCE_BEGUN) ? CancellationScope.nonCancellable(fn) : fn();
}

/** What the ledger row says of a cancellation that came after the world began to stop. */
function cancellationNote(): { cancellationIgnored?: string } {
  return rootCancelled()
    ? { cancellationIgnored: 'a cancellation came after the world began to stop: the replan finished, as a half-done replan leaves the workload stopped' }
    : {};
}
/** The workflow's own cancellation (the root scope), seen from inside a non-cancellable scope. */
const rootCancelled = () => {
  let scope: CancellationScope | undefined = CancellationScope.current();
  while (scope?.parent) scope = scope.parent;
  return scope?.consideredCancelled ?? false;
};

/** An activity refused for want of room (placement-unavailable). */
const isPlacementShort = (error: unknown) =>
  error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === 'placement-unavailable';

/** Attempts of a replan's stop → place → converge before it fails. */
const REPLAN_ATTEMPTS = 3;
/** Attempts of a stream replan's stop → place → converge before it fails. */
const STREAM_REPLAN_ATTEMPTS = 3;
/** Waits for room when the job does not fit the runtimes that answered: 2, 4, 8, 16, 20, 20, 20, 20 s. */
const STREAM_REPLAN_ROOM_WAITS = 8;
/** The `waited`-th wait for room (2 s doubling, at most 20 s). */
const waitForRoom = (workload: string, waited: number, what: string, error: unknown) =>
  sleep(Math.min(20_000, 2_000 * 2 ** (waited - 1)), { summary: `replan ${workload}: waiting for room${what} (${failureMessage(error).slice(0, 120)})` });

const subtotal = (parallelism: Record<string, number>) => Object.values(parallelism).reduce((sum, n) => sum + n, 0);

/**
 * Runs the replan as a child (id replan:<workload>) and waits for it. When a replan of the workload
 * already runs (a recovery's, a failed subtask's), `onRunning: 'wait'` lets it finish and then runs
 * this one, as asked (correct always: the later replan sees what the earlier one left);
 * `'throw'` hands the WorkflowExecutionAlreadyStartedError to the caller (a rescale joins it instead).
 */
export async function compensate(
  workload: string, replicas: Plan['replicas'] | undefined, reason: string, convergeTimeoutMs?: number, parallelism?: Record<string, number>,
  options: { onRunning?: 'wait' | 'throw' } = {},
): Promise<PlacementOutcome> {
  const size = parallelism ? JSON.stringify(parallelism) : String(replicas);
  // A compensation's reason may name many rows (every partition a receipts row failed on): the
  // replan takes its first REPLAN_REASON_MAX characters, the compensated operation keeps all of it.
  const reasonTaken = reason.length > REPLAN_REASON_MAX ? `${reason.slice(0, REPLAN_REASON_MAX - 1)}…` : reason;
  const start = () => executeChild(stopTheWorldReplan, {
    workflowId: `replan:${workload}`,
    args: [{ workload, replicas, reason: reasonTaken, cause: workflowInfo().workflowId, convergeTimeoutMs, ...(parallelism ? { parallelism } : {}) }],
    staticSummary: `replan ${workload} → ${size} (${reason.slice(0, 80)})`,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
  });
  for (let waited = 0; ; waited++) {
    try {
      return await start();
    } catch (error) {
      const busy = error instanceof WorkflowExecutionAlreadyStartedError;
      // Runs recorded before this patch failed here; a replan waits at most about 10 minutes for another.
      if (!busy || options.onRunning === 'throw' || waited >= 120 || !askPatch(COMPENSATE_WAITS_FOR_RUNNING_REPLAN)) throw error;
      await sleep(Math.min(5_000, 500 * 2 ** Math.min(waited, 4)), { summary: `replan:${workload} is running: compensate after it` });
    }
  }
}

