// Every workflow type the orchestrator worker registers, one file each.
export { applyPlan } from './apply-plan';
export { ping } from './ping';
export { reconcile } from './reconcile';
export { retireWorkload } from './retire-workload';
export { scaleIn } from './scale-in';
export { scaleOut } from './scale-out';
export { stopTheWorldReplan } from './stop-the-world-replan';
