// `npm run patch-retirement [-- --only <patch id> ...]`: which patches could retire now
// (docs/workflows.md, "Patches"). For each patch of workflows/patches.ts it bundles the workflows
// with that patch's old branch gone (patched(id) answers true, through deprecatePatch, as it will
// once deprecated) and replays every kept history in test/workflow/histories/ against that bundle.
// A history that fails needed the old branch: the patch stays while that history is kept. Prints one
// JSON object: per patch, its day and the kept histories that need its old branch.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { bundleWorkflows } from '../workers/workflow-bundle';
import { PATCH_LOG } from '../workflows/patches';
import { historyFromJSON } from '../harness/histories/history-json';
import { historyFiles } from '../harness/histories/history-versions';
import { HISTORIES_DIR } from '../harness/histories/record-histories';

const say = (line: string) => console.error(`[patch-retirement] ${line}`);

/** '@temporalio/workflow' as it is, except that `patched()` of the forced ids answers the new branch. */
function workflowModuleShim(dir: string, forced: string[]): string {
  const real = require.resolve('@temporalio/workflow');
  const shim = path.join(dir, 'workflow-shim.js');
  fs.writeFileSync(shim, [
    `import * as real from ${JSON.stringify(real)};`,
    `export * from ${JSON.stringify(real)};`,
    `const FORCED = new Set(${JSON.stringify(forced)});`,
    'export function patched(id) { if (FORCED.has(id)) { real.deprecatePatch(id); return true; } return real.patched(id); }',
  ].join('\n'));
  return shim;
}

async function failingHistories(forced: string[], tmpDir: string): Promise<string[]> {
  const shim = workflowModuleShim(tmpDir, forced);
  const { code } = await bundleWorkflows({
    level: 'ERROR',
    webpackConfigHook: (config) => ({ ...config, resolve: { ...config.resolve, alias: { ...(config.resolve?.alias as object), '@temporalio/workflow$': shim } } }),
  });
  const files = historyFiles(HISTORIES_DIR);
  const histories = files.map((file) => {
    const json = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8'));
    return { history: historyFromJSON(json), workflowId: json.events[0].workflowExecutionStartedEventAttributes.workflowId ?? path.basename(file, '.json') };
  });
  const failing: string[] = [];
  let i = 0;
  for await (const result of Worker.runReplayHistories({ workflowBundle: { code }, replayName: `retire-${forced.join('+') || 'none'}` }, histories)) {
    if (result.error) failing.push(files[i]);
    i++;
  }
  return failing;
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR' }, forward: {} } } });
  const args = process.argv.slice(2);
  const only = args.flatMap((arg, i) => (args[i - 1] === '--only' ? [arg] : []));
  const unknown = only.filter((id) => !PATCH_LOG.some((entry) => entry.id === id));
  if (unknown.length) throw new Error(`not a patch of workflows/patches.ts: ${unknown.join(', ')}`);
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-patch-retirement-'));
  try {
    // The check itself must hold first: with no patch forced every kept history replays.
    const baseline = await failingHistories([], tmpDir);
    if (baseline.length) throw new Error(`kept histories fail to replay on the current code: ${baseline.join(', ')}`);
    const patches = [];
    for (const entry of PATCH_LOG.filter((e) => only.length === 0 || only.includes(e.id))) {
      const needOldBranch = await failingHistories([entry.id], tmpDir);
      say(`${entry.id}: ${needOldBranch.length ? `needed by ${needOldBranch.join(', ')}` : 'no kept history needs its old branch'}`);
      patches.push({ id: entry.id, since: entry.since, retirable: needOldBranch.length === 0, neededBy: needOldBranch });
    }
    console.log(JSON.stringify({ keptHistories: historyFiles(HISTORIES_DIR).length, patches }, null, 1));
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
