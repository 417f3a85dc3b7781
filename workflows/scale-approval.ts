// A scale-out's manual approval (DESIGN.md §4.1): the approve and reject Updates (validated: taken
// only while the operation awaits a decision), the Web UI's details line while it waits, and the
// wait, which ends the operation `cancelled` on an abort and `rejected` on a no or no answer in time.
import { condition, defineUpdate, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { GateReport } from '../domain/gates';
import type { Plan } from '../domain/plan';
import { runtimesOf } from './operation';
import type { ScaleOperation, ScaleStatus } from './scale-operation';

export interface DecisionArgs {
  by?: string;
}
export const approveUpdate = defineUpdate<ScaleStatus, [DecisionArgs]>('approve');
export const rejectUpdate = defineUpdate<ScaleStatus, [DecisionArgs]>('reject');

/** Takes the approve and reject Updates: a decision is refused unless the operation awaits one. */
export function handleApproval(status: ScaleStatus): void {
  const decide = (decision: 'approved' | 'rejected', by?: string) => {
    status.approval.decision = decision;
    status.approval.by = by ?? 'operator';
    return status;
  };
  const awaitingApproval = () => {
    if (status.phase !== 'awaiting-approval' || status.approval.decision !== null) {
      throw new Error(`nothing to approve: the operation is ${status.phase}`);
    }
  };
  setHandler(approveUpdate, (args: DecisionArgs) => decide('approved', args?.by), { validator: (_args: DecisionArgs) => awaitingApproval() });
  setHandler(rejectUpdate, (args: DecisionArgs) => decide('rejected', args?.by), { validator: (_args: DecisionArgs) => awaitingApproval() });
}

/** The Web UI's details line while a change waits for approval: the proposal and the gates, to review before approving. */
export function approvalDetails(workload: string, from: number, plan: Pick<Plan, 'starts' | 'stops' | 'moves' | 'warnings' | 'target'>, gates: GateReport | null): string {
  const where = (list: { runtimeId: string }[]) => (list.length ? ` on ${runtimesOf(list)}` : '');
  return [
    `scale ${workload} ${from} → ${plan.target.length}: **awaiting approval** (approve: POST /v1/operations/scale:${workload}/approve)`,
    `plan: ${plan.starts.length} start(s)${where(plan.starts)}, ${plan.stops.length} stop(s)${where(plan.stops)}, ${plan.moves.length} move(s)`,
    `gates: ${gates ? gates.rows.map((r) => `${r.gate} ${r.passed ? 'ok' : 'FAILED'}`).join(', ') : 'not evaluated'}`,
    ...(plan.warnings.length ? [`warnings: ${plan.warnings.join('; ')}`] : []),
  ].join('\n\n');
}

/**
 * Waits in phase `awaiting-approval`, `details` in the Web UI, for the decision (at most
 * `timeoutMs`; `summary`: the timer's): it returns once the change is approved; an abort ends the
 * operation `cancelled`, a rejection or no decision in time `rejected`.
 */
export async function awaitApproval(op: ScaleOperation, details: string, timeoutMs: number, summary?: string): Promise<void> {
  const { status, aborts } = op;
  op.enter('awaiting-approval');
  setCurrentDetails(details);
  const answered = () => status.approval.decision !== null || aborts.reason !== null;
  const decided = await (summary === undefined ? condition(answered, timeoutMs) : condition(answered, timeoutMs, { summary }));
  if (aborts.reason) return op.cancel(aborts.reason);
  if (!decided || status.approval.decision !== 'approved') {
    return op.reject(decided ? `rejected by ${status.approval.by}` : 'no approval in time');
  }
}
