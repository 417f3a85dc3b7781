// The messages every scalegate process shares (DESIGN.md §1 protocol/): import them from here. The
// workflows alone import the few modules they validate with (protocol/names.ts says why).
export * from './agent';
export * from './api';
export * from './errors';
export * from './issues';
export * from './ledger';
export * from './operation-status';
export * from './runtime';
export * from './scale-inputs';
export * from './search-attributes';
export * from './stream';
export * from './stream-wire';
export * from './workload';
