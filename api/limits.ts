// The operator-configured ceiling on replicas (SCALEGATE_MAX_REPLICAS, at most the protocol's own
// bound): checked before any planning work is done.
import { ApiError } from '../http/errors';
import type { ReplicaCount } from '../protocol';

export function checkReplicaLimit(replicas: ReplicaCount, maxReplicas: number): void {
  if (replicas !== 'all' && replicas > maxReplicas) {
    throw new ApiError('validation-failed', `replicas ${replicas} is above this control plane's limit of ${maxReplicas} (SCALEGATE_MAX_REPLICAS)`, {
      issues: [{ path: 'body.replicas', message: `at most ${maxReplicas}` }],
    });
  }
}
