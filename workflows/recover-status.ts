// What a recoverRuntime is asked and what it reports: its input, its status (the `status` query
// GET /v1/operations/recover:<runtime> reads) and its ledger row, made from that status.
import { defineQuery } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { WorkloadRecovery } from '../domain/recovery';
import type { ReplicaCount } from '../protocol/names';
import type { PlacementOutcome } from './apply-placement';

export type { RecoverRuntimeInput } from '../protocol/workflow-inputs';

/** `cancelled`: an abort or a Temporal cancellation before any placement moved (the runtime stays LOST). */
export type RecoveryOutcome = 'running' | 'completed' | 'degraded' | 'not-needed' | 'compensated' | 'rejected' | 'cancelled' | 'failed';

/** One workload's decision, as it is carried out. */
export interface RecoveryDecisionStatus extends WorkloadRecovery {
  planId: string | null;
  /** where its apply is: writing-placement, starting-tasks, converging, converged, ... */
  phase: string;
  applied: 'pending' | 'converged' | 'skipped' | 'failed' | 'cancelled' | 'compensated' | 'replanned';
  /** whether this recovery wrote its placement */
  committed: boolean;
  attempts: number;
  error: string | null;
}

export interface RecoveryStatus {
  kind: 'recoverRuntime';
  runtime: string;
  by: 'operator' | 'lease-sweeper';
  reason: string;
  phase: string;
  outcome: RecoveryOutcome;
  /** the declaration: declared now, or already LOST (or came back), with the fence it is LOST under */
  lost: { outcome: 'declared' | 'already-lost' | 'came-back'; fence: number; lostAt: string | null } | null;
  decisions: RecoveryDecisionStatus[];
  compensation: { reason: string; workloads: { workload: string; replicas: ReplicaCount; outcome: PlacementOutcome | null }[] } | null;
  error: string | null;
  /** workflow time (ISO-8601): started, declared LOST (the store's clock), decided, converged, ended */
  timings: { startedAt: string; lostAt: string | null; decidedAt: string | null; convergedAt: string | null; endedAt: string | null };
}

/** GET /v1/operations/recover:<runtime> reads it (same name as the scale operations' `status`). */
export const recoveryStatusQuery = defineQuery<RecoveryStatus>('status');

/** The recovery's ledger row (`recover`): the replicas it lost and placed elsewhere, each decision, the timings. */
export function recoveryRow(status: RecoveryStatus, reason: string): Omit<Parameters<Activities['appendLedger']>[0], 'outcome'> {
  const lostReplicas = status.decisions.reduce((n, d) => n + d.storedOwner.tasks.length, 0);
  const placedElsewhere = status.decisions.reduce((n, d) => n + d.decisions.filter((r) => r.to !== null).length, 0);
  return {
    kind: 'recover', workload: null, fromReplicas: lostReplicas, toReplicas: placedElsewhere,
    reason: `${status.by}: ${reason}`,
    inputs: {
      runtime: status.runtime, by: status.by, request: status.reason, lost: status.lost,
      decisions: status.decisions.map((d) => ({
        workload: d.workload, kind: d.kind, summary: d.summary, planId: d.planId, applied: d.applied, unplaced: d.unplaced,
        replicas: d.decisions.map((r) => ({ index: r.index, lostTaskId: r.lostTaskId, action: r.action, to: r.to, partitions: r.partitions, handedTo: r.handedTo })),
        warnings: d.warnings,
      })),
    },
    evidence: { timings: status.timings, compensation: status.compensation, error: status.error },
  };
}
