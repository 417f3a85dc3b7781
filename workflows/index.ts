// Every workflow type the orchestrator worker registers.
export { ping } from './ping';
