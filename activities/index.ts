// Activities: thin I/O adapters the workflows call, one module per concern, composed here over
// injected ports (activities/ports.ts) so tests hand in real or fake ones without module mocking.
// Workflows call them by name: `import type { Activities } from '../activities'`.
import { autoscalerActivities } from './autoscaler';
import { evidenceActivities } from './evidence';
import { kubernetesActivities } from './kubernetes';
import { ledgerActivities } from './ledger';
import { placementActivities } from './placement';
import type { ActivityDeps } from './ports';
import { reconcileActivities } from './reconcile';
import { recoveryActivities } from './recovery';
import { createRendezvous } from './rendezvous-threads';
import { rescaleActivities } from './rescale';
import { streamActivities } from './stream';
import { taskActivities } from './tasks';
import { workflowInputActivities } from './workflow-input';

export type { ActivityDeps, ActivityStores, TaskRef } from './ports';
export type { ReconcilePassResult } from './reconcile';
export type { RescalePlan } from './rescale';
export type { MarkedLost, PreparedRecovery, RecoveryItem, SweepPassResult } from './recovery';

export function createActivities(deps: ActivityDeps) {
  // One per worker process: the keys every placement pass of its activities shares.
  const rendezvous = createRendezvous();
  return {
    ...placementActivities(deps, rendezvous),
    ...autoscalerActivities(deps),
    ...taskActivities(deps),
    ...evidenceActivities(deps),
    ...ledgerActivities(deps),
    ...reconcileActivities(deps, rendezvous),
    ...recoveryActivities(deps, rendezvous),
    ...streamActivities(deps),
    ...rescaleActivities(deps),
    ...kubernetesActivities(deps),
    ...workflowInputActivities(),
  };
}
export type Activities = ReturnType<typeof createActivities>;
