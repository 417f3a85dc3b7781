// One chaos run (issue 20): a real stack of its own (its own PostgreSQL and Temporal, so pausing
// them touches nothing else; two API processes behind a load balancer, two workers, three
// agents), a service, a consumer and a stream job under continuous load, the seeded schedule of
// harness/chaos/schedule.ts played against it, every fault undone, then harness/chaos/checker.ts judges
// what it can see from outside. `npm run chaos` (scripts/chaos.ts) and the CI subset
// (test/integration/chaos.test.ts) both run this.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ServiceProcess } from '../../embedded/processes';
import { runLoad } from '../../store/source-feed';
import { TEST_ENV_VAR, testEnv } from '../env';
import { startSharedServers, type SharedServers } from '../shared-servers';
import { startHostStack, type HostStack } from '../host-stack';
import { clockSkewSupportMissing, hostNetworkSupportMissing, type Cut } from '../hosts';
import { startStack, type Stack } from '../stack';
import { defineWorkload } from '../workloads';
import { CHAOS_RUN_VAR, checkAfterChaos, leftoverProcesses, type Violation } from './checker';
import {
  buildSchedule, CHAOS_AGENTS, CHAOS_CONSUMER, CHAOS_JOB, CHAOS_SERVICE, CHAOS_TABLES, CHAOS_TIER, describeStep, type ChaosAction, type ChaosStep,
} from './schedule';
import { setTimeout as sleep } from 'node:timers/promises';

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
  /** on the multi-host stack: every nemesis and process fault, each with when it began and was healed (ms since the schedule started) */
  nemeses?: NemesisWindow[];
  /** batches a fenced (superseded) owner tried to commit, refused by the owner fence, as the agents logged them */
  writesRefused?: number;
  durationMs: number;
  /** with a violation: the stack's last log lines (every process), kept in a file for the investigation */
  logFile?: string;
}

export interface NemesisWindow {
  step: number;
  kind: string;
  /** the runtime it hit; null for the control plane's own cuts */
  runtime: string | null;
  fromMs: number;
  toMs: number | null;
  detail: string;
}

export interface ChaosOptions {
  seed: number;
  steps: number;
  faults?: boolean;
  /** a deliberately broken build the checker must catch (agent/config.ts testBreak) */
  testBreak?: 'drain-skips-commit' | 'owner-fence-unchecked';
  /** each agent on a host of its own (harness/host-stack.ts), and the network nemeses in the schedule */
  network?: boolean;
  log?: (line: string) => void;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => {});
  const started = Date.now();
  const schedule = buildSchedule(options.seed, options.steps, { faults: options.faults, network: options.network });
  if (options.network) {
    const missing = hostNetworkSupportMissing() ?? clockSkewSupportMissing();
    if (missing) throw new Error(`a chaos run with network nemeses cannot run here: ${missing}`);
  }
  // Servers of its own: a paused PostgreSQL or Temporal must not touch anything else running. Under
  // jest, the run's workflow bundle and stack entries (the same code) rather than bundling them again.
  const announced = process.env[TEST_ENV_VAR];
  const servers: SharedServers = await startSharedServers({ prefix: `scalegate-chaos-${options.seed}`, bundles: announced ? testEnv() : undefined });
  let stack: Stack | null = null;
  let hosts: HostStack | null = null;
  const violations: Violation[] = [];
  try {
    if (options.network) {
      // One zone for the three hosts: a partitioned node is one of three, not a zone's mass expiry,
      // so the lease sweeper declares it LOST and recovery moves its work (what the fences are for).
      hosts = await startHostStack({
        nodes: CHAOS_AGENTS.length, ids: CHAOS_AGENTS, labels: () => ({ zone: 'h' }), slots: 12, apis: 2, workers: 2, leaseTtlMs: 3000,
        skewableClocks: true, controlPlaneRelays: true,
        ...(options.testBreak ? { agentEnv: () => ({ SCALEGATE_TEST_BREAK: options.testBreak }) } : {}),
      });
      stack = hosts.stack;
    } else {
      stack = await startStack({
        apis: 2, workers: 2, leaseTtlMs: 3000,
        ...(options.testBreak ? { env: { SCALEGATE_TEST_BREAK: options.testBreak } } : {}),
        agents: CHAOS_AGENTS.map((id, i) => ({ id, labels: { zone: String.fromCharCode(97 + i) }, slots: 12 })),
      });
    }
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
    const nemeses: NemesisWindow[] = [];
    const t0 = Date.now();
    for (const step of schedule) {
      const record: StepRecord = { index: step.index, step: describeStep(step), atMs: Date.now() - t0, result: '' };
      try {
        record.result = await act(s, servers, step, { down, undo, faults, hosts, nemeses, t0 });
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

    violations.push(...(await checkAfterChaos(s, servers, log, hosts ? { nemeses, t0, leaseTtlMs: 3000 } : undefined)));
    // The processes' logs live in memory with the stack: a violation keeps them for whoever investigates.
    const logFile = violations.length ? path.join(os.tmpdir(), `scalegate-chaos-seed-${options.seed}-${Date.now()}.log`) : undefined;
    if (logFile) fs.writeFileSync(logFile, `${s.logs.join('\n')}\n`);
    const operations = await operationsByOutcome(s);
    const counts = async (table: string) => (await s.db.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0].n;
    const report: ChaosReport = {
      seed: options.seed, steps: options.steps, schedule: records, faults, operations,
      records: { orders: await counts(CHAOS_TABLES.orders.source), clicks: await counts(CHAOS_TABLES.clicks.source) },
      violations, durationMs: 0, ...(logFile ? { logFile } : {}),
      ...(hosts ? { nemeses, writesRefused: refusedWrites(s.logs).length } : {}),
    };
    if (hosts) await hosts.stop();
    else await s.stop();
    stack = null;
    hosts = null;
    // No process of the stack is left once it stopped.
    report.violations.push(...leftoverProcesses(s.home).map((p) => ({ check: 'processes-left', detail: p })));
    report.durationMs = Date.now() - started;
    return report;
  } finally {
    if (hosts) await hosts.stop().catch(() => {});
    else await stack?.stop().catch(() => {});
    await servers.stop().catch(() => {});
    if (announced === undefined) delete process.env[TEST_ENV_VAR];
    else process.env[TEST_ENV_VAR] = announced;
  }
}

interface ActContext {
  down: Set<string>;
  undo: Promise<unknown>[];
  faults: Record<string, number>;
  /** the multi-host stack, when the run has one (the network nemeses need it) */
  hosts: HostStack | null;
  nemeses: NemesisWindow[];
  t0: number;
}

/** The consumer batches a fenced owner tried to commit (agent log event consumer.write-refused), from the stack's logs. */
export function refusedWrites(logs: readonly string[]): Record<string, unknown>[] {
  return logs.filter((line) => line.startsWith('[agent:') && line.includes('"event":"consumer.write-refused"'))
    .map((line) => JSON.parse(line.slice(line.indexOf(' ') + 1)) as Record<string, unknown>);
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
      return fault(stack, step.index, a, ctx);
    case 'unwritable':
      return unwritableFolder(stack, a, ctx);
    case 'partition':
    case 'slow-link':
    case 'clock-skew':
    case 'cut-store':
      return nemesis(stack, step, a, ctx);
    case 'pause': {
      const target = `server:${a.server}`;
      if (ctx.down.has(target)) return 'already paused';
      const pids = a.server === 'postgres' ? postgresPids(servers) : [servers.temporal.pid].filter((p): p is number => typeof p === 'number');
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      const window: NemesisWindow = { step: step.index, kind: `pause ${a.server}`, runtime: null, fromMs: Date.now() - ctx.t0, toMs: null, detail: `${pids.length} process(es)` };
      ctx.nemeses.push(window);
      ctx.down.add(target);
      ctx.faults[`pause ${a.server}`] = (ctx.faults[`pause ${a.server}`] ?? 0) + 1;
      ctx.undo.push(sleep(a.durationMs).then(() => {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
        window.toMs = Date.now() - ctx.t0;
        ctx.down.delete(target);
      }));
      return `paused ${pids.length} process(es)`;
    }
  }
}

type NetworkAction = Extract<ChaosAction, { kind: 'partition' | 'slow-link' | 'clock-skew' | 'cut-store' }>;

/**
 * A network nemesis on the multi-host stack: applied now, healed after its duration, its window
 * recorded (when it began and when it was healed) for the report and the checker.
 */
function nemesis(stack: Stack, step: ChaosStep, a: NetworkAction, ctx: ActContext): string {
  const hosts = ctx.hosts;
  if (!hosts) return 'skipped: no multi-host stack (run with network nemeses)';
  const runtime = a.kind === 'cut-store' ? null : CHAOS_AGENTS[a.index];
  const target = a.kind === 'cut-store' ? `store:${a.store}` : a.kind === 'clock-skew' ? `clock:${runtime}` : `link:${runtime}`;
  if (ctx.down.has(target)) return 'already impaired';
  let detail: string;
  let heal: () => void;
  if (a.kind === 'cut-store') {
    const relay = hosts.controlPlane![a.store];
    relay.blackhole();
    heal = () => relay.open();
    detail = `the API and workers' ${a.store} connections blackholed`;
  } else if (a.kind === 'clock-skew') {
    // The clock has a heal of its own: a skew may overlap a cut or a slow link of the same node.
    const node = hosts.hosts[runtime!]!;
    hosts.network.skew(node, a.seconds);
    heal = () => hosts.network.skew(node, 0);
    detail = `${runtime}'s clock ${a.seconds > 0 ? '+' : ''}${a.seconds} s`;
  } else {
    const node = hosts.hosts[runtime!]!;
    if (a.kind === 'partition') {
      const cut: Cut = a.cut === 'isolate' ? { kind: 'isolate' }
        : a.cut === 'inbound' ? { kind: 'inbound', agentPort: hosts.agentPort(runtime!) }
          : a.cut === 'to-api' ? { kind: 'to-api', apiPort: hosts.apiPort }
            : { kind: 'control-plane', apiPort: hosts.apiPort, agentPort: hosts.agentPort(runtime!) };
      hosts.network.cut(node, cut);
      detail = `${a.cut} cut of ${node.ns} (${node.address})`;
    } else {
      detail = `${node.ns} (${node.address}) slowed and lossy by ${hosts.network.slow(node)}`;
    }
    heal = () => hosts.network.heal(node);
  }
  const window: NemesisWindow = { step: step.index, kind: a.kind === 'partition' ? `partition ${a.cut}` : a.kind, runtime, fromMs: Date.now() - ctx.t0, toMs: null, detail };
  ctx.nemeses.push(window);
  ctx.down.add(target);
  ctx.faults[window.kind] = (ctx.faults[window.kind] ?? 0) + 1;
  ctx.undo.push(sleep(a.durationMs).then(() => {
    heal();
    window.toMs = Date.now() - ctx.t0;
    ctx.down.delete(target);
  }));
  return detail;
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
async function fault(stack: Stack, stepIndex: number, a: Extract<ChaosAction, { kind: 'kill' }>, ctx: ActContext): Promise<string> {
  const target = `${a.process}:${a.index}`;
  if (ctx.down.has(target)) return 'already down';
  let victim: ServiceProcess;
  let restart: () => Promise<unknown>;
  if (a.process === 'agent') {
    const id = CHAOS_AGENTS[a.index];
    const agent = stack.agents[id];
    victim = agent.process;
    restart = () => stack.startAgent({ ...(ctx.hosts?.agentSpec(id) ?? { id, labels: { zone: String.fromCharCode(97 + a.index) }, slots: 12 }), waitReady: false });
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
  const window: NemesisWindow = { step: stepIndex, kind: `${a.signal} ${a.process}`, runtime: a.process === 'agent' ? CHAOS_AGENTS[a.index] : null, fromMs: Date.now() - ctx.t0, toMs: null, detail: `pid ${victim.child.pid}` };
  ctx.nemeses.push(window);
  ctx.down.add(target);
  ctx.faults[`${a.signal} ${a.process}`] = (ctx.faults[`${a.signal} ${a.process}`] ?? 0) + 1;
  victim.kill(a.signal);
  ctx.undo.push(sleep(a.durationMs).then(async () => {
    if (a.signal === 'SIGSTOP') victim.kill('SIGCONT');
    else {
      await victim.exited;
      await restart().catch(() => {});
    }
    window.toMs = Date.now() - ctx.t0;
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
