// The status of each operation type that has one, as GET /v1/operations/:id and the CLI read it:
// one typed query per workflow type, discriminated by `kind` (the workflow type). All are named
// `status`, so `temporal workflow query --type status` reads any of them.
import type { QueryDefinition } from '@temporalio/workflow';
import type { OperationStatusView } from '../protocol';
import { recoveryStatusQuery, type RecoveryStatus } from './recover-runtime';
import { rescaleStatusQuery, type RescaleStatus } from './rescale-operator';
import { rolloutStatusQuery, type RolloutStatus } from './rollout';
import { statusQuery, type ScaleStatus } from './scale-operation';

export type OperationStatus = ScaleStatus | RescaleStatus | RecoveryStatus | RolloutStatus;

// Each workflow's status is the protocol's for its kind (protocol/operation-status.ts): a field
// renamed or retyped on either side fails the compile here.
type Conforms<T extends OperationStatusView> = T;
export type StatusConformance = [Conforms<ScaleStatus>, Conforms<RescaleStatus>, Conforms<RecoveryStatus>, Conforms<RolloutStatus>];

const STATUS_QUERIES: Record<OperationStatus['kind'], QueryDefinition<OperationStatus>> = {
  scaleOut: statusQuery,
  scaleIn: statusQuery,
  rescaleOperator: rescaleStatusQuery,
  recoverRuntime: recoveryStatusQuery,
  rollout: rolloutStatusQuery as QueryDefinition<OperationStatus>,
};

/** The status query of a workflow type (null: the type has only its `phase` query). */
export function statusQueryOf(workflowType: string): QueryDefinition<OperationStatus> | null {
  return Object.hasOwn(STATUS_QUERIES, workflowType) ? STATUS_QUERIES[workflowType as OperationStatus['kind']] : null;
}
