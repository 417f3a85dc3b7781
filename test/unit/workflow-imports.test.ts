// Every workflow run evaluates every module its bundle imports (the SDK isolates each run's module
// state), so what workflows/index.ts imports is paid by each scale-out, replan and autoscaler run.
// The full message schemas (protocol/workload.ts, agent.ts, runtime.ts, api.ts) cost a replayed
// scale-out 14 of its 67 ms of CPU; the workflows validate with protocol/names.ts and the few
// modules below instead. esbuild reads the same import graph webpack bundles.
import path from 'node:path';
import { build } from 'esbuild';
import { ROOT } from '../../embedded/processes';

/** The protocol modules the workflows may import values from: small, and each needed by one. */
const ALLOWED = ['protocol/issues.ts', 'protocol/ledger.ts', 'protocol/names.ts', 'protocol/scale-inputs.ts', 'protocol/search-attributes.ts', 'protocol/stream.ts', 'protocol/task-reports.ts', 'protocol/tiers.ts'];

it('the workflow bundle imports no protocol module beyond the names, the ledger words, the search attributes, stream failures, task reports and tiers', async () => {
  const result = await build({
    entryPoints: [path.join(ROOT, 'workflows/index.ts')], bundle: true, write: false, metafile: true, platform: 'node',
    external: ['@temporalio/*', 'zod'], logLevel: 'error', outfile: path.join(ROOT, 'workflow-imports.js'), absWorkingDir: ROOT,
  });
  const modules = Object.keys(result.metafile.inputs);
  expect(modules).toContain('workflows/scale-out.ts');
  expect(modules.filter((file) => file.startsWith('protocol/')).sort()).toEqual(ALLOWED);
});

it('the ledger words every workflow run evaluates build no schema (the rows as read back are protocol/api.ts\'s)', async () => {
  const result = await build({
    entryPoints: [path.join(ROOT, 'workflows/operation.ts')], bundle: true, write: false, metafile: true, platform: 'node',
    external: ['@temporalio/*', 'zod'], logLevel: 'error', outfile: path.join(ROOT, 'workflow-imports.js'), absWorkingDir: ROOT,
  });
  const ledger = result.metafile.inputs['protocol/ledger.ts'];
  expect(ledger).toBeDefined();
  expect(ledger!.imports.map((i) => i.path)).not.toContain('zod');
});
