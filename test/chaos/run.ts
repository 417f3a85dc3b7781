// One chaos run (issue 20): a real stack of its own (its own PostgreSQL and Temporal, so pausing
// them touches nothing else; two API processes behind a load balancer, two workers, three
// agents), a service, a consumer and a stream job under continuous load, the seeded schedule of
// test/chaos/schedule.ts played against it, every fault undone, then test/chaos/checker.ts judges
// what it can see from outside. `npm run chaos` (scripts/chaos.ts) and the CI subset
// (test/integration/chaos.test.ts) both run this.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ServiceProcess } from '../../embedded/processes';
import { runLoad } from '../../store/source-feed';
import { TEST_ENV_VAR, testEnv } from '../support/env';
import { startSharedServers, type SharedServers } from '../support/shared-servers';
import { startStack, type Stack } from '../support/stack';
import { defineWorkload } from '../support/workloads';
import { CHAOS_RUN_VAR, checkAfterChaos, leftoverProcesses, type Violation } from './checker';
import {
  buildSchedule, CHAOS_AGENTS, CHAOS_CONSUMER, CHAOS_JOB, CHAOS_SERVICE, CHAOS_TABLES, CHAOS_TIER, describeStep, type ChaosAction, type ChaosStep,
} from './schedule';

const FIXTURE = path.resolve(__dirname, '../fixtures/http-server.js');

/**
 * The workloads of one run. `run` (the stack's home folder) is in the service's task environment,
 * so the checker counts this run's task processes only, not another run's on the same machine.
 */
export const chaosDefinitions = (run: string) => ({
  [CHAOS_SERVICE]: {
    kind: 'service', replicas: 2, selector: {},
    contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
    spec: { command: [process.execPath, FIXTURE], env: { [CHAOS_RUN_VAR]: run }, readiness: { http: '/healthz' }, graceMs: 500 },
  },
  [CHAOS_CONSUMER]: {
    kind: 'consumer', replicas: 2, selector: {},
    contract: { ownership: 'partitioned', partitions: CHAOS_TABLES.orders.partitions, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
    spec: { partitions: CHAOS_TABLES.orders.partitions, source: CHAOS_TABLES.orders.source, sink: CHAOS_TABLES.orders.sink },
  },
  [CHAOS_JOB]: {
    kind: 'stream', selector: {},
    contract: { ownership: 'partitioned', partitions: CHAOS_TABLES.clicks.partitions, state: 'checkpointed', ordering: 'per-key', delivery: 'exactly-once', recovery: 'replay-from-checkpoint', downstream: 'none' },
    spec: {
      source: CHAOS_TABLES.clicks.source, sink: CHAOS_TABLES.clicks.sink, partitions: CHAOS_TABLES.clicks.partitions, checkpointIntervalMs: 500, maxParallelism: 16,
      operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1 }],
    },
  },
});

export interface StepRecord {
  index: number;
  step: string;
  /** ms since the schedule started */
  atMs: number;
  result: string;
}

export interface ChaosReport {
  seed: number;
  steps: number;
  /** every step with its time and what came back */
  schedule: StepRecord[];
  faults: Record<string, number>;
  /** closed operations by type and final status (ScalegateOutcome) */
  operations: Record<string, Record<string, number>>;
  records: { orders: number; clicks: number };
  violations: Violation[];
  durationMs: number;
  /** with a violation: the stack's last log lines (every process), kept in a file for the investigation */
  logFile?: string;
}

export interface ChaosOptions {
  seed: number;
  steps: number;
  faults?: boolean;
  /** a deliberately broken build the checker must catch (agent/config.ts testBreak) */
  testBreak?: 'drain-skips-commit';
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => {});
  const started = Date.now();
  const schedule = buildSchedule(options.seed, options.steps, { faults: options.faults });
  // Servers of its own: a paused PostgreSQL or Temporal must not touch anything else running. Under
  // jest, the run's workflow bundle and stack entries (the same code) rather than bundling them again.
  const announced = process.env[TEST_ENV_VAR];
  const servers: SharedServers = await startSharedServers({ prefix: `scalegate-chaos-${options.seed}`, bundles: announced ? testEnv() : undefined });
  let stack: Stack | null = null;
  const violations: Violation[] = [];
  try {
    stack = await startStack({
      apis: 2, workers: 2, leaseTtlMs: 3000,
      ...(options.testBreak ? { env: { SCALEGATE_TEST_BREAK: options.testBreak } } : {}),
      agents: CHAOS_AGENTS.map((id, i) => ({ id, labels: { zone: String.fromCharCode(97 + i) }, slots: 12 })),
    });
    const s = stack;
    const definitions = chaosDefinitions(s.home);
    await defineWorkload(s, CHAOS_SERVICE, definitions[CHAOS_SERVICE], 2);
    await defineWorkload(s, CHAOS_CONSUMER, definitions[CHAOS_CONSUMER], 2);
    await defineWorkload(s, CHAOS_JOB, definitions[CHAOS_JOB], 4);
    const policy = { workloads: [CHAOS_SERVICE], minReplicas: 1, maxReplicas: 3, targets: { qpsPerInstance: 100 }, scaleDownStabilizationMs: 2_000, cooldownMs: 2_000 };
    const tier = await s.api('PUT', `/v1/tiers/${CHAOS_TIER}/policy`, { body: policy });
    if (tier.status >= 300) throw new Error(`tier policy: ${tier.status} ${JSON.stringify(tier.body)}`);

    const load = new AbortController();
    const loads = [CHAOS_TABLES.orders, CHAOS_TABLES.clicks].map((t) =>
      runLoad({ databaseUrl: s.databaseUrl, source: t.source, partitions: t.partitions, ratePerSec: 100, keySpace: 200, signal: load.signal })
        .catch((error: Error) => log(`load on ${t.source} stopped: ${error.message}`)));

    const faults: Record<string, number> = {};
    const undo: Promise<unknown>[] = [];
    const down = new Set<string>();
    const records: StepRecord[] = [];
    const t0 = Date.now();
    for (const step of schedule) {
      const record: StepRecord = { index: step.index, step: describeStep(step), atMs: Date.now() - t0, result: '' };
      try {
        record.result = await act(s, servers, step, { down, undo, faults });
      } catch (error) {
        record.result = `error: ${(error as Error).message}`;
      }
      records.push(record);
      log(`[${String(record.atMs).padStart(6)} ms] ${record.step}: ${record.result}`);
      await sleep(step.gapMs);
    }
    log('schedule done: undoing the faults still in effect, stopping the load');
    await Promise.all(undo);
    load.abort();
    await Promise.all(loads);

    violations.push(...(await checkAfterChaos(s, servers, log)));
    // The processes' logs live in memory with the stack: a violation keeps them for whoever investigates.
    const logFile = violations.length ? path.join(os.tmpdir(), `scalegate-chaos-seed-${options.seed}-${Date.now()}.log`) : undefined;
    if (logFile) fs.writeFileSync(logFile, `${s.logs.join('\n')}\n`);
    const operations = await operationsByOutcome(s);
    const counts = async (table: string) => (await s.db.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0].n;
    const report: ChaosReport = {
      seed: options.seed, steps: options.steps, schedule: records, faults, operations,
      records: { orders: await counts(CHAOS_TABLES.orders.source), clicks: await counts(CHAOS_TABLES.clicks.source) },
      violations, durationMs: 0, ...(logFile ? { logFile } : {}),
    };
    await s.stop();
    stack = null;
    // No process of the stack is left once it stopped.
    report.violations.push(...leftoverProcesses(s.home).map((p) => ({ check: 'processes-left', detail: p })));
    report.durationMs = Date.now() - started;
    return report;
  } finally {
    await stack?.stop().catch(() => {});
    await servers.stop().catch(() => {});
    if (announced === undefined) delete process.env[TEST_ENV_VAR];
    else process.env[TEST_ENV_VAR] = announced;
  }
}

interface ActContext {
  down: Set<string>;
  undo: Promise<unknown>[];
  faults: Record<string, number>;
}

/** The workflow running on a workload now, if any (scale:, rescale: or replan:). */
async function runningOn(stack: Stack, workload: string): Promise<string | null> {
  for (const prefix of ['scale', 'rescale', 'replan']) {
    const id = `${prefix}:${workload}`;
    const description = await stack.temporal.workflow.getHandle(id).describe().catch(() => null);
    if (description?.status.name === 'RUNNING') return id;
  }
  return null;
}

/** An operator's request: with an Idempotency-Key, retried on a 502/503 (nothing started) a few times. */
async function request(stack: Stack, method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const key = `chaos-${crypto.randomBytes(8).toString('hex')}`;
  let answer = { status: 0, body: null as any };
  for (let attempt = 0; attempt < 4; attempt++) {
    answer = await fetch(`${stack.apiUrl}${url}`, {
      method, signal: AbortSignal.timeout(70_000),
      headers: { authorization: `Bearer ${stack.tokens.operator}`, 'idempotency-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => null) }), (error: Error) => ({ status: 0, body: { message: error.message } }));
    if (![0, 502, 503].includes(answer.status)) return answer;
    await sleep(1_000);
  }
  return answer;
}

const said = (answer: { status: number; body: any }) => `${answer.status}${answer.body?.workflowId ? ` ${answer.body.workflowId}` : ''}${answer.body?.error ? ` ${answer.body.error}` : ''}`;

async function act(stack: Stack, servers: SharedServers, step: ChaosStep, ctx: ActContext): Promise<string> {
  const a: ChaosAction = step.action;
  switch (a.kind) {
    case 'scale':
      return said(await request(stack, 'POST', `/v1/workloads/${a.workload}/scale`, { replicas: a.replicas, reason: `chaos step ${step.index}`, soakMs: 500 }));
    case 'plan-apply': {
      const plan = await request(stack, 'POST', `/v1/workloads/${a.workload}/plan`, { replicas: a.replicas });
      if (plan.status !== 201) return `plan ${said(plan)}`;
      return `plan ${plan.body.id}, apply ${said(await request(stack, 'POST', `/v1/plans/${plan.body.id}/apply`, {}))}`;
    }
    case 'rescale':
      return said(await request(stack, 'POST', `/v1/jobs/${a.job}/operators/${a.operator}/rescale`, { parallelism: a.parallelism, reason: `chaos step ${step.index}` }));
    case 'recover':
      return said(await request(stack, 'POST', `/v1/runtimes/${a.runtime}/recover`));
    case 'tier-signal':
      return said(await request(stack, 'POST', `/v1/tiers/${CHAOS_TIER}/signals`, { qps: a.qps }));
    case 'cancel': {
      const id = await runningOn(stack, a.workload);
      if (!id) return 'nothing running';
      await stack.temporal.workflow.getHandle(id).cancel();
      return `cancelled ${id}`;
    }
    case 'abort': {
      const id = await runningOn(stack, a.workload);
      if (!id) return 'nothing running';
      return said(await request(stack, 'POST', `/v1/operations/${encodeURIComponent(id)}/abort`));
    }
    case 'redefine': {
      const retired = await request(stack, 'DELETE', `/v1/workloads/${a.workload}`);
      if (retired.status !== 202) return `retire ${said(retired)}`;
      // The retire ends (bounded), then the same definition again, as an operator would.
      await stack.temporal.workflow.getHandle(retired.body.workflowId, retired.body.runId).result().catch(() => null);
      return `retired, then ${said(await request(stack, 'PUT', `/v1/workloads/${a.workload}`, chaosDefinitions(stack.home)[a.workload]))}`;
    }
    case 'kill':
      return fault(stack, a, ctx);
    case 'unwritable':
      return unwritableFolder(stack, a, ctx);
    case 'pause': {
      const target = `server:${a.server}`;
      if (ctx.down.has(target)) return 'already paused';
      const pids = a.server === 'postgres' ? postgresPids(servers) : [servers.temporal.pid].filter((p): p is number => typeof p === 'number');
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      ctx.down.add(target);
      ctx.faults[`pause ${a.server}`] = (ctx.faults[`pause ${a.server}`] ?? 0) + 1;
      ctx.undo.push(sleep(a.durationMs).then(() => {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
        ctx.down.delete(target);
      }));
      return `paused ${pids.length} process(es)`;
    }
  }
}

/**
 * An agent's state folder (and the folders in it) made immutable: no file can be created, renamed
 * or removed there, by root too (chmod would not stop root). Made writable again after the duration.
 */
function unwritableFolder(stack: Stack, a: Extract<ChaosAction, { kind: 'unwritable' }>, ctx: ActContext): string {
  const id = CHAOS_AGENTS[a.index];
  const target = `folder:${id}`;
  if (ctx.down.has(target)) return 'already unwritable';
  const folders = execFileSync('find', [stack.agents[id].stateDir, '-type', 'd']).toString().trim().split('\n').filter(Boolean);
  const chattr = (flag: '+i' | '-i') => execFileSync('chattr', [flag, ...folders], { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    chattr('+i');
  } catch (error) {
    return `skipped: chattr +i is refused here (${(error as Error).message.split('\n')[0]})`;
  }
  ctx.down.add(target);
  ctx.faults['unwritable agent folder'] = (ctx.faults['unwritable agent folder'] ?? 0) + 1;
  ctx.undo.push(sleep(a.durationMs).then(() => {
    chattr('-i');
    ctx.down.delete(target);
  }));
  return `${folders.length} folder(s) of ${id} immutable`;
}

function postgresPids(servers: SharedServers): number[] {
  const postmaster = servers.env.postgresPid;
  if (!postmaster) return [];
  const children = (() => {
    try {
      return execFileSync('pgrep', ['-P', String(postmaster)]).toString().trim().split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  })();
  return [postmaster, ...children];
}

/** SIGKILL (started again after the duration) or SIGSTOP (continued after it) of one process. */
async function fault(stack: Stack, a: Extract<ChaosAction, { kind: 'kill' }>, ctx: ActContext): Promise<string> {
  const target = `${a.process}:${a.index}`;
  if (ctx.down.has(target)) return 'already down';
  let victim: ServiceProcess;
  let restart: () => Promise<unknown>;
  if (a.process === 'agent') {
    const id = CHAOS_AGENTS[a.index];
    const agent = stack.agents[id];
    victim = agent.process;
    restart = () => stack.startAgent({ id, labels: { zone: String.fromCharCode(97 + a.index) }, slots: 12, waitReady: false });
  } else if (a.process === 'worker') {
    victim = stack.workers[a.index];
    restart = async () => {
      const worker = await stack.startWorker();
      stack.workers.splice(stack.workers.indexOf(worker), 1);
      stack.workers[a.index] = worker;
    };
  } else {
    victim = stack.apis[a.index];
    restart = () => stack.startApi(a.index);
  }
  if (!victim || victim.child.exitCode !== null) return 'not running';
  ctx.down.add(target);
  ctx.faults[`${a.signal} ${a.process}`] = (ctx.faults[`${a.signal} ${a.process}`] ?? 0) + 1;
  victim.kill(a.signal);
  ctx.undo.push(sleep(a.durationMs).then(async () => {
    if (a.signal === 'SIGSTOP') victim.kill('SIGCONT');
    else {
      await victim.exited;
      await restart().catch(() => {});
    }
    ctx.down.delete(target);
  }));
  return `${a.signal} pid ${victim.child.pid}`;
}

/** Closed operations of the run by workflow type and ScalegateOutcome (the loops left out). */
async function operationsByOutcome(stack: Stack): Promise<Record<string, Record<string, number>>> {
  const byType: Record<string, Record<string, number>> = {};
  for await (const run of stack.temporal.workflow.list({ query: `TaskQueue = '${stack.taskQueue}' AND ExecutionStatus != 'Running'` })) {
    if (['reconcile', 'leaseSweeper', 'autoscaler', 'handleSubtaskFailures', 'ping'].includes(run.type)) continue;
    const outcome = (run.searchAttributes?.ScalegateOutcome as string[] | undefined)?.[0] ?? run.status.name.toLowerCase();
    byType[run.type] ??= {};
    byType[run.type][outcome] = (byType[run.type][outcome] ?? 0) + 1;
  }
  return byType;
}
