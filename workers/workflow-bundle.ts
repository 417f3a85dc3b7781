// How workflows/ is bundled, in one place: the orchestrator worker, the test servers, the history
// recorder and the patch-retirement tool all bundle it so.
//
// No module is preloaded (the bundler's `preloadModules`, shared between runs instead of evaluated
// again for each): every run evaluates the modules it uses again. workflows/index.ts exports each
// workflow lazily, so a run evaluates its own workflow's graph, not every workflow's (a replayed
// ping 35 → 19 ms of CPU, a scale-out 58 → 46: `npm run bench:workflow-replay`). What costs is building zod
// the protocol's zod schemas, and zod 4 binds a schema's methods on first read while the SDK
// deep-freezes preloaded modules: a preloaded schema's first `.optional()` throws "object is not
// extensible" (tried: every workflow task failed). Preloading zod alone saves nothing (49.1 against
// 49.8 ms a replayed scale-out, scale-in or applyPlan).
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger, type BundleOptions, type LogLevel } from '@temporalio/worker';

// By the source's own folder (harness/entry-bundles.ts keeps __dirname a source folder inside a bundled entry).
export const WORKFLOWS_PATH = path.join(__dirname, '..', 'workflows', 'index.ts');

/** Bundles workflows/ (the code a worker, a replay or a recorder runs). */
export function bundleWorkflows(options: { level?: LogLevel; webpackConfigHook?: BundleOptions['webpackConfigHook'] } = {}): Promise<{ code: string }> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    logger: new DefaultLogger(options.level ?? 'WARN'),
    ...(options.webpackConfigHook ? { webpackConfigHook: options.webpackConfigHook } : {}),
  });
}
