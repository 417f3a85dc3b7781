// What every scalegate workflow shares: its phase as a query and a search attribute, the input
// validation that fails non-retryably with a message naming the bad field, activity profiles, and
// the one operation shell (beginOperation): status, phase, ledger rows, abort guard, exits, compensation order.
import {
  ActivityFailure, ApplicationFailure, CancellationScope, defineQuery, defineSignal, isCancellation, proxyActivities, proxyLocalActivities,
  setCurrentDetails, setHandler, upsertSearchAttributes, workflowInfo, type ActivityInterfaceFor, type QueryDefinition,
} from '@temporalio/workflow';
import type { z } from 'zod';
import type { Activities } from '../activities';
// Values from protocol's own modules, not its index: see protocol/names.ts for why.
import { checkInputWith, type InputCheck } from '../protocol/issues';
import type * as WorkflowInputs from '../protocol/workflow-inputs';
import { statusOfOutcome, type LedgerOutcome, type OperationStatusWord } from '../protocol/ledger';
import { ADMIT_BY_MEMO, OPERATION_KEY, OUTCOME_KEY, PHASE_KEY, WORKLOAD_KEY } from '../protocol/search-attributes';
import { ADMISSION_BY_RECORDED_START, EVIDENCE_JUDGED, FEWER_ROUND_TRIPS, INPUT_CHECKED_BY_WORKER, SCALEGATE_OUTCOME, askPatch } from './patches';

export const phaseQuery = defineQuery<string>('phase');
/** POST /v1/operations/:id/abort: an operator's abort, taken by every operation that changes a placement. */
export const abortSignal = defineSignal<[{ reason?: string } | undefined]>('abort');

/** The abort reason recorded when the abort came as a Temporal cancellation request. */
export const CANCELLATION_REQUESTED = 'cancellation requested through Temporal (Web UI "Request Cancellation", temporal workflow cancel, SDK cancel)';

/**
 * An operation's abort (DESIGN.md §4 "Exits"): the `abort` signal and a Temporal cancellation of
 * the workflow are one and the same. `guard(fn)` runs the steps that may be cut short in a scope
 * that either one cancels; `isAbort(error)` says whether a failure is that cut (and records a
 * cancellation's reason). The exit itself (ledger rows, the compensating replan) then runs in
 * `exit(fn)`, a non-cancellable scope, so a cancelled workflow still ends as it says.
 * The signal handler cancels the guarded scope directly: nothing waits on a promise that could
 * reject unhandled.
 */
export function handleAborts() {
  const state: { reason: string | null } = { reason: null };
  const guarded: CancellationScope[] = [];
  setHandler(abortSignal, (args) => {
    state.reason ??= args?.reason ?? 'aborted by an operator';
    for (const scope of guarded) scope.cancel();
  });
  return {
    get reason() {
      return state.reason;
    },
    async guard<T>(fn: () => Promise<T>): Promise<T> {
      const scope = new CancellationScope({ cancellable: true });
      guarded.push(scope);
      try {
        return await scope.run(fn);
      } finally {
        guarded.splice(guarded.indexOf(scope), 1);
      }
    },
    isAbort(error: unknown): boolean {
      if (!isCancellation(error)) return false;
      state.reason ??= CANCELLATION_REQUESTED;
      return true;
    },
    exit<T>(fn: () => Promise<T>): Promise<T> {
      return CancellationScope.nonCancellable(fn);
    },
  };
}

/** Activity option profiles, named once. */
export const profiles = {
  /** a short store read or write through the server (a local activity where the run asks: localStore) */
  storeCall: { startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 10, initialInterval: '200ms' } },
  agentCall: { startToCloseTimeout: '60 seconds', retry: { maximumAttempts: 5, initialInterval: '500ms', maximumInterval: '5s' } },
  /** a call that may take minutes, heartbeating: drains, starts that await readiness, waits on another run */
  longCall: { startToCloseTimeout: '15 minutes', heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 3 } },
  /** a call inside a paused checkpoint window: a lost answer fails over to the replan within seconds */
  windowCall: { startToCloseTimeout: '5 seconds', retry: { maximumAttempts: 3, initialInterval: '200ms', maximumInterval: '1s' } },
  /** a reading the caller takes again at its next interval anyway: a failure is reported, not retried for long */
  observation: { startToCloseTimeout: '15 seconds', retry: { maximumAttempts: 2, initialInterval: '1s' } },
  /**
   * A short store read or an idempotent store write run as a local activity: inside the workflow
   * task, without a round trip through the server (bench/scale-latency.ts measures the difference).
   * The same retries as storeCall; a backoff past a few seconds waits on a server timer.
   */
  localStore: { startToCloseTimeout: '10 seconds', localRetryThreshold: '5 seconds', retry: { maximumAttempts: 10, initialInterval: '200ms' } },
} as const;

const serverStore = proxyActivities<Activities>(profiles.storeCall);
const localStore = proxyLocalActivities<Activities>(profiles.localStore);
/** The store's short calls: local activities in runs since FEWER_ROUND_TRIPS, through the server in runs before it. */
export const quickStore = (): typeof serverStore => (askPatch(FEWER_ROUND_TRIPS) ? localStore : serverStore);

/**
 * The judgment since EVIDENCE_JUDGED, or the one before it where the two differ in what the run does
 * next (`differ`) and the run began before the patch. Both are pure functions of recorded results.
 */
export function judgedSinceEvidencePatch<T>(judged: T, before: () => T, differ: (a: T, b: T) => boolean): T {
  return judgedSincePatch(EVIDENCE_JUDGED, judged, before, differ);
}

/** The judgment since `patchId`, or the one before it where the two differ (`differ`) and the run began before the patch. */
export function judgedSincePatch<T>(patchId: string, judged: T, before: () => T, differ: (a: T, b: T) => boolean): T {
  const legacy = before();
  if (!differ(judged, legacy)) return judged;
  return askPatch(patchId) ? judged : legacy;
}

/** Two comparisons differ in what the run does next: one is a regression (compensate), the other not. */
export const regressionDiffers = (a: { verdict: string }, b: { verdict: string }): boolean => (a.verdict === 'regression') !== (b.verdict === 'regression');

/**
 * A start the API answered 503 for must never run (DESIGN.md §4 "Unambiguous starts"): when Temporal
 * recorded this run after the admission deadline the API gave it, fail at once, before any command.
 * Starts without the memo (temporal workflow start, SDK starts, children) are not concerned.
 */
export function refuseLateStart(workflowType: string): void {
  const { memo, startTime, runStartTime } = workflowInfo();
  const admitBy = memo?.[ADMIT_BY_MEMO];
  // The recorded start is never after the first workflow task: only where that task came after the
  // deadline can the two disagree, so only there is the patch asked (no marker in the usual run).
  if (typeof admitBy !== 'string' || !(runStartTime.getTime() > Date.parse(admitBy))) return;
  const recorded = askPatch(ADMISSION_BY_RECORDED_START) ? startTime : runStartTime;
  if (!(recorded.getTime() > Date.parse(admitBy))) return;
  throw ApplicationFailure.create({
    type: 'start-expired',
    nonRetryable: true,
    message: `${workflowType}: Temporal recorded this start at ${recorded.toISOString()}, after its admission deadline ${admitBy}; the API had answered 503 (nothing started), so it does not run`,
  });
}

export function parseInput<T>(schema: z.ZodType<T>, input: unknown, workflowType: string): T {
  refuseLateStart(workflowType);
  return inputOrRefusal(checkInputWith(schema, input, workflowType));
}

/** The checked input, or its refusal: a non-retryable failure naming each bad field. */
function inputOrRefusal<T>(check: InputCheck<T>): T {
  if (!check.ok) throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: check.message });
  return check.input;
}

const inputCheck = proxyLocalActivities<Activities>({ startToCloseTimeout: '10 seconds', retry: { maximumAttempts: 5, initialInterval: '200ms' } });

/**
 * The input of a workflow the worker checks (protocol/workflow-inputs.ts): the local activity
 * checkWorkflowInput answers it with its defaults, or the message a refusal fails with, non-retryably,
 * as parseInput's. Runs recorded before patch input-checked-by-worker check it inline, as they did:
 * the schemas are required only on that path, so a run evaluates no zod.
 */
export async function checkInput<W extends WorkflowInputs.CheckedWorkflow>(workflowType: W, input: unknown): Promise<WorkflowInputs.CheckedInput<W>> {
  refuseLateStart(workflowType);
  let check: WorkflowInputs.InputCheck<W>;
  if (askPatch(INPUT_CHECKED_BY_WORKER)) {
    // Asked before the local activity, not in the activation that resolves it, where the store calls
    // that follow would ask it: a replay can resolve a local activity a workflow task earlier than
    // the run did, and a patch first asked there then reads as absent (docs/workflows.md, "Patches").
    askPatch(FEWER_ROUND_TRIPS);
    check = await inputCheck.checkWorkflowInput.executeWithOptions({ summary: `check ${workflowType}'s input` }, [workflowType, input]) as WorkflowInputs.InputCheck<W>;
  } else {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- evaluated only by runs recorded before the patch
    check = (require('../protocol/workflow-inputs') as typeof WorkflowInputs).checkWorkflowInput(workflowType, input);
  }
  return inputOrRefusal(check);
}

/**
 * Tracks the operation's phase for the `phase` query, the ScalegatePhase search attribute and the
 * Web UI's current details line (`summary` says what the operation is, e.g. "scale web 2 → 4").
 */
export function trackOperation(operation: string, workload: string | null, summary?: string) {
  let phase = 'starting';
  tracked = { summary: summary ?? operation };
  const details = () => setCurrentDetails(`${summary ?? operation}: **${phase}**`);
  details();
  setHandler(phaseQuery, () => phase);
  upsertSearchAttributes([
    { key: OPERATION_KEY, value: operation },
    { key: PHASE_KEY, value: phase },
    ...(workload ? [{ key: WORKLOAD_KEY, value: workload }] : []),
  ]);
  return {
    get phase() {
      return phase;
    },
    enter(next: string) {
      phase = next;
      upsertSearchAttributes([{ key: PHASE_KEY, value: next }]);
      details();
    },
  };
}

/** The summary of the operation this workflow tracks (module state is per workflow run), for its end. */
let tracked: { summary: string } | null = null;

/** The reason an operation's result gives for how it ended (null: none to give). */
function reasonOf(result: unknown): string | null {
  if (!result || typeof result !== 'object') return null;
  const r = result as { error?: unknown; evidenceGap?: unknown; reason?: unknown; compensation?: { reason?: unknown } | null };
  const candidates = [r.error, r.evidenceGap, r.reason, r.compensation?.reason];
  return (candidates.find((c) => typeof c === 'string' && c.length > 0) as string | undefined) ?? null;
}

/**
 * Runs an operation and makes its end visible (DESIGN.md §4 "Exits"): the API's status word
 * (completed, refused, compensated, cancelled, failed) as the ScalegateOutcome search attribute
 * (a column and a filter of the Web UI's list), and that word and its reason in the workflow's
 * details. Runs recorded before `scalegate-outcome` replay without it.
 */
export async function reportingOutcome<T>(run: () => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await run();
  } catch (error) {
    if (!(error instanceof OperationEnded)) {
      // A start refused for arriving after its admission deadline changed nothing (the API had
      // answered 503): refused, not failed (chaos seed 34).
      const expired = error instanceof ApplicationFailure && error.type === 'start-expired';
      endVisibly(isCancellation(error) ? 'cancelled' : expired ? 'refused' : 'failed', failureMessage(error));
      throw error;
    }
    result = error.status as T; // an exit of the operation shell ended it, its row written
  }
  const outcome = (result as { outcome?: unknown } | null)?.outcome;
  endVisibly(statusOfOutcome(typeof outcome === 'string' ? outcome : 'completed'), reasonOf(result));
  return result;
}

function endVisibly(status: OperationStatusWord, reason: string | null): void {
  if (!askPatch(SCALEGATE_OUTCOME)) return;
  upsertSearchAttributes([{ key: OUTCOME_KEY, value: status }]);
  setCurrentDetails(`${tracked?.summary ?? workflowInfo().workflowType}: **${status}**${reason ? `: ${reason.slice(0, 1_000)}` : ''}`);
}

/**
 * Thrown by an exit of the operation shell once the operation has ended (its outcome, phase and
 * ledger row written): `reportingOutcome` returns the status it carries, so an exit anywhere in an
 * operation's steps ends the run there.
 */
export class OperationEnded extends Error {
  constructor(readonly status: unknown) {
    super('the operation ended');
  }
}

/** What the shell keeps of every operation's status: its phase, how it ended, and the error it names. */
export interface OperationState {
  phase: string;
  outcome: string;
  error: string | null;
}

/** How an operation ends: its outcome, the phase it ends in and the ledger's word (both the outcome unless said), the error it names (unchanged unless said). */
export interface Ending<S extends OperationState> {
  outcome: S['outcome'];
  phase?: string;
  recorded?: LedgerOutcome;
  error?: string | null;
}

type LedgerEntry = Parameters<Activities['appendLedger']>[0];

export interface OperationSpec<S extends OperationState, Row extends unknown[]> {
  /** the ScalegateOperation search attribute, the workload (ScalegateWorkload) and what the Web UI's details call the operation */
  operation: string;
  workload: string | null;
  summary: string;
  /** the status `query` answers; the shell keeps its phase, outcome and error */
  status: S;
  query: QueryDefinition<S>;
  /** its ledger rows: the activities that append them, what each row's summary names (`ledger: <subject> <outcome>`), a row's columns */
  ledger: {
    calls: Pick<ActivityInterfaceFor<Activities>, 'appendLedger'>;
    subject: string;
    row: (...args: Row) => Omit<LedgerEntry, 'outcome' | 'workflowId' | 'runId'>;
  };
  /** runs as the operation ends, before its last phase and row (recoverRuntime stamps its end) */
  onEnd?: () => void;
}

/**
 * The one operation shell (DESIGN.md §4 "Exits") of scaleOut, scaleIn, recoverRuntime and
 * rescaleOperator: tracks the phase (query, search attribute, Web UI details), answers the status
 * query, takes aborts (the `abort` signal and a Temporal cancellation), writes the ledger rows, and
 * ends the operation the designed ways. Call it where the operation's first command would be.
 */
export function beginOperation<S extends OperationState, Row extends unknown[]>(spec: OperationSpec<S, Row>) {
  const { workflowId, runId } = workflowInfo();
  const { status, ledger: rows } = spec;
  const op = trackOperation(spec.operation, spec.workload, spec.summary);
  setHandler(spec.query, () => status);
  const aborts = handleAborts();
  const enter = (phase: string) => {
    op.enter(phase);
    status.phase = phase;
  };
  /** Appends a ledger row. Rows are part of the exit: a cancellation arriving meanwhile does not cut them. */
  const ledger = (outcome: LedgerOutcome, ...args: Row) => aborts.exit(() =>
    rows.calls.appendLedger.executeWithOptions({ summary: `ledger: ${rows.subject} ${outcome}` }, [{ ...rows.row(...args), outcome, workflowId, runId }]));
  /** The end: outcome, error, phase, then its row (none where `row` is null), in a scope no cancellation cuts. */
  const close = (ending: Ending<S>, row: Row | null): Promise<S> => aborts.exit(async () => {
    status.outcome = ending.outcome;
    if (ending.error !== undefined) status.error = ending.error;
    spec.onEnd?.();
    enter(ending.phase ?? ending.outcome);
    if (row) await ledger(ending.recorded ?? (ending.outcome as LedgerOutcome), ...row);
    return status;
  });
  const stop = (): never => {
    throw new OperationEnded(status);
  };
  /** Ends the operation (`close`) and its run: reportingOutcome returns the status. */
  const end = (ending: Ending<S>, ...row: Row): Promise<never> => close(ending, row).then(stop);
  return {
    status, aborts, enter, ledger, end,
    /** Ends the operation as `end` does but goes on (to rethrow the failure it ended on). */
    record: (ending: Ending<S>, ...row: Row): Promise<S> => close(ending, row),
    /** Ends the run of an operation whose exit already wrote its row. */
    ended: stop,
    /**
     * Runs `steps` in the abort guard. A failure, an abort or a Temporal cancellation of them goes to
     * `onFailure`, an exit: `abort` is the abort's reason (null: the steps failed, `error`).
     */
    async guarded<T>(steps: () => Promise<T>, onFailure: (abort: string | null, error: unknown) => Promise<never>): Promise<T> {
      try {
        return await aborts.guard(steps);
      } catch (error) {
        if (error instanceof OperationEnded) throw error;
        return onFailure(aborts.isAbort(error) ? aborts.reason : null, error);
      }
    },
    /**
     * The compensation order, in a scope no cancellation cuts: phase `compensating`, `replan()`,
     * then `compensated` and its row `rows.compensated()` (written after the replan: it records what
     * the replan did). A replan that fails ends `failed` ("compensation failed: …") with its row
     * `rows.failed(that)`, and is rethrown. A null row: none written there, and a failure is
     * rethrown as it is (runs recorded before ledger-after-compensation wrote the row first).
     * `replan` may return the exit to take instead of `compensated` (a replan cancelled by hand).
     */
    compensate: (
      replan: () => Promise<(() => Promise<never>) | void>, rows: { compensated: () => Row | null; failed: (error: string) => Row | null },
    ): Promise<never> => aborts.exit(async () => {
      enter('compensating');
      let instead: (() => Promise<never>) | void;
      try {
        instead = await replan();
      } catch (error) {
        if (error instanceof OperationEnded) throw error;
        const failure = `compensation failed: ${failureMessage(error)}`;
        const row = rows.failed(failure);
        if (row) await close({ outcome: 'failed' as S['outcome'], error: failure }, row);
        throw error;
      }
      if (instead) return instead();
      return close({ outcome: 'compensated' as S['outcome'] }, rows.compensated()).then(stop);
    }),
  };
}

/** An operation's shell: what beginOperation returns. */
export type OperationShell<S extends OperationState, Row extends unknown[]> = ReturnType<typeof beginOperation<S, Row>>;

/**
 * A duration for a Web UI summary: "500 ms", "5 s", "2.5 s", "2 min", "24 h". Summaries (of
 * activities, timers and children) are metadata on the command: they never change its sequence.
 */
export function formatDuration(ms: number): string {
  const trim = (value: number) => String(Math.round(value * 10) / 10);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${trim(ms / 1000)} s`;
  if (ms < 2 * 3_600_000) return `${trim(ms / 60_000)} min`;
  return `${trim(ms / 3_600_000)} h`;
}

/** "agent-a, agent-c": the distinct runtimes of some assignments, for a summary. */
export function runtimesOf(tasks: readonly { runtimeId: string }[]): string {
  const ids = [...new Set(tasks.map((t) => t.runtimeId))].sort();
  return ids.length <= 4 ? ids.join(', ') : `${ids.slice(0, 4).join(', ')} +${ids.length - 4}`;
}

/** The most specific message of a failure: an ActivityFailure's own message is only "Activity task failed". */
/** A plan or decision refused because what it was made on has since moved (the planner's DecisionStaleError, the fenced write, the basis check). */
export const isStalePlan = (error: unknown): boolean =>
  (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === 'stale-plan')
  || (error instanceof ApplicationFailure && error.type === 'stale-plan');

export function failureMessage(error: unknown): string {
  let current: unknown = error;
  let text = error instanceof Error ? error.message : String(error);
  while (current instanceof Error && current.cause) {
    current = current.cause;
    if (current instanceof Error && current.message) {
      const type = (current as Error & { type?: string }).type;
      text = type ? `${type}: ${current.message}` : current.message;
    }
  }
  return text;
}
