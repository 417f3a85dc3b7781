// Every workflow run evaluates every module its bundle imports (the SDK isolates each run's module
// state), so what workflows/index.ts imports is paid by each scale-out, replan and autoscaler run.
// The full message schemas (protocol/workload.ts, agent.ts, runtime.ts, api.ts) cost a replayed
// scale-out 14 of its 67 ms of CPU; the workflows validate with protocol/names.ts and the few
// modules below instead. esbuild reads the same import graph webpack bundles.
import path from 'node:path';
import { build } from 'esbuild';
import { ROOT } from '../../embedded/processes';

/** Every module `entry` reaches (webpack's import graph, as esbuild reads it), each with its imports. */
async function importGraph(entry: string) {
  const result = await build({
    entryPoints: [path.join(ROOT, entry)], bundle: true, write: false, metafile: true, platform: 'node',
    external: ['@temporalio/*', 'zod'], logLevel: 'error', outfile: path.join(ROOT, 'workflow-imports.js'), absWorkingDir: ROOT,
  });
  return result.metafile.inputs;
}

/** The protocol modules the workflows may import values from: small, and each needed by one. */
const ALLOWED = ['protocol/bounds.ts', 'protocol/issues.ts', 'protocol/ledger.ts', 'protocol/names.ts', 'protocol/scale-inputs.ts', 'protocol/search-attributes.ts', 'protocol/stream.ts', 'protocol/task-reports.ts', 'protocol/tiers.ts', 'protocol/workflow-inputs.ts'];

it('the workflow bundle imports no protocol module beyond the names, the ledger words, the search attributes, stream failures, task reports and tiers', async () => {
  const modules = Object.keys(await importGraph('workflows/index.ts'));
  expect(modules).toContain('workflows/scale-out.ts');
  expect(modules.filter((file) => file.startsWith('protocol/')).sort()).toEqual(ALLOWED);
});

it('the ledger words every workflow run evaluates build no schema (the rows as read back are protocol/api.ts\'s)', async () => {
  const ledger = (await importGraph('workflows/operation.ts'))['protocol/ledger.ts'];
  expect(ledger).toBeDefined();
  expect(ledger!.imports.map((i) => i.path)).not.toContain('zod');
});

/**
 * What a run of `entry` evaluates: the modules it imports, followed through their imports, but not
 * through a `require()` inside a function (evaluated only when that code runs, as workflows/index.ts's
 * lazy exports and checkInput's path for runs recorded before patch input-checked-by-worker).
 */
async function evaluatedBy(entry: string): Promise<{ modules: string[]; packages: string[] }> {
  const inputs = await importGraph(entry);
  const modules = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    for (const imported of inputs[file]?.imports ?? []) {
      if (imported.kind === 'require-call') continue;
      if (imported.external) packages.add(imported.path);
      else visit(imported.path);
    }
  };
  visit(entry);
  return { modules: [...modules], packages: [...packages] };
}

it.each(['workflows/scale-out.ts', 'workflows/scale-in.ts', 'workflows/apply-plan.ts', 'workflows/stop-the-world-replan.ts', 'workflows/recover-runtime.ts'])(
  'a run of %s evaluates no zod: the worker checks its input (protocol/workflow-inputs.ts)',
  async (entry) => {
    const { modules, packages } = await evaluatedBy(entry);
    expect(modules).toContain('workflows/operation.ts'); // the graph was followed
    expect(packages).toContain('@temporalio/workflow');
    expect(packages.filter((name) => name === 'zod' || name.startsWith('zod/'))).toEqual([]);
    expect(modules).not.toContain('protocol/workflow-inputs.ts');
  },
);
