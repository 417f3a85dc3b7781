// bench/rollout: `npm run bench:rollout` (tsx bench/rollout.ts [runs]) prints one JSON object.
//
// A rollout of 3 container replicas (a new image: canary step of 1, then a batch of 2, each
// converged, soaked and compared) against a scale-out of 3 (1 → 4 replicas of the same service: 3
// new ones, one step, converged, soaked and compared), measured in the same run on a real stack:
// Temporal dev server, PostgreSQL, API, worker, 4 agents on a real Docker engine with a real registry. Each is
// timed from the request (PUT of the new image; POST .../scale) until the operation's workflow
// completed. Both soak `SOAK_MS` per step, so the ratio shows what the rollout's extra step and its
// make-before-break replacements cost. `runs` of each (default 3), alternating which goes first;
// medians compared as rollout / scaleOut.
import os from 'node:os';
import { buildBusyboxImage, BUSYBOX_HTTPD, type RunningEngine } from '../embedded/container-engine';
import { startSharedServers } from '../harness/shared-servers';
import { startStack, type Stack } from '../harness/stack';
import { tasksOf } from '../harness/workloads';

const RUNS = Number(process.argv[2] ?? 3);
const SOAK_MS = 1_000;
const CONTRACT = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const log = (line: string) => process.stderr.write(`[bench:rollout] ${line}\n`);
const service = (image: string, replicas: number) => ({
  kind: 'service', replicas, contract: CONTRACT, rollout: { soakMs: SOAK_MS },
  spec: { image, command: BUSYBOX_HTTPD, readiness: { http: '/index.html' }, limits: { cpus: 0.25, memoryMiB: 32 }, graceMs: 500 },
});

/** Waits for `name`'s replicas to be `replicas` ready tasks with nothing running on scale:<name>. */
async function settled(stack: Stack, name: string, replicas: number): Promise<void> {
  await stack.waitFor(`${name} settled at ${replicas}`, async () => {
    const ready = (await tasksOf(stack, name)).filter((t) => t.state === 'ready').length;
    const d = await stack.temporal.workflow.getHandle(`scale:${name}`).describe().catch(() => null);
    return ready === replicas && (d === null || d.status.name !== 'RUNNING');
  }, 120_000);
}

/** Runs an operation start and times it to its workflow's end; answers the wall time and its status. */
async function timed(stack: Stack, start: () => Promise<{ status: number; body: any }>): Promise<{ ms: number; status: string }> {
  const began = performance.now();
  const answer = await start();
  if (answer.status !== 202) throw new Error(`start answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  await stack.temporal.workflow.getHandle(answer.body.workflowId, answer.body.runId).result();
  const ms = performance.now() - began;
  const view = (await stack.api('GET', `/v1/operations/${encodeURIComponent(answer.body.workflowId)}?runId=${answer.body.runId}`, { role: 'viewer' })).body;
  return { ms, status: `${view.status}${view.status === 'completed' ? '' : `: ${view.evidenceGap ?? view.failure ?? view.result?.error ?? ''}`}` };
}

async function main(): Promise<void> {
  const servers = await startSharedServers({ prefix: 'scalegate-bench-rollout', containers: true, log });
  const containers = servers.env.containers;
  if (!containers) throw new Error(`no container engine here: ${servers.env.containersOff}`);
  const stack = await startStack({ leaseTtlMs: 15_000, agents: ['a', 'b', 'c', 'd'].map((zone) => ({ id: `bench-${zone}`, labels: { zone }, slots: 8 })) });
  try {
    const v2 = await buildBusyboxImage({
      engine: { address: containers.dockerHost } as RunningEngine, registry: containers.registry, repository: 'scalegate/web', tag: 'v2', workDir: os.tmpdir(), files: { 'www/index.html': 'v2\n' },
    });
    const versions = [containers.image, v2];
    const runs: { rollout: number[]; scaleOut: number[] } = { rollout: [], scaleOut: [] };
    for (let run = 0; run < RUNS; run++) {
      const [rolled, grown] = [`roll-${run}`, `grow-${run}`];
      await Promise.all([stack.api('PUT', `/v1/workloads/${rolled}`, { body: service(versions[0], 3) }), stack.api('PUT', `/v1/workloads/${grown}`, { body: service(versions[0], 1) })]);
      await Promise.all([settled(stack, rolled, 3), settled(stack, grown, 1)]);
      const rollout = () => timed(stack, () => stack.api('PUT', `/v1/workloads/${rolled}`, { body: service(versions[1], 3) }));
      const scaleOut = () => timed(stack, () => stack.api('POST', `/v1/workloads/${grown}/scale`, { body: { replicas: 4, soakMs: SOAK_MS } }));
      const order = run % 2 === 0 ? ([['rollout', rollout], ['scaleOut', scaleOut]] as const) : ([['scaleOut', scaleOut], ['rollout', rollout]] as const);
      for (const [kind, go] of order) {
        const { ms, status } = await go();
        if (status !== 'completed') throw new Error(`${kind} of run ${run} ended ${status}`);
        runs[kind].push(ms);
        log(`run ${run}: ${kind} ${Math.round(ms)} ms`);
      }
      for (const name of [rolled, grown]) {
        const retired = await stack.api('DELETE', `/v1/workloads/${name}`);
        await stack.temporal.workflow.getHandle(retired.body.workflowId, retired.body.runId).result();
      }
    }
    const summary = (values: number[]) => ({ msMedian: Math.round(median(values)), ms: values.map(Math.round) });
    process.stdout.write(`${JSON.stringify({
      bench: 'rollout', cpus: os.cpus().length, loadAverage: os.loadavg().map((l) => Math.round(l * 10) / 10), runs: RUNS, soakMsPerStep: SOAK_MS,
      rollout: { what: '3 container replicas v1 → v2: canary step of 1, then a batch of 2 (2 steps)', ...summary(runs.rollout) },
      scaleOut: { what: '1 → 4 container replicas: 3 new (1 step; a scale-out spreads them over runtimes not hosting the workload)', ...summary(runs.scaleOut) },
      rolloutToScaleOut: Math.round((median(runs.rollout) / median(runs.scaleOut)) * 100) / 100,
    }, null, 2)}\n`);
  } finally {
    await stack.stop();
    await servers.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
