// Every patch id the workflows ask `patched()` about, in one place: the day it came in and what its
// new branch changed. A workflow imports the constant; no id is written inline (a unit test holds
// that: test/unit/patches.test.ts). docs/workflows.md ("Patches") states how a patch retires:
// `deprecatePatch` once no open execution and no kept history needs its old branch, then removed
// a release later. `PATCH_LOG` below is the register the docs and the retirement tool read.

import { deprecatePatch, patched } from '@temporalio/workflow';

export interface PatchEntry {
  /** the marker id Temporal records */
  id: string;
  /** the day the patch came in (its commit) */
  since: string;
  /** what its new branch does that runs before it did not */
  change: string;
  /** the day its old branch was removed (`deprecated()` asks it), when it was */
  deprecatedSince?: string;
}

const patch = (id: string, since: string, change: string, deprecatedSince?: string): PatchEntry => ({ id, since, change, ...(deprecatedSince ? { deprecatedSince } : {}) });

// (one constant per patch, oldest first)

export const RECONCILE_MARKER_AFTER_CHILDREN = 'reconcile-marker-after-children';
export const STREAM_REPLAN = 'stream-replan';
export const SCALEGATE_OUTCOME = 'scalegate-outcome';
export const LEDGER_AFTER_COMPENSATION = 'ledger-after-compensation';
export const WRONG_WAY_REFUSED = 'wrong-way-refused';
export const RESCALE_PLAN_FAILURE_REPLANS = 'rescale-plan-failure-replans';
export const STREAM_REPLAN_STOPS_AGAIN = 'stream-replan-attempts';
export const COMPENSATE_WAITS_FOR_RUNNING_REPLAN = 'compensate-waits-for-running-replan';
export const SCALE_IN_STALE_REFUSED = 'scale-in-stale-refused';
export const APPLY_APPROVED_PLAN = 'apply-approved-plan';
export const RETIRE_CLEAR_FIRST = 'retire-clear-first';
export const TIER_RULES = 'tier-rules';
export const APPLY_PLAN_STALE_REFUSED = 'apply-plan-stale-refused';
export const SPEC_OF_THE_BASIS = 'spec-of-the-basis';
export const STREAM_REPLAN_WAITS_FOR_ROOM = 'stream-replan-waits-for-room';
export const FEWER_ROUND_TRIPS = 'fewer-round-trips';
export const LATENCY_JUDGED = 'latency-judged';
export const RESOURCES_AND_BACKLOG_JUDGED = 'resources-and-backlog-judged';
export const UNKNOWN_DOWNSTREAM_REFUSED = 'unknown-downstream-refused';
export const REPLAN_PLACES_AGAIN = 'replan-attempts';
export const STREAM_RESIZE_WAITS_FOR_ROOM = 'stream-resize-waits-for-room';
export const RECOVERY_REPLAN_CANCELLED_BY_HAND = 'recovery-replan-cancelled-by-hand';
export const EVIDENCE_JUDGED = 'evidence-judged';
export const ADMISSION_BY_RECORDED_START = 'admission-by-recorded-start';
export const BASELINE_TASKS_READY = 'baseline-tasks-ready';
export const ERROR_RATE_TESTED = 'error-rate-tested';
export const KUBERNETES_RUNTIME = 'kubernetes-runtime';
export const PREPARE_ENDS_BEFORE_RESUME = 'rescale-prepare-ends-before-resume';
export const JOINED_REPLAN_JUDGED = 'rescale-joined-replan-judged';
export const RESCALE_NO_ROOM_REFUSED = 'rescale-no-room-refused';
export const JOINED_REPLAN_REFUSED = 'rescale-joined-replan-refused';
export const THROUGHPUT_TESTED = 'throughput-tested';
export const KUBERNETES_MANUAL_APPROVAL = 'kubernetes-manual-approval';
export const RESCALE_JOINS_ENDED_REPLAN = 'rescale-joins-ended-replan';
export const RESCALE_JOINS_ONLY_ITS_WINDOW = 'rescale-joins-only-its-window';
export const REPLAN_FINISHES_ONCE_BEGUN = 'replan-finishes-once-begun';
export const KUBERNETES_METRICS_JUDGED = 'kubernetes-metrics-judged';
export const ROLLOUT_STOPS_REPLACED = 'rollout-stops-replaced';
export const REPLAN_CANCELLATION_LEDGERED = 'replan-cancellation-ledgered';
export const DRAIN_TASKS_NAMED = 'drain-tasks-named';
export const INPUT_CHECKED_BY_WORKER = 'input-checked-by-worker';
export const RECONCILE_WAKE = 'reconcile-wake';

export const PATCH_LOG: readonly PatchEntry[] = [
  patch(RECONCILE_MARKER_AFTER_CHILDREN, '2026-11-30', "reconcile writes its skip marker after the applies it started, so a pass interrupted in between is redone, not skipped; before, inside the pass"),
  patch(STREAM_REPLAN, '2026-12-01', 'stopTheWorldReplan loads the workload first, to replan a stream job from its last completed checkpoint; before stream jobs existed it did not'),
  patch(SCALEGATE_OUTCOME, '2026-12-01', "every operation ends with ScalegateOutcome (the API's status word) and its reason in its current details, for the Web UI"),
  patch(LEDGER_AFTER_COMPENSATION, '2026-12-01', "a compensated operation's ledger row is appended after the replan, with the replan's outcome; before, ahead of it"),
  patch(WRONG_WAY_REFUSED, '2026-12-01', 'a scale whose size moved before it ran (the request now points the other way) is refused, nothing changed; before, it failed', '2026-12-04'),
  patch(RESCALE_PLAN_FAILURE_REPLANS, '2026-12-01', "a rescale whose preparation failed for a reason other than the request (an agent not answering, the store away) is replanned at the asked parallelism; before, it failed", '2026-12-04'),
  patch(STREAM_REPLAN_STOPS_AGAIN, '2026-12-01', 'a stream replan whose new generation could not start stops the world again, up to its attempts; before, one attempt', '2026-12-04'),
  patch(COMPENSATE_WAITS_FOR_RUNNING_REPLAN, '2026-12-01', 'a compensation that finds a replan of the workload running waits for it (about 10 minutes at most); before, it failed', '2026-12-04'),
  patch(SCALE_IN_STALE_REFUSED, '2026-12-01', 'a scale-in whose victims were chosen on a placement another change then wrote is refused as stale (chaos seed 14); before, failed', '2026-12-04'),
  patch(APPLY_APPROVED_PLAN, '2026-12-01', 'a manual approval applies the plan that was approved; before, it planned again after the approval'),
  patch(RETIRE_CLEAR_FIRST, '2026-12-01', 'retireWorkload clears the placement first, then stops the tasks, so an agent away revokes them on its return; before, stop then clear'),
  patch(TIER_RULES, '2026-12-01', "a scale-in holds its tier's rules (minReplicas, change windows) too; before, only the autoscaler did"),
  patch(APPLY_PLAN_STALE_REFUSED, '2026-12-01', 'an applyPlan another change wrote the placement ahead of is refused as stale (chaos seed 15); before, failed'),
  patch(SPEC_OF_THE_BASIS, '2026-12-01', 'tasks start with the spec the plan was made on, read before the fenced write (chaos seed 11); before, read after it'),
  patch(STREAM_REPLAN_WAITS_FOR_ROOM, '2026-12-01', 'a stream replan short of runtimes (agents away, chaos seed 7) waits about two minutes for room before it gives up; before, gave up at once', '2026-12-04'),
  patch(FEWER_ROUND_TRIPS, '2026-12-02', "the store's short calls run as local activities and independent activities side by side: fewer workflow tasks, the same activities"),
  patch(LATENCY_JUDGED, '2026-12-02', "a service's latency (p50, p95) is compared with the baseline after a scale-out; before, not judged", '2026-12-04'),
  patch(RESOURCES_AND_BACKLOG_JUDGED, '2026-12-02', "a scale-out judges the backlog and the largest task's memory, and its CPU after a long enough soak; before, not judged", '2026-12-04'),
  patch(UNKNOWN_DOWNSTREAM_REFUSED, '2026-12-02', 'a contract with no downstream is unknown and refused, naming what to declare; before, the unknown passed'),
  patch(REPLAN_PLACES_AGAIN, '2026-12-02', 'a replan whose new generation could not start (an agent died meanwhile, chaos seed 6) places anew, up to three attempts; before, one', '2026-12-04'),
  patch(STREAM_RESIZE_WAITS_FOR_ROOM, '2026-12-02', "a compensating stream replan whose resize does not fit yet waits for room (chaos seeds 11, 64); before, failed", '2026-12-04'),
  patch(RECOVERY_REPLAN_CANCELLED_BY_HAND, '2026-12-02', 'a recovery whose replan an operator cancelled by hand ends cancelled, naming the replan (chaos seed 33); before, failed', '2026-12-04'),
  patch(EVIDENCE_JUDGED, '2026-12-03', 'every evidence row can fail: receipts balanced per partition, a task not measured is `not measured`, latency tested over both windows, a failed scale-in comparison compensates'),
  patch(ADMISSION_BY_RECORDED_START, '2026-12-03', "admission is judged by the time Temporal recorded the start; before, by the first workflow task's time, which lags when workers are busy", '2026-12-04'),
  patch(BASELINE_TASKS_READY, '2026-12-03', "the baseline gate judges the baseline's tasks too (a crash-looping or unready task refuses the scale-out, named); before, its errors only", '2026-12-04'),
  patch(ERROR_RATE_TESTED, '2026-12-03', 'errors are judged as a rate per record processed, by an exact test at a 10 % margin; before, any new error was a regression'),
  patch(KUBERNETES_RUNTIME, '2026-12-03', 'a workload naming a Kubernetes object is scaled through the Kubernetes runtime port (asked only for such a workload)', '2026-12-04'),
  patch(PREPARE_ENDS_BEFORE_RESUME, '2026-12-03', "a rescale aborted while preparing waits for planRescale to end before it resumes the clock; before, the clock could stay paused", '2026-12-04'),
  patch(JOINED_REPLAN_JUDGED, '2026-12-03', 'a rescale that joined a replan which applied another parallelism ends failed or compensated, naming both; before, `replanned`', '2026-12-04'),
  patch(RESCALE_NO_ROOM_REFUSED, '2026-12-03', 'a rescale the fleet has no room for is refused, nothing changed; before, it replanned and failed in the resize', '2026-12-04'),
  patch(JOINED_REPLAN_REFUSED, '2026-12-04', 'such a joined rescale whose own layout was never written ends refused (superseded), not failed'),
  patch(THROUGHPUT_TESTED, '2026-12-04', "throughput is judged (records per second, Mann-Whitney U at a 10 % margin while both windows end behind); before, no row"),
  patch(KUBERNETES_MANUAL_APPROVAL, '2026-12-04', 'a Kubernetes scale-out with approval "manual" waits for the approval after its gates, then writes the size; before, it was refused (asked only on that path)'),
  patch(RESCALE_JOINS_ENDED_REPLAN, '2026-12-04', "a rescale whose window a replan of the job ended meanwhile (a recovery's, at the requested parallelism) takes that replan as its compensation; before, it stopped the world a second time (partitions.test)"),
  patch(RESCALE_JOINS_ONLY_ITS_WINDOW, '2026-12-04', "a rescale joins (running or ended) only a replan that began after its window opened; one that began before is waited for, then the rescale replans itself (network chaos seed 48); before, it joined it"),
  patch(REPLAN_FINISHES_ONCE_BEGUN, '2026-12-04', 'a replan cancelled after its first stop finishes (placed, converged, ledgered, the cancellation noted) instead of leaving the world stopped (network chaos seed 42); before, it ended there'),
  patch(KUBERNETES_METRICS_JUDGED, '2026-12-04', "a Kubernetes scale-out reads the metrics its contract names from the pods before the write and after the soak, and judges them; before, the app's figures were not judged (asked only for a workload naming metrics)"),
  patch(ROLLOUT_STOPS_REPLACED, '2026-12-04', "a rollout rolled back after a step whose new replica never became ready stops the old replicas that step replaced (held by no placement); before, they ran until their agents' next heartbeat revoked them (asked only when there are such)"),
  patch(REPLAN_CANCELLATION_LEDGERED, '2026-12-04', 'a replan cancelled before its first stop writes its ledger row, `cancelled`, in a scope the cancellation does not cut; before, the row was asked for in the cancelled scope and none was written (asked only on that path)'),
  patch(DRAIN_TASKS_NAMED, '2026-12-04', "the drain is scheduled as activity `drainTasks`, the name it has below (the agent client's drainTask, the agent's DELETE /v1/tasks/:id); before, as `stopTasks`, which the worker registers too while this patch's old branch lives (asked only where a drain is scheduled)"),
  patch(INPUT_CHECKED_BY_WORKER, '2026-12-05', "scaleOut, scaleIn, applyPlan, stopTheWorldReplan and recoverRuntime have their input checked by the worker (local activity checkWorkflowInput), so their runs evaluate no zod; before, each run built the schemas and checked it inline (same schemas, same message)"),
  patch(RECONCILE_WAKE, '2026-12-05', "reconcile takes the signal `wake` (the API's, after a workload PUT or a runtime's registration): the interval's timer is cancelled and the next pass runs; before, the signal had no handler and the timer ran out (a run recorded before the patch ignores a wake as it did)"),
];

const DEPRECATED = new Set(PATCH_LOG.filter((entry) => entry.deprecatedSince).map((entry) => entry.id));

/**
 * The one way a workflow asks about a patch. A live patch is `patched()`. A deprecated one (its
 * entry has `deprecatedSince`) is `deprecatePatch()`, asked exactly where `patched()` stood, so runs
 * that recorded its marker there replay as before and new runs record it there, marked deprecated;
 * it answers the new branch always, so its old branch is dead code until its call is removed, a
 * release later, with that branch.
 */
export function askPatch(id: string): boolean {
  if (DEPRECATED.has(id)) {
    deprecatePatch(id);
    return true;
  }
  return patched(id);
}
