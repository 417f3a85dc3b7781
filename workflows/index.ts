// Every workflow type the orchestrator worker registers, one file each.
//
// Each is exported lazily: its module (and what it imports) is evaluated when a run first calls it.
// The SDK evaluates the bundle's modules again for every run (each run's module state is its own),
// so with eager exports a ping evaluated the scale, rescale, rollout and autoscaler graphs too.
// webpack turns each require into a call of its own module loader, made inside the run: the same
// point of every replay, so this is as deterministic as an import.
/* eslint-disable @typescript-eslint/no-require-imports -- the lazy load is the point (see above) */
import type * as ApplyPlanModule from './apply-plan';
import type * as AutoscalerModule from './autoscaler';
import type * as CrashLoopsModule from './crash-loops';
import type * as LeaseSweeperModule from './lease-sweeper';
import type * as PingModule from './ping';
import type * as ReconcileModule from './reconcile';
import type * as RescaleOperatorModule from './rescale-operator';
import type * as RecoverRuntimeModule from './recover-runtime';
import type * as RetireWorkloadModule from './retire-workload';
import type * as RolloutModule from './rollout';
import type * as ScaleInModule from './scale-in';
import type * as ScaleOutModule from './scale-out';
import type * as StopTheWorldReplanModule from './stop-the-world-replan';
import type * as SubtaskFailuresModule from './subtask-failures';

export const applyPlan: typeof ApplyPlanModule.applyPlan = (...args) => (require('./apply-plan') as typeof ApplyPlanModule).applyPlan(...args);
export const autoscaler: typeof AutoscalerModule.autoscaler = (...args) => (require('./autoscaler') as typeof AutoscalerModule).autoscaler(...args);
export const handleCrashLoops: typeof CrashLoopsModule.handleCrashLoops = (...args) => (require('./crash-loops') as typeof CrashLoopsModule).handleCrashLoops(...args);
export const leaseSweeper: typeof LeaseSweeperModule.leaseSweeper = (...args) => (require('./lease-sweeper') as typeof LeaseSweeperModule).leaseSweeper(...args);
export const ping: typeof PingModule.ping = (...args) => (require('./ping') as typeof PingModule).ping(...args);
export const reconcile: typeof ReconcileModule.reconcile = (...args) => (require('./reconcile') as typeof ReconcileModule).reconcile(...args);
export const rescaleOperator: typeof RescaleOperatorModule.rescaleOperator = (...args) => (require('./rescale-operator') as typeof RescaleOperatorModule).rescaleOperator(...args);
export const recoverRuntime: typeof RecoverRuntimeModule.recoverRuntime = (...args) => (require('./recover-runtime') as typeof RecoverRuntimeModule).recoverRuntime(...args);
export const retireWorkload: typeof RetireWorkloadModule.retireWorkload = (...args) => (require('./retire-workload') as typeof RetireWorkloadModule).retireWorkload(...args);
export const rollout: typeof RolloutModule.rollout = (...args) => (require('./rollout') as typeof RolloutModule).rollout(...args);
export const scaleIn: typeof ScaleInModule.scaleIn = (...args) => (require('./scale-in') as typeof ScaleInModule).scaleIn(...args);
export const scaleOut: typeof ScaleOutModule.scaleOut = (...args) => (require('./scale-out') as typeof ScaleOutModule).scaleOut(...args);
export const stopTheWorldReplan: typeof StopTheWorldReplanModule.stopTheWorldReplan = (...args) => (require('./stop-the-world-replan') as typeof StopTheWorldReplanModule).stopTheWorldReplan(...args);
export const handleSubtaskFailures: typeof SubtaskFailuresModule.handleSubtaskFailures = (...args) => (require('./subtask-failures') as typeof SubtaskFailuresModule).handleSubtaskFailures(...args);
