// The demo (`npm start -- --demo`, embedded/demo.ts) on a real stack: every workload it defines is
// placed and runs, its tier policy is in place, and the operations of the quick tour it prints
// work on it: a scale-out of the sample service, a hot rescale of the stream job, an autoscaler signal.
import { decisionCode } from '../../api/metrics';
import { demoTour, demoWorkloads, DEMO_FEEDS, DEMO_TIER, installDemo } from '../../embedded/demo';
import { runLoad } from '../../store/source-feed';
import { auditStreamSink } from '../../store/sink-audit';
import { USAGE } from '../../cli/main';
import { startStack, type Stack } from '../../harness/stack';
import { tasksOf, waitForApply } from '../../harness/workloads';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ leaseTtlMs: 3000, agents: ['a', 'b', 'c'].map((zone) => ({ id: `demo-${zone}`, labels: { zone }, slots: 8 })) });
});
afterAll(async () => {
  await stack?.stop();
});

const ready = (name: string, count: number) =>
  stack.waitFor(`${count} ready tasks of ${name}`, async () => {
    const tasks = (await tasksOf(stack, name)).filter((t) => t.state === 'ready');
    return tasks.length === count ? tasks : null;
  }, 90_000);

test('the demo defines a service, a fed consumer, a fed stream job and a tier, and the quick tour works on them', async () => {
  expect(await installDemo(stack.apiUrl, stack.tokens.operator)).toEqual(Object.keys(demoWorkloads()));
  // Installing again (a second `npm start -- --demo`) replaces rather than fails.
  await installDemo(stack.apiUrl, stack.tokens.operator);

  const web = await ready('demo-web', 2);
  const answer = await fetch(`http://127.0.0.1:${web[0].ports.public}/`).then((r) => r.json());
  expect(answer).toMatchObject({ service: 'demo-web' });
  await ready('demo-orders', 2);
  await ready('demo-clicks', 5);
  for (const name of Object.keys(demoWorkloads())) await waitForApply(stack, name);
  expect((await stack.api('GET', `/v1/tiers/${DEMO_TIER}`, { role: 'viewer' })).body.policy).toMatchObject({ workloads: ['demo-web'], maxReplicas: 6 });

  // The feeds npm start runs, for a moment.
  await Promise.all(DEMO_FEEDS.map((feed) => runLoad({ databaseUrl: stack.databaseUrl, source: feed.source, partitions: feed.partitions, ratePerSec: 500, count: 500 })));

  // The tour: scale the service out, rescale the stream job hot, signal the tier.
  const scaled = await stack.api('POST', '/v1/workloads/demo-web/scale', { body: { replicas: 3 } });
  expect(scaled.status).toBe(202);
  await stack.temporal.workflow.getHandle(scaled.body.workflowId, scaled.body.runId).result();
  await ready('demo-web', 3);

  const rescaled = await stack.api('POST', '/v1/jobs/demo-clicks/operators/agg/rescale', { body: { parallelism: 4 } });
  expect(rescaled.status).toBe(202);
  expect(await stack.temporal.workflow.getHandle(rescaled.body.workflowId, rescaled.body.runId).result()).toMatchObject({ outcome: 'completed', hot: true });
  await stack.waitFor('the stream job caught up', async () => (await auditStreamSink(stack.db, { source: 'demo_clicks_in', sink: 'demo_clicks_out' })).exact);

  // As the tour says: 150 requests/s ask for 2 replicas of the 3 running; the scale-in follows the 10 s window.
  const signalled = await stack.api('POST', `/v1/tiers/${DEMO_TIER}/signals`, { body: { qps: 150 } });
  expect(signalled).toMatchObject({ status: 202, body: { workflowId: `autoscale:${DEMO_TIER}` } });
  const decision = await stack.waitFor('the autoscaler decided on the signal', async () => {
    const events = (await stack.api('GET', `/v1/ledger?kind=autoscale&limit=5`, { role: 'viewer' })).body.events;
    return events.find((e: any) => e.inputs?.desiredPerSignal?.some((d: any) => d.signal === 'qps' && d.desired === 2)) ?? null;
  });
  expect(decision).toMatchObject({ kind: 'autoscale' });
  const scaledIn = await stack.waitFor('the autoscaler scaled demo-web in', async () => {
    const events = (await stack.api('GET', '/v1/ledger?workload=demo-web&kind=scale-in&limit=5', { role: 'viewer' })).body.events;
    return events.find((e: any) => e.outcome === 'completed') ?? null;
  });
  expect(scaledIn).toMatchObject({ fromReplicas: 3, toReplicas: 2 });
  await ready('demo-web', 2);

  // /metrics counts the rescale among the operations and the autoscaler's decisions by what they decided.
  const metrics = await fetch(`${stack.apiUrl}/metrics`).then((r) => r.text());
  expect(metrics).toMatch(/^scalegate_operations_completed_total\{kind="rescale"\} 1$/m);
  expect(metrics).toMatch(new RegExp(`^scalegate_autoscaler_decisions_total\\{decision="${decisionCode(decision.inputs.decision)}"\\} [1-9]`, 'm'));
});

test('every command of the printed quick tour is one the CLI knows', () => {
  const commands = demoTour('http://127.0.0.1:8080').flatMap((line) => /npx scalegate (\S+)/.exec(line)?.[1] ?? []);
  expect(commands.length).toBeGreaterThan(5);
  for (const command of commands) expect(USAGE).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
});
