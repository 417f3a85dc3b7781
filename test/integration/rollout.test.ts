// Versions and rollouts on the real stack (issue 34 items 3–4): real Temporal, PostgreSQL, agents,
// and the run's Docker engine and registry. A PUT that changes what a replica runs starts a rollout
// under scale:<name> and touches nothing running; the rollout replaces replicas a canary step first,
// then a batch, each compared with the old revision's baseline, under load; a rollout to an image
// whose server answers 500 fails its canary and ends compensated, every replica back on the old
// digest (the canary alone replaced back: no stop-the-world). One stack for the file.
//
// The roll-back check can fail: with SCALEGATE_TEST_IGNORE_REVISIONS=1 (test-only, activities/
// tasks.ts) every replica is PUT with the plan's spec, the canary's roll-back starts the bad image
// again, and the replan has to restart every replica: the assertions on `replanned` and on the
// untouched containers fail.
import os from 'node:os';
import { LABEL } from '../../agent/drivers/container';
import { createEngine, type Engine } from '../../agent/drivers/engine';
import { buildBusyboxImage, BUSYBOX_HTTPD, type RunningEngine } from '../../embedded/container-engine';
import { runLoad } from '../../store/source-feed';
import { ownershipOverlaps, verifyExactlyOnce } from '../../store/sink-audit';
import { testEnv } from '../../harness/env';
import { startStack, type Stack } from '../../harness/stack';
import { runCli } from '../support/cli';
import { defineWorkload, tasksOf } from '../../harness/workloads';
import { setTimeout as sleep } from 'node:timers/promises';

const env = testEnv();
const SERVICE_CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const AGENTS = ['a', 'b', 'c'].map((zone) => ({ id: `roll-${zone}-${process.pid}`, labels: { zone } }));
let stack: Stack;
let engine: Engine;
const images: { v2: string; broken: string } = { v2: '', broken: '' };

beforeAll(async () => {
  if (!env.containers) throw new Error(`no container engine for this run: ${env.containersOff}`);
  const containers = env.containers;
  engine = createEngine(containers.dockerHost.slice('unix://'.length));
  const build = (tag: string, files: Record<string, string>) => buildBusyboxImage({
    engine: { address: containers.dockerHost } as RunningEngine, registry: containers.registry, repository: 'scalegate/rollout', tag, workDir: os.tmpdir(), files,
  });
  const ignoreRevisions = process.env.SCALEGATE_TEST_IGNORE_REVISIONS === '1' ? { SCALEGATE_TEST_IGNORE_REVISIONS: '1' } : {};
  [stack, images.v2, images.broken] = await Promise.all([
    startStack({ agents: AGENTS, leaseTtlMs: 30_000, env: ignoreRevisions }),
    build(`v2-${process.pid}`, { 'www/index.html': 'v2\n' }),
    // a server that answers every request 500 (a CGI script that says so, served by busybox httpd)
    build(`broken-${process.pid}`, {
      'www/index.html': 'unused\n',
      'www/cgi-bin/index.html': '#!/bin/sh\nprintf "HTTP/1.0 500 Internal Server Error\\r\\nContent-Type: text/plain\\r\\n\\r\\nbroken\\n"\n',
    }),
  ]);
});
afterAll(async () => {
  await stack?.stop();
});

/** A container service; each rollout step soaks 1 s, and a replica not ready in 8 s fails its step. */
const site = (image: string, readiness = '/index.html', soakMs = 1_000) => ({
  kind: 'service', replicas: 3, contract: SERVICE_CONTRACT, rollout: { soakMs, convergeTimeoutMs: 8_000 },
  spec: { image, command: [...BUSYBOX_HTTPD], readiness: { http: readiness }, limits: { cpus: 0.25, memoryMiB: 32 }, graceMs: 500 },
});

/** The containers of `workload` on the stack's agents: task id → [container id, image]. */
async function containersOf(workload: string): Promise<Record<string, readonly [string, string]>> {
  const listed = (await Promise.all(AGENTS.map((agent) => engine.list({ [LABEL.runtime]: agent.id, [LABEL.workload]: workload })))).flat();
  const entries = await Promise.all(listed.map(async (c) => [c.Labels[LABEL.task], [c.Id, (await engine.inspect(c.Id))!.Config.Image]] as const));
  return Object.fromEntries(entries);
}

/**
 * Load on the service while it rolls: rounds of GETs against every ready replica (the list read
 * again every 10 rounds), counted by answer, paced at about 20 rounds a second so that the load
 * does not take the 2 cores the stack runs on.
 */
function loadOn(workload: string) {
  const counts = { ok: 0, failed: 0 };
  let running = true;
  const loop = (async () => {
    let ready: { ports: { public: number } }[] = [];
    for (let round = 0; running; round++) {
      if (round % 10 === 0) ready = (await tasksOf(stack, workload)).filter((t) => t.state === 'ready' && t.ports);
      await Promise.all(ready.map(async (t) => {
        const answer = await fetch(`http://127.0.0.1:${t.ports.public}/index.html`).catch(() => null);
        if (answer?.ok) counts.ok++;
        else counts.failed++;
        await answer?.body?.cancel();
      }));
      await sleep(50);
    }
  })();
  return { counts, stop: async () => { running = false; await loop; } };
}

const operation = async (workflowId: string, runId: string) => {
  await stack.temporal.workflow.getHandle(workflowId, runId).result().catch(() => null);
  return (await stack.api('GET', `/v1/operations/${encodeURIComponent(workflowId)}?runId=${runId}`, { role: 'viewer' })).body;
};
const stateOf = async (workload: string) => (await stack.api('GET', '/v1/state', { role: 'viewer' })).body.workloads.find((w: { name: string }) => w.name === workload);

describe('a rollout of a container service', () => {
  let v1Digest: string;
  let v2Revision: string;

  it('PUT of a new image answers 202 with the rollout under scale:<name>; the canary step passes and the batch follows, every replica ending on the new digest under load', async () => {
    v1Digest = env.containers!.image;
    await defineWorkload(stack, 'site', site(v1Digest), 3);
    const before = await containersOf('site');
    expect(Object.values(before).map(([, image]) => image)).toEqual([v1Digest, v1Digest, v1Digest]);
    const load = loadOn('site');

    const put = await stack.api('PUT', '/v1/workloads/site', { body: site(images.v2) });
    expect(put).toMatchObject({ status: 202, body: { workflowId: 'scale:site', kind: 'rollout', revision: { from: expect.any(String), to: expect.any(String) } } });
    v2Revision = put.body.revision.to;
    // While it runs, another change of what a replica runs is refused, nothing written.
    const second = await stack.api('PUT', '/v1/workloads/site', { body: site(images.broken) });
    expect(second).toMatchObject({ status: 409, body: { error: 'operation-in-progress' } });

    const done = await operation(put.body.workflowId, put.body.runId);
    await load.stop();
    expect(done.status).toBe('completed');
    expect(done.result.steps.map((s: { role: string; outcome: string }) => `${s.role} ${s.outcome}`)).toEqual(['canary good', 'batch good']);
    expect(done.result.steps.map((s: { replaced: unknown[] }) => s.replaced.length)).toEqual([1, 2]);
    expect(load.counts.ok).toBeGreaterThan(0);

    const after = await containersOf('site');
    expect(Object.values(after).map(([, image]) => image)).toEqual([images.v2, images.v2, images.v2]);
    expect(Object.keys(after).filter((taskId) => taskId in before)).toEqual([]);
    const state = await stateOf('site');
    expect(state.runs).toBe(v2Revision);
    expect(state.tasks.map((t: { revision: string }) => t.revision)).toEqual([v2Revision, v2Revision, v2Revision]);
    for (const t of (await tasksOf(stack, 'site'))) expect(await (await fetch(`http://127.0.0.1:${t.ports.public}/index.html`)).text()).toBe('v2\n');

    const ledger = (await stack.api('GET', '/v1/ledger?workload=site&kind=rollout', { role: 'viewer' })).body.events;
    expect(ledger.map((e: { outcome: string }) => e.outcome).reverse()).toEqual(['running', 'running', 'completed']);
  });

  it('a rollout to an image whose server answers 500 fails its canary and ends compensated, naming the row; every replica back on the old digest, only the canary replaced', async () => {
    const before = await containersOf('site');
    const put = await stack.api('PUT', '/v1/workloads/site', { body: site(images.broken, '/cgi-bin/index.html') });
    expect(put).toMatchObject({ status: 202, body: { kind: 'rollout', revision: { from: v2Revision } } });

    const done = await operation(put.body.workflowId, put.body.runId);
    expect(done.status).toBe('compensated');
    expect(done.result.steps[0]).toMatchObject({ role: 'canary', outcome: 'failed' });
    expect(done.result.steps[1]).toMatchObject({ role: 'batch', outcome: 'pending' });
    // the row: the canary never became ready (its server answers 500), and the comparison's tasks row says so
    expect(done.result.compensation.reason).toMatch(/canary step \(1 of 2\) failed: .*not ready/);
    expect(done.result.compensation.reason).toContain('comparison:');
    const canary = done.result.steps[0].replaced[0];
    expect(done.result.compensation).toMatchObject({ restored: v2Revision, replanned: false, rolledBack: [canary.to] });
    // the replica the canary replaced was never stopped by the step (its canary never became ready):
    // the roll-back stops it, so the operation ends with the three replicas its placement holds
    expect(done.result.compensation.stoppedReplaced).toEqual([canary.from]);

    const after = await containersOf('site');
    expect(Object.values(after).map(([, image]) => image)).toEqual([images.v2, images.v2, images.v2]);
    // the two replicas the canary did not reach run on, untouched (same containers)
    const untouched = Object.keys(before).filter((taskId) => taskId !== canary.from);
    for (const taskId of untouched) expect(after[taskId]?.[0]).toBe(before[taskId][0]);
    const state = await stateOf('site');
    expect(state.runs).toBe(v2Revision);
    expect(state.tasks.map((t: { revision: string }) => t.revision)).toEqual([v2Revision, v2Revision, v2Revision]);
    expect((await stack.api('GET', '/v1/workloads/site', { role: 'viewer' })).body.spec.image).toBe(images.v2);
    const last = (await stack.api('GET', '/v1/ledger?workload=site&kind=rollout&limit=1', { role: 'viewer' })).body.events[0];
    expect(last).toMatchObject({ outcome: 'compensated', reason: expect.stringContaining('canary') });
  });

  it('an abort through the API after the canary\'s write rolls the canary back and ends compensated, saying so', async () => {
    const before = await containersOf('site');
    // v1 again, its steps soaking long enough to be aborted in the canary's soak
    const put = await stack.api('PUT', '/v1/workloads/site', { body: site(v1Digest, '/index.html', 60_000) });
    expect(put).toMatchObject({ status: 202, body: { kind: 'rollout', revision: { from: v2Revision } } });
    await stack.waitFor('the canary soaking', async () => (await stack.api('GET', '/v1/operations/scale%3Asite', { role: 'viewer' })).body.phase === 'soaking');
    expect(await stack.api('POST', '/v1/operations/scale%3Asite/abort', { body: {} })).toMatchObject({ status: 202, body: { aborting: true } });
    const done = await operation(put.body.workflowId, put.body.runId);
    expect(done.status).toBe('compensated');
    expect(done.result.compensation).toMatchObject({ reason: 'aborted via API', restored: v2Revision, replanned: false, rolledBack: [done.result.steps[0].replaced[0].to] });
    const after = await containersOf('site');
    expect(Object.values(after).map(([, image]) => image)).toEqual([images.v2, images.v2, images.v2]);
    for (const taskId of Object.keys(before).filter((id) => id !== done.result.steps[0].replaced[0].from)) expect(after[taskId]?.[0]).toBe(before[taskId][0]);
    // back at the definition before the aborted PUT, its policy included: what ran before runs on
    expect((await stack.api('GET', '/v1/workloads/site', { role: 'viewer' })).body.spec.image).toBe(images.v2);
  });

  it('a rollout asked for when every replica runs the current revision changes nothing', async () => {
    const started = await stack.api('POST', '/v1/workloads/site/rollout', { body: {} });
    expect(started).toMatchObject({ status: 202, body: { workflowId: 'scale:site', kind: 'rollout' } });
    const done = await operation(started.body.workflowId, started.body.runId);
    expect(done).toMatchObject({ status: 'completed', result: { steps: [] } });
    // The CLI: the same through `scalegate rollout W --wait`, followed to its end; `scalegate state` shows each task's revision.
    const followed = await runCli(stack, ['rollout', 'site', '--wait']);
    expect(followed).toMatchObject({ code: 0, stdout: expect.stringMatching(/^completed(: .*)? \(scale:site, [\d.]+ s\)$/m) });
    const printed = await runCli(stack, ['state']);
    expect(printed.stdout.split('\n').filter((line) => /^site\s+site-/.test(line)).map((line) => line.trim().split(/\s+/).pop())).toEqual([v2Revision, v2Revision, v2Revision]);
    // Listed like every other operation (GET /v1/operations, what `scalegate operations list` and the Web UI's list read: Temporal's visibility)
    const listed = await stack.waitFor('the rollouts listed', async () => {
      const operations = (await stack.api('GET', '/v1/operations?workload=site&kind=rollout', { role: 'viewer' })).body.operations as { status: string }[];
      return operations.length === 5 ? operations : null;
    });
    expect(listed.map((o) => o.status).sort()).toEqual(['compensated', 'compensated', 'completed', 'completed', 'completed']);
  });
});

describe('a rollout of a consumer under load', () => {
  const CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
  const orders = (workMs: number) => ({
    kind: 'consumer', replicas: 3, contract: { ...CONTRACT, partitions: 6 }, rollout: { soakMs: 1_000, convergeTimeoutMs: 15_000 },
    spec: { partitions: 6, source: 'orders_in', sink: 'orders_out', workMs },
  });

  it('drains each replaced replica before its partitions move: the sink holds every source record once, no partition ever had two owners', async () => {
    await defineWorkload(stack, 'orders', orders(1), 3);
    const databaseUrl = stack.databaseUrl;
    // under load until the rollout has ended, then stopped: the audit counts what was written
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'orders_in', partitions: 6, ratePerSec: 300, count: 2400, signal: stopLoad.signal });
    await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: 'orders_in', sink: 'orders_out' })).sinkCount > 200);

    const put = await stack.api('PUT', '/v1/workloads/orders', { body: orders(2) });
    expect(put).toMatchObject({ status: 202, body: { workflowId: 'scale:orders', kind: 'rollout' } });
    const done = await operation(put.body.workflowId, put.body.runId);
    stopLoad.abort();
    const written = await load;
    expect(done.status).toBe('completed');
    expect(done.result.steps.map((s: { role: string; outcome: string }) => `${s.role} ${s.outcome}`)).toEqual(['canary good', 'batch good']);
    const state = await stateOf('orders');
    expect(state.tasks.map((t: { revision: string }) => t.revision)).toEqual([put.body.revision.to, put.body.revision.to, put.body.revision.to]);

    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl, source: 'orders_in', sink: 'orders_out' });
      return a.sinkCount >= written.written ? a : null;
    }, 60_000);
    expect(audit).toMatchObject({ sourceCount: written.written, sinkCount: written.written, missing: 0, duplicates: 0, extra: 0, orderViolations: 0 });
    expect(await ownershipOverlaps({ databaseUrl, workload: 'orders' })).toEqual([]);
  });
});
