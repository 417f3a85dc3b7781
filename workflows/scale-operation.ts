// The scale shell: what scaleOut and scaleIn share on top of the operation shell (operation.ts):
// the status they expose (the `status` query, read by GET /v1/operations/:id), their ledger row,
// their exits (refused, rejected, cancelled, failed, completed) and the compensation through the
// stop-the-world replan.
import { ApplicationFailure, defineQuery, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { EvidenceComparison, EvidenceSnapshot } from '../domain/evidence';
import type { GateReport } from '../domain/gates';
import type { Plan } from '../domain/plan';
import type { ScaleInDecision } from '../domain/scale-in';
import { scaleInViolations } from '../domain/tier-rules';
import type { Workload, LedgerOutcome } from '../protocol';
import { beginOperation, failureMessage, profiles, quickStore } from './operation';
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

const store = proxyActivities<Activities>(profiles.storeCall);

/**
 * Loads the workload and begins the operation shell with the status query, the abort signal and
 * the scale's ledger row; a request whose size moved the other way meanwhile is refused here.
 * Returns the shell with the scale's exits.
 */
export async function beginScaleOperation(kind: ScaleStatus['kind'], input: ScaleRequest) {
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
  const status: ScaleStatus = {
    kind, workload: input.workload, phase: 'starting', outcome: 'running', fromReplicas: from, toReplicas: input.replicas,
    gates: null, evidenceGap: null, plan: null, baseline: null, after: null, comparison: null,
    approval: { mode: input.approval ?? 'auto', decision: null, by: null }, scaleIn: null, compensation: null, error: null,
  };
  const shell = beginOperation({
    operation: kind, workload: input.workload, summary: `scale ${input.workload}${ref && kubernetes ? ` (${describeObject(ref)})` : ''} ${from} → ${input.replicas}`,
    status, query: statusQuery,
    ledger: {
      calls: shortCalls, subject: `${kind} ${input.workload} ${from} → ${input.replicas}`,
      row: (reason: string, extra: Record<string, unknown> = {}) => ({
        kind: kind === 'scaleOut' ? 'scale-out' : 'scale-in', workload: input.workload, fromReplicas: from, toReplicas: input.replicas,
        reason, planId: status.plan?.id ?? null,
        inputs: { request: input.reason, approval: status.approval.mode, gates: status.gates?.rows ?? null, ...(status.tierRules ? { tierRules: status.tierRules } : {}), ...extra },
        evidence: status.comparison || status.scaleIn
          ? { baseline: status.baseline, after: status.after, comparison: status.comparison, scaleIn: status.scaleIn }
          : null,
      }),
    },
  });
  const { end, ledger } = shell;

  /** Refused, nothing changed (a gate, a tier rule, a size that moved); `stale-plan`: a plan whose basis moved. */
  const refuse = (reason: string, phase: 'refused' | 'stale-plan' = 'refused') => end({ outcome: 'refused', phase, recorded: phase }, reason);
  /** An abort or a Temporal cancellation before the first change: `cancelled`, nothing changed. */
  const cancel = (reason: string) => end({ outcome: 'cancelled', error: reason }, reason);
  const exits = {
    refuse, cancel,
    /** A plan made on a basis that has moved since, before any change: refused as stale, to plan again. */
    refuseStale: (why: string) => {
      status.evidenceGap = `stale plan: ${why}; plan again`;
      return refuse(status.evidenceGap, 'stale-plan');
    },
    /** A manual approval said no, or none came in time: nothing changed. */
    reject: (reason: string) => end({ outcome: 'rejected' }, reason),
    /** Fails the operation before any change: phase and outcome `failed`, one ledger row, then rethrows. */
    fail: async (error: unknown): Promise<never> => {
      const message = failureMessage(error);
      await shell.record({ outcome: 'failed', error: message }, message);
      throw error;
    },
    /** Done: phase `done`, its row (`completed`, or what `recorded` says). */
    complete: (reason: string, extra: Record<string, unknown> = {}, recorded: LedgerOutcome = 'completed') => end({ outcome: 'completed', phase: 'done', recorded }, reason, extra),
    /** The steps before the first change, in the abort guard: an abort or a cancellation there ends the operation `cancelled`. */
    beforeChange: <T>(steps: () => Promise<T>): Promise<T> => shell.guarded(steps, (abort, error) => {
      if (abort !== null) return cancel(abort);
      throw error;
    }),
    /** A scale-in holds its tier's rules (minReplicas, change windows): refused where it breaks one, unless the request overrides them with a reason. */
    holdTierRules: async (override: { reason: string } | undefined): Promise<void> => {
      const rules = await store.tierRules.executeWithOptions({ summary: `tier rules of ${input.workload}` }, [{ workload: input.workload }]);
      const violations = scaleInViolations(input.replicas, rules);
      status.tierRules = { violations, override: violations.length && override ? override.reason : null };
      if (violations.length && !override) {
        status.evidenceGap = `${violations.join('; ')} (a request with override and a reason may go past it)`;
        return refuse(status.evidenceGap);
      }
    },
    /**
     * The one compensation: the stop-the-world replan as a child, at `replicas`. Its ledger row
     * follows the replan's outcome (runs recorded before `ledger-after-compensation` wrote it first);
     * a replan that fails ends the operation `failed`.
     */
    compensateAt: (replicas: number, reason: string): Promise<never> => {
      const extra = { compensationReplicas: replicas };
      let ledgerAfter = true;
      return shell.compensate(async () => {
        status.compensation = { reason, replicas, outcome: null };
        ledgerAfter = askPatch(LEDGER_AFTER_COMPENSATION);
        if (!ledgerAfter) await ledger('compensated', reason, extra);
        status.compensation.outcome = await compensate(input.workload, Math.max(1, replicas), reason, input.convergeTimeoutMs);
      }, {
        compensated: () => (ledgerAfter ? [reason, { ...extra, generation: status.compensation!.outcome!.generation }] : null),
        failed: (error) => (ledgerAfter ? [`${reason}; ${error}`, extra] : null),
      });
    },
  };
  if (wrongWay) {
    status.error = wrongWay;
    await refuse(wrongWay);
  }
  return { ...shell, ...exits, workload: workload as Workload, placement, from, fewerRoundTrips, kubernetes };
}

/** A scale operation begun: its shell, exits and what it loaded. */
export type ScaleOperation = Awaited<ReturnType<typeof beginScaleOperation>>;
