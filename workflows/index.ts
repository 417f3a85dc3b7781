// Every workflow type the orchestrator worker registers, one file each.
export { applyPlan } from './apply-plan';
export { autoscaler } from './autoscaler';
export { handleCrashLoops } from './crash-loops';
export { leaseSweeper } from './lease-sweeper';
export { ping } from './ping';
export { reconcile } from './reconcile';
export { rescaleOperator } from './rescale-operator';
export { recoverRuntime } from './recover-runtime';
export { retireWorkload } from './retire-workload';
export { rollout } from './rollout';
export { scaleIn } from './scale-in';
export { scaleOut } from './scale-out';
export { stopTheWorldReplan } from './stop-the-world-replan';
export { handleSubtaskFailures } from './subtask-failures';
