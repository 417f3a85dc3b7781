// Every workflow type the orchestrator worker registers.
export { ping } from './ping';
export { applyPlan, reconcile, retireWorkload, stopTheWorldReplan } from './placement';
export { scaleIn } from './scale-in';
export { scaleOut } from './scale-out';
