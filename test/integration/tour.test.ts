// The first hour, as a newcomer lives it: `npm start -- --demo` (scripts/start.ts), then every line
// of the quick tour it prints, as printed, through `npx scalegate` in the checkout, with no flag (the
// CLI finds the API and the tokens in the state folder npm start keeps, SCALEGATE_HOME). Each line
// exits 0; the operations it starts end completed, and so does the scale-in the tour's tier signal
// asks for; nothing the tour or the demo tier started ends refused or failed.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { testEnv } from '../../harness/env';
import { startNpmStart, type NpmStart } from '../support/npm-start';
import { waitFor } from '../../harness/wait-for';

const ROOT = path.resolve(__dirname, '../..');
const namespace = `tour-${crypto.randomBytes(4).toString('hex')}`;
let connection: Connection;
let stack: NpmStart | null = null;

beforeAll(async () => {
  // A namespace of its own: the demo's workflow ids (scale:demo-web, autoscale:demo) are the demo test's too.
  connection = await Connection.connect({ address: testEnv().temporalAddress });
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  await waitFor(`namespace ${namespace}`, async () => connection.workflowService.describeNamespace({ namespace }).then(() => true, () => false));
});
afterAll(async () => {
  await stack?.cleanUp();
  await connection?.close();
});

interface Run {
  line: string;
  code: number;
  stdout: string;
  stderr: string;
}

/** One tour line as a person types it: `npx scalegate ...` in the checkout. */
function typed(line: string, home: string): Promise<Run> {
  const args = line.replace(/#.*$/, '').trim().split(/\s+/);
  if (args[0] !== 'npx' || args[1] !== 'scalegate') throw new Error(`not a scalegate line: ${line}`);
  return new Promise((resolve) => {
    // --no-install: the bin link of this checkout, never a download
    execFile('npx', ['--no-install', ...args.slice(1)], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_HOME: home }, timeout: 240_000 },
      (error, stdout, stderr) => resolve({ line, code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

test('npm start -- --demo, then every line of the printed tour through npx: each exits 0, nothing ends refused or failed', async () => {
  const started = await startNpmStart({ name: 'tour', env: { SCALEGATE_DEMO: '1', TEMPORAL_NAMESPACE: namespace } });
  stack = started;
  await started.ready;
  const tour = started.lines.filter((line) => /^\s+npx scalegate /.test(line));
  expect(tour.length).toBeGreaterThanOrEqual(8);
  const client = new Client({ connection, namespace });
  // The demo's applies settle before the tour starts, as they do while a person reads the banner:
  // every demo workload placed (the reconcile loop may not have started an apply yet), none running.
  await waitFor('the demo placed', async () => {
    const state = (await fetch(`${started.apiUrl}/v1/state`, { headers: { authorization: `Bearer ${started.tokens.viewer}` } }).then((r) => r.json())) as { workloads: { name: string; placement: { assignments: unknown[] } | null }[] };
    const placed = ['demo-web', 'demo-orders', 'demo-clicks'].every((name) => (state.workloads.find((w) => w.name === name)?.placement?.assignments.length ?? 0) > 0);
    if (!placed) return false;
    const running = [];
    for await (const run of client.workflow.list({ query: `ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH 'scale:'` })) running.push(run.workflowId);
    return running.length === 0;
  }, { timeoutMs: 120_000 });

  const runs: Run[] = [];
  for (const line of tour) {
    const run = await typed(line, started.home);
    runs.push(run);
    if (run.code !== 0) throw new Error(`${line.trim()} exited ${run.code}\n${run.stderr}${run.stdout}`);
  }
  const output = (pattern: RegExp) => runs.find((r) => pattern.test(r.line))!.stdout;
  // --wait followed each operation to its end: its steps, then "completed".
  const ended = (workflowId: string) => new RegExp(`^completed(: .*)? \\(${workflowId}, [\\d.]+ s\\)$`, 'm');
  expect(output(/scale demo-web 3/)).toMatch(/soaking: .*soak \d+ s left[\s\S]*comparison pass/);
  expect(output(/scale demo-web 3/)).toMatch(ended('scale:demo-web'));
  expect(output(/scale demo-orders 1/)).toMatch(ended('scale:demo-orders'));
  expect(output(/agg 4/)).toMatch(ended('rescale:demo-clicks'));
  // Not an integer factor: the replan, and the line says why.
  expect(output(/agg 3/)).toMatch(/^completed: not hot: 4 → 3 is not an integer factor/m);
  expect(output(/recover agent-c/)).toMatch(ended('recover:agent-c'));

  // The tier signal asks for 2 of demo-web's 3: the autoscaler's scale-in completes after its window.
  const viewer = { authorization: `Bearer ${started.tokens.viewer}` };
  const ledger = async () => ((await (await fetch(`${started.apiUrl}/v1/ledger?limit=500`, { headers: viewer })).json()) as { events: any[] }).events;
  await waitFor('the autoscaler\'s scale-in of demo-web', async () =>
    (await ledger()).some((e) => e.kind === 'scale-in' && e.workload === 'demo-web' && e.outcome === 'completed' && /^autoscale demo/.test(e.reason)), { timeoutMs: 120_000 });

  // `npx scalegate temporal ...` is the provisioned Temporal CLI on this stack's server and namespace.
  const described = await typed(`  npx scalegate temporal workflow describe --workflow-id scale:demo-web --output json`, started.home);
  expect(described).toMatchObject({ code: 0 });
  expect(JSON.parse(described.stdout)).toMatchObject({ workflowExecutionInfo: { execution: { workflowId: 'scale:demo-web' } } });

  const events = await ledger();
  expect(events.filter((e) => ['refused', 'failed'].includes(e.outcome)).map((e) => `${e.kind} ${e.workload ?? e.tier}: ${e.outcome} (${e.reason})`)).toEqual([]);
  const failed = [];
  for await (const run of client.workflow.list({ query: `ExecutionStatus = 'Failed' OR ExecutionStatus = 'TimedOut'` })) failed.push(`${run.workflowId} ${run.type}`);
  expect(failed).toEqual([]);
  expect(await started.stop()).toBe(0);
}, 600_000);
