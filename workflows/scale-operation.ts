// What scaleOut and scaleIn share: the status they expose (the `status` query, read by
// GET /v1/operations/:id), the abort signal, ledger rows, and the compensation through the
// stop-the-world replan.
import { ApplicationFailure, defineQuery, setHandler, workflowInfo } from '@temporalio/workflow';
import type { EvidenceComparison, EvidenceSnapshot } from '../domain/evidence';
import type { GateReport } from '../domain/gates';
import type { Plan } from '../domain/plan';
import type { ScaleInDecision } from '../domain/scale-in';
import type { Workload, LedgerOutcome } from '../protocol';
import { failureMessage, handleAborts, quickStore, trackOperation } from './operation';
import type { PlacementOutcome } from './apply-placement';
import { compensate } from './stop-the-world-replan';
import { describeObject, kubernetesRefOf, type KubernetesRead, type KubernetesStatus } from './kubernetes-runtime';
import { FEWER_ROUND_TRIPS, KUBERNETES_RUNTIME, LEDGER_AFTER_COMPENSATION, WRONG_WAY_REFUSED, askPatch } from './patches';

/**
 * How a scale operation ended (DESIGN.md §4 "Exits"): `refused` (a gate failed), `rejected` (a
 * manual approval said no, or none came in time) and `cancelled` (an abort or a Temporal
 * cancellation before the first change) changed nothing; `compensated` ran the replan after a
 * change; `failed` carries the reason.
 */
export type OperationOutcome = 'running' | 'completed' | 'refused' | 'compensated' | 'rejected' | 'cancelled' | 'failed';

export interface ScaleStatus {
  kind: 'scaleOut' | 'scaleIn';
  workload: string;
  phase: string;
  outcome: OperationOutcome;
  fromReplicas: number | null;
  toReplicas: number;
  gates: GateReport | null;
  evidenceGap: string | null;
  plan: (Pick<Plan, 'starts' | 'stops' | 'moves' | 'warnings' | 'basis' | 'target'> & { id: string }) | null;
  baseline: EvidenceSnapshot | null;
  after: EvidenceSnapshot | null;
  comparison: EvidenceComparison | null;
  approval: { mode: 'auto' | 'manual'; decision: 'approved' | 'rejected' | null; by: string | null };
  /** scaleIn: victims and why, partition hand-overs, drain receipts, proof that the removed own nothing */
  scaleIn: (Omit<ScaleInDecision, 'survivors'> & { receipts: unknown[]; confirmation: unknown; forced?: string[] }) | null;
  compensation: { reason: string; replicas: number; outcome: PlacementOutcome | null } | null;
  /** scaleOut: when the soak ends (workflow time, ISO-8601), set on entering it */
  soakEndsAt?: string | null;
  /** a stepped scaleOut: each size it grows through, its evidence after, and its verdict */
  steps?: ScaleStep[] | null;
  /** scaleIn: the tier rules it would break, and the override reason that let it past them */
  tierRules?: { violations: string[]; override: string | null } | null;
  /** a Kubernetes workload's operation: the object, the drain handshake, what the cluster deleted */
  kubernetes?: KubernetesStatus | null;
  error: string | null;
}

export interface ScaleStep {
  size: number;
  outcome: 'pending' | 'good' | 'regression';
  after: EvidenceSnapshot | null;
  reasons: string[];
}

export const statusQuery = defineQuery<ScaleStatus>('status');

/** What the status shows of a plan: its changes, warnings, basis and target. */
export const planView = (plan: Plan & { id: string }): NonNullable<ScaleStatus['plan']> => ({
  id: plan.id, starts: plan.starts, stops: plan.stops, moves: plan.moves, warnings: plan.warnings, basis: plan.basis, target: plan.target,
});

/**
 * A stored plan given as `planId` must be for this workload and this size: a start by hand
 * (temporal workflow start) that names another workload's plan fails, non-retryably, before any change.
 */
export function requirePlanFor(plan: Plan & { id: string }, workload: string, replicas: number): void {
  if (plan.workload !== workload || plan.target.length !== replicas) {
    throw ApplicationFailure.create({
      type: 'invalid-input', nonRetryable: true,
      message: `plan ${plan.id} is for ${plan.workload} at ${plan.target.length} replica(s), not ${workload} at ${replicas}`,
    });
  }
}
export { abortSignal } from './operation';

export interface ScaleRequest {
  workload: string;
  replicas: number;
  reason: string;
  approval?: 'auto' | 'manual';
  convergeTimeoutMs: number;
}

/** Loads the workload, registers the status query and the abort signal, and returns the helpers. */
export async function beginScaleOperation(kind: ScaleStatus['kind'], input: ScaleRequest) {
  const { workflowId, runId } = workflowInfo();
  const fewerRoundTrips = askPatch(FEWER_ROUND_TRIPS);
  const shortCalls = quickStore();
  const loadWorkload = () => shortCalls.loadWorkload.executeWithOptions({ summary: `load workload ${input.workload}` }, [input.workload]);
  const loadPlacement = () => shortCalls.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
  // Side by side since FEWER_ROUND_TRIPS (a placement read for a missing workload is harmless).
  const [workload, preloadedPlacement] = fewerRoundTrips ? await Promise.all([loadWorkload(), loadPlacement()]) : [await loadWorkload(), undefined];
  if (!workload || workload.retired) {
    throw ApplicationFailure.create({ type: 'not-found', message: `${kind}: no active workload ${input.workload}`, nonRetryable: true });
  }
  // A Kubernetes workload's size is its object's (its pods are the cluster's to place): read once
  // here, since patch KUBERNETES_RUNTIME, asked only for such a workload.
  const ref = kubernetesRefOf(workload as Workload);
  const kubernetes: KubernetesRead | null = ref && askPatch(KUBERNETES_RUNTIME)
    ? await shortCalls.kubernetesObject.executeWithOptions({ summary: `read ${describeObject(ref)}` }, [{ workload: input.workload }])
    : null;
  const placement = kubernetes ? null : preloadedPlacement === undefined ? await loadPlacement() : preloadedPlacement;
  const from = kubernetes ? kubernetes.object.replicas : placement?.assignments.length ?? 0;
  const wrongWay = (kind === 'scaleOut' ? input.replicas <= from : input.replicas >= from)
    ? `replicas ${input.replicas} is not ${kind === 'scaleOut' ? 'above' : 'below'} the current ${from}; use ${kind === 'scaleOut' ? 'scaleIn' : 'scaleOut'}`
    : null;
  // The size the request was chosen from moved before it ran (another operation, the reconcile
  // loop): a refusal, nothing changed. Runs recorded before `wrong-way-refused` failed instead.
  if (wrongWay && !askPatch(WRONG_WAY_REFUSED)) {
    throw ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `${kind}: ${wrongWay}` });
  }
  const op = trackOperation(kind, input.workload, `scale ${input.workload}${ref && kubernetes ? ` (${describeObject(ref)})` : ''} ${from} → ${input.replicas}`);
  const status: ScaleStatus = {
    kind, workload: input.workload, phase: op.phase, outcome: 'running', fromReplicas: from, toReplicas: input.replicas,
    gates: null, evidenceGap: null, plan: null, baseline: null, after: null, comparison: null,
    approval: { mode: input.approval ?? 'auto', decision: null, by: null }, scaleIn: null, compensation: null, error: null,
  };
  setHandler(statusQuery, () => status);
  const aborts = handleAborts();

  const enter = (phase: string) => {
    op.enter(phase);
    status.phase = phase;
  };
  // Ledger rows are part of the exit: a cancellation arriving meanwhile does not cut them.
  const ledger = (outcome: LedgerOutcome, reason: string, extra: Record<string, unknown> = {}) => aborts.exit(() =>
    shortCalls.appendLedger.executeWithOptions({ summary: `ledger: ${kind} ${input.workload} ${from} → ${input.replicas} ${outcome}` }, [{
      kind: kind === 'scaleOut' ? 'scale-out' : 'scale-in', workload: input.workload, fromReplicas: from, toReplicas: input.replicas,
      reason, outcome, planId: status.plan?.id ?? null, workflowId, runId,
      inputs: { request: input.reason, approval: status.approval.mode, gates: status.gates?.rows ?? null, ...(status.tierRules ? { tierRules: status.tierRules } : {}), ...extra },
      evidence: status.comparison || status.scaleIn
        ? { baseline: status.baseline, after: status.after, comparison: status.comparison, scaleIn: status.scaleIn }
        : null,
    }]));
  /**
   * The one compensation: the stop-the-world replan as a child, at `replicas`, in a scope no
   * cancellation cuts. Its ledger row follows the replan's outcome (runs recorded before
   * `ledger-after-compensation` wrote it first); a replan that fails ends the operation `failed`.
   */
  const compensateAt = (replicas: number, reason: string): Promise<ScaleStatus> => aborts.exit(async () => {
    enter('compensating');
    status.compensation = { reason, replicas, outcome: null };
    const ledgerAfter = askPatch(LEDGER_AFTER_COMPENSATION);
    if (!ledgerAfter) await ledger('compensated', reason, { compensationReplicas: replicas });
    try {
      status.compensation.outcome = await compensate(input.workload, Math.max(1, replicas), reason, input.convergeTimeoutMs);
    } catch (error) {
      if (!ledgerAfter) throw error;
      status.outcome = 'failed';
      status.error = `compensation failed: ${failureMessage(error)}`;
      enter('failed');
      await ledger('failed', `${reason}; ${status.error}`, { compensationReplicas: replicas });
      throw error;
    }
    status.outcome = 'compensated';
    enter('compensated');
    if (ledgerAfter) await ledger('compensated', reason, { compensationReplicas: replicas, generation: status.compensation.outcome.generation });
    return status;
  });
  /** Ends the operation without a change (refused, rejected, cancelled): phase, outcome, one ledger row. */
  const endUnchanged = (outcome: 'refused' | 'rejected' | 'cancelled', phase: 'refused' | 'rejected' | 'cancelled' | 'stale-plan', reason: string): Promise<ScaleStatus> => aborts.exit(async () => {
    status.outcome = outcome;
    if (outcome === 'cancelled') status.error = reason;
    enter(phase);
    await ledger(phase, reason);
    return status;
  });
  /** An abort (signal or Temporal cancellation) before the first change: `cancelled`, nothing changed. Anything else is rethrown. */
  const cancelledOr = (error: unknown): Promise<ScaleStatus> => {
    if (aborts.isAbort(error)) return endUnchanged('cancelled', 'cancelled', aborts.reason!);
    throw error;
  };
  /** Fails the operation before any change: phase and outcome `failed`, one ledger row, then rethrows. */
  const failUnchanged = async (error: unknown): Promise<never> => {
    status.outcome = 'failed';
    status.error = failureMessage(error);
    enter('failed');
    await ledger('failed', status.error);
    throw error;
  };
  return { workload: workload as Workload, placement, from, status, aborts, enter, ledger, compensateAt, endUnchanged, cancelledOr, failUnchanged, wrongWay, fewerRoundTrips, kubernetes };
}
