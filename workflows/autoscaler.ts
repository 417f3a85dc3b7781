// autoscaler (DESIGN.md §4.6): one long-lived workflow per tier, id `autoscale:<tier>`, driven by
// `observe` signals (load observations) and `policy` signals (a new policy revision). It keeps a
// bounded window of observations and decides on the newest one: desired per signal, the largest
// wins, tolerance, stabilization, change windows, cooldown and max step (domain/autoscale.ts, pure).
// A change runs as a scaleOut / scaleIn CHILD under the workload's `scale:<name>` id, so the gates,
// drains and compensation are the operator's, and Temporal itself refuses a second operation on a
// busy workload (the autoscaler then waits and says so). Every decision is an `autoscale` ledger
// row; identical "no change" rows are written at most once per max(cooldown, 60 s). Signals that
// arrive during an operation are kept and the next decision takes the newest. A policy may also
// have the workflow pull a workload's Kafka lag every interval (policy.observe.kafkaLag): each
// reading is an observation like a signal's, as queueDepth. The workflow continues as new after
// `decisionsPerRun` decisions or `maxHistoryEvents` events, once every handler has finished.
// This file is the Temporal shell; the state it carries and what each event does to it are
// domain/autoscaler-state.ts' and domain/autoscaler-decisions.ts' (pure).
import {
  allHandlersFinished, ApplicationFailure, condition, continueAsNew, defineQuery, defineSignal, defineUpdate, isCancellation, log, ParentClosePolicy, proxyActivities,
  setHandler, startChild, workflowInfo, WorkflowIdReusePolicy, type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { beginRound, decide, operationEnded, started, waitFor, type AutoscalerCode, type ChildEnd, type StartPlan, type Verdict } from '../domain/autoscaler-decisions';
import {
  AutoscalerState, observationProblem, policyProblem, type AutoscalerCarried, type AutoscalerStatus, type DecisionRecord, type ObserveAnswer, type PolicyAnswer, type PolicyUpdate,
} from '../domain/autoscaler-state';
import { TierName, TierPolicySchema } from '../protocol/tiers';
import { failureMessage, parseInput, profiles, quickStore, trackOperation } from './operation';
import { rescaleOperator } from './rescale-operator';
import { scaleIn } from './scale-in';
import { scaleOut } from './scale-out';

export { domainPolicy, OBSERVATION_WINDOW, REPEAT_NO_CHANGE_MS } from '../domain/autoscaler-state';
export type { AutoscalerCarried, AutoscalerStatus, DecisionRecord, Observation, ObserveAnswer, PolicyAnswer, PolicyUpdate, PullState, RunningOperation } from '../domain/autoscaler-state';

const observations = proxyActivities<Activities>(profiles.observation);
const CHILDREN = { scaleOut, scaleIn, rescaleOperator };
type ChildHandle = ChildWorkflowHandle<(typeof CHILDREN)[StartPlan['workflow']]>;

export const AutoscalerInputSchema = z.object({
  tier: TierName,
  policy: TierPolicySchema,
  revision: z.int().min(0).default(0),
  /** continue-as-new after this many history events (well below Temporal's 51,200) */
  maxHistoryEvents: z.int().min(200).max(40_000).default(1_000),
  /** … or after this many decision rounds */
  decisionsPerRun: z.int().min(1).max(10_000).default(100),
  /** state carried across continue-as-new (internal) */
  carried: z.custom<AutoscalerCarried>((v) => v === undefined || (typeof v === 'object' && v !== null)).optional(),
});
export type AutoscalerInput = z.input<typeof AutoscalerInputSchema>;

export const observeSignal = defineSignal<[unknown]>('observe');
export const policySignal = defineSignal<[PolicyUpdate]>('policy');
/**
 * The same two as Updates, for a sender that wants to know: a validator refuses a bad observation
 * or policy to its sender (the signals can only count and log it), and an accepted one answers
 * what the autoscaler now holds. Signals stay for fire-and-forget pushes (the API's, an agent's):
 * they need no worker to be up to be taken.
 */
export const observeUpdate = defineUpdate<ObserveAnswer, [unknown]>('observe');
export const policyUpdate = defineUpdate<PolicyAnswer, [PolicyUpdate]>('policy');
export const autoscalerStatusQuery = defineQuery<AutoscalerStatus>('status');

/** The ledger's word for each decision (api/metrics.ts maps the words back to the codes; metric-labels.test reads them here). */
const LABEL: Record<Exclude<AutoscalerCode, 'refused'>, string> = {
  'scale-out': 'scale-out', 'scale-in': 'scale-in',
  'within-tolerance': 'no-change: within tolerance', 'at-desired': 'no-change: at desired size', stabilizing: 'no-change: stabilizing',
  'change-window': 'no-change: change window', cooldown: 'no-change: cooldown', 'no-observation': 'no-change: no observation',
  'not-active': 'no-change: workload not active', 'backing-off': 'no-change: backing off after a refusal',
  bounded: 'no-change: bounded', 'operation-running': 'no-change: operation running',
};
const labelled = ({ code, detail, decision }: Verdict): DecisionRecord =>
  code === 'refused' ? { ...decision, label: `refused: ${detail}`.slice(0, 300) } : { ...decision, label: LABEL[code] };

/** An Update validator's refusal: the sender sees it; nothing is recorded. */
function refuse(problem: string | null): void {
  if (problem !== null) throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: problem });
}

export async function autoscaler(rawInput: unknown): Promise<never> {
  const input = parseInput(AutoscalerInputSchema, rawInput, 'autoscaler');
  const { tier } = input;
  const state = new AutoscalerState(input);
  const op = trackOperation('autoscale', null, `autoscale ${tier}`);
  const enter = (phase: string) => {
    if (op.phase !== phase) op.enter(phase);
  };

  setHandler(observeSignal, (raw: unknown) => {
    const rejected = state.signal(raw, Date.now());
    if (rejected) log.warn('autoscaler: ignoring an invalid observation', { tier, problem: rejected.problem });
  });
  setHandler(observeUpdate, (raw: unknown): ObserveAnswer => state.observe(raw, Date.now()), { validator: (raw: unknown) => refuse(observationProblem(raw)) });
  const applyPolicy = (update: PolicyUpdate): boolean => {
    const applied = state.applyPolicy(update);
    if (applied === null) log.warn('autoscaler: ignoring an invalid policy', { tier });
    return applied === true;
  };
  setHandler(policySignal, (update: PolicyUpdate) => void applyPolicy(update));
  setHandler(policyUpdate, (update: PolicyUpdate): PolicyAnswer => ({ applied: applyPolicy(update), revision: state.revision }), {
    validator: (update: PolicyUpdate) => refuse(policyProblem(update)),
  });
  setHandler(autoscalerStatusQuery, (): AutoscalerStatus => state.status(op.phase, workflowInfo().historyLength));

  /** Reads the Kafka lag when due (policy.observe.kafkaLag); a failed reading is shown in the status and tried again at the next interval. */
  const pullIfDue = async () => {
    const due = state.pullDue(Date.now());
    if (!due) return;
    try {
      const reading = await observations.observeKafkaLag.executeWithOptions({ summary: `kafka lag of ${due.workload}` }, [{ workload: due.workload }]);
      state.pulled(due.state, reading, Date.now());
    } catch (error) {
      if (isCancellation(error)) throw error; // a cancellation of the autoscaler is not a failed reading
      due.state.error = failureMessage(error);
      log.warn('autoscaler: the Kafka lag could not be read', { tier, workload: due.workload, error: due.state.error });
    }
  };

  /** One ledger row per decision, except an identical "no change" repeated within the repeat interval. */
  const record = async (verdict: Verdict) => {
    const decision = labelled(verdict);
    if (!state.keepRow(verdict.ws, decision, verdict.extra)) return;
    const { workflowId, runId } = workflowInfo();
    await quickStore().appendLedger.executeWithOptions({ summary: `ledger: autoscale ${decision.workload} ${decision.label}` }, [state.ledgerRow(decision, verdict.extra, workflowId, runId)]);
  };

  /** A started child to its end: a refusal is recorded and backed off. */
  const follow = async (plan: StartPlan, handle: ChildHandle) => {
    const end: ChildEnd = { status: null, failure: null };
    try {
      end.status = await handle.result();
    } catch (error) {
      end.failure = failureMessage(error);
    }
    const refusal = operationEnded(state, plan, end, Date.now());
    if (refusal) await record(refusal);
  };

  /** One decision per workload of the tier on the newest observation; changes run as children, awaited together. */
  const decideRound = async () => {
    const newest = state.latest();
    if (!newest) return;
    enter('deciding');
    const sizes = await quickStore().tierSnapshot.executeWithOptions({ summary: `sizes of ${state.policy.workloads.join(', ')}` }, [{ workloads: state.policy.workloads }]);
    const now = Date.now();
    const windows = state.changeIntervals(now);
    const intervals = Array.isArray(windows) ? windows
      : state.keepIntervals(windows, await quickStore().changeWindowIntervals.executeWithOptions({ summary: `expand ${windows.windows.length} change window(s)` }, [windows]));
    const round = beginRound(state, newest, now, intervals);
    const children: Promise<void>[] = [];
    for (const size of sizes) {
      const plan = decide(state, size, round);
      if ('code' in plan) { // no change to make: a verdict to record
        await record(plan);
        continue;
      }
      let handle: ChildHandle;
      try {
        handle = await startChild(CHILDREN[plan.workflow], {
          workflowId: plan.workflowId, parentClosePolicy: ParentClosePolicy.ABANDON, workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
          staticSummary: plan.summary, args: [plan.args],
        });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError')) throw error;
        // Someone else's operation (an operator's, a plan, the reconcile loop) holds the workload: wait for it.
        await record(waitFor(plan, now));
        continue;
      }
      await record(started(state, plan, now));
      children.push(follow(plan, handle));
    }
    if (children.length) {
      enter(state.runningPhase());
      await Promise.all(children);
      state.dirty = true; // the sizes changed: decide again on the newest observation
    }
    state.roundDone();
  };

  for (;;) {
    if (state.shouldContinue(workflowInfo())) {
      enter('continuing as new');
      await condition(allHandlersFinished);
      return continueAsNew<typeof autoscaler>(state.nextRun());
    }
    await pullIfDue();
    enter(state.restingPhase());
    const { wakeAt, pullAt } = state.wake(Date.now());
    if (wakeAt === null) await condition(() => state.dirty);
    else await condition(() => state.dirty, Math.max(1, wakeAt - Date.now()));
    if (!state.dirty && pullAt !== null && Date.now() >= pullAt) continue; // only a pull was due
    state.dirty = false;
    await decideRound();
  }
}
