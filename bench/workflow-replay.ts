// Workflow CPU benchmark: `npm run bench:workflow-replay` prints one JSON object.
//
// The worker's CPU for a workflow run that is the workflow code's own (issue 36: the worker spent
// more than Temporal per scale operation): committed histories replayed in this process, CPU per
// replayed run, against a reference measured in the same run, interleaved: the same workflows in a
// bundle whose index exports them eagerly (every module evaluated for every run, as before
// workflows/index.ts exported them lazily). Ratios, since the machine is small and shared.
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { historyFromJSON, type History } from '../harness/histories/history-json';
import { HISTORIES_DIR } from '../harness/histories/record-histories';
import { bundleWorkflows } from '../workers/workflow-bundle';

const HISTORIES = ['ping.json', 'scale-out.json', 'scale-in.json', 'apply-plan.v4.json', 'kubernetes-scale-out.json'];
const RUNS = 30;
const ROUNDS = 3;
const WORKFLOWS = path.resolve(__dirname, '..', 'workflows');

/**
 * The workflows bundled from an index that exports each eagerly, written from workflows/index.ts's
 * own list beside it (the bundler resolves the SDK from the project), and removed again.
 */
async function eagerBundle(): Promise<{ code: string }> {
  const lazy = fs.readFileSync(path.join(WORKFLOWS, 'index.ts'), 'utf8');
  const exports = [...lazy.matchAll(/^export const (\w+): typeof \w+\.\w+ = \(\.\.\.args\) => \(require\('\.\/([\w-]+)'\)/gm)];
  if (exports.length === 0) throw new Error('workflows/index.ts exports no workflow lazily: nothing to compare');
  const file = path.join(WORKFLOWS, `.eager-index-${process.pid}.ts`);
  fs.writeFileSync(file, exports.map(([, name, module]) => `export { ${name} } from './${module}';`).join('\n'));
  try {
    return await bundleWorkflowCode({ workflowsPath: file, logger: new DefaultLogger('ERROR') });
  } finally {
    fs.rmSync(file, { force: true });
  }
}

async function cpuPerRun(bundle: { code: string }, history: History, workflowId: string): Promise<number> {
  const runs = (async function* () {
    for (let i = 0; i < RUNS; i++) yield { history, workflowId };
  })();
  const before = process.cpuUsage();
  for await (const result of Worker.runReplayHistories({ workflowBundle: bundle }, runs)) if (result.error) throw result.error;
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / RUNS;
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const lazy = await bundleWorkflows({ level: 'ERROR' });
  const eager = await eagerBundle();
  const result: Record<string, { lazyMs: number; eagerMs: number; ratio: number }> = {};
  for (const name of HISTORIES) {
    const json = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, name), 'utf8'));
    const history = historyFromJSON(json);
    const workflowId = json.events[0].workflowExecutionStartedEventAttributes.workflowId as string;
    await cpuPerRun(lazy, history, workflowId); // warm-up of each
    await cpuPerRun(eager, history, workflowId);
    const samples = { lazy: [] as number[], eager: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      samples.lazy.push(await cpuPerRun(lazy, history, workflowId));
      samples.eager.push(await cpuPerRun(eager, history, workflowId));
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
    const lazyMs = median(samples.lazy);
    const eagerMs = median(samples.eager);
    result[name.replace(/\.json$/, '')] = { lazyMs: Number(lazyMs.toFixed(1)), eagerMs: Number(eagerMs.toFixed(1)), ratio: Number((lazyMs / eagerMs).toFixed(2)) };
  }
  console.log(JSON.stringify({ bench: 'workflow-replay', runsPerSample: RUNS, rounds: ROUNDS, cpuPerReplayedRun: result }, null, 2));
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
