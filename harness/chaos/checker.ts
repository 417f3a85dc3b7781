// The chaos checker (issue 20): it trusts only what it can see from outside the control plane:
// SQL on the stack's database, the agents' own task lists, Temporal's visibility and the process
// table. It waits for the stack to settle after the schedule (bounded), then judges:
//   - every operation ended with a status (ScalegateOutcome) and none is still running; none failed;
//   - one lease sweeper and one reconcile loop run, and each operation run wrote one ledger row;
//   - the consumer's sink equals its source: nothing lost, nothing doubled, in order, and no two
//     tasks ever held one partition;
//   - the stream sink counts every key as often as its source rows, shows exactly the last
//     completed checkpoint, and checkpoints still complete (no clock left paused);
//   - each workload's placement is its desired size (or listed unplaced with a reason) and equals
//     its live tasks, one OS process per service task and none of a task no placement holds;
//   - no partition of the consumer was written by two live owners, as the sink shows it (issue 35);
//   - on the multi-host stack (network nemeses): a task a healed node revoked is one recovery moved
//     (no longer placed), and an agent whose clock was skewed, and nothing else was done to, was
//     not declared LOST meanwhile (leases are judged on the control plane's clock only).
import fs from 'node:fs';
import { duplicateTaskIds } from '../../domain/task-identity';
import { auditStreamCheckpoint, auditStreamSink, ownershipOverlaps, sinkWriterInterleavings, verifyExactlyOnce } from '../../store/sink-audit';
import type { SharedServers } from '../shared-servers';
import type { Stack } from '../stack';
import { waitFor } from '../wait-for';
import { tasksOf } from '../workloads';
import { CHAOS_CONSUMER, CHAOS_JOB, CHAOS_SERVICE, CHAOS_TABLES, CHAOS_WORKLOADS } from './schedule';
import { skewedAgentsDeclaredLost, type FaultWindow, type LostEvent } from './verdicts';

export interface Violation {
  check: string;
  detail: string;
}

const LOOPS = ['reconcile', 'leaseSweeper', 'autoscaler', 'handleSubtaskFailures'];

/** Polls `probe` (harness/wait-for.ts) until it answers non-null; null once `timeoutMs` passed. */
const settleWithin = <T>(timeoutMs: number, probe: () => Promise<T | null>): Promise<T | null> =>
  waitFor('the stack to settle', () => probe().catch(() => null), { timeoutMs, intervalMs: 500 }).then((value) => value as T, () => null);

async function runningOperations(stack: Stack): Promise<string[]> {
  const running: string[] = [];
  for await (const run of stack.temporal.workflow.list({ query: `TaskQueue = '${stack.taskQueue}' AND ExecutionStatus = 'Running'` })) {
    if (!LOOPS.includes(run.type)) running.push(`${run.workflowId} (${run.type})`);
  }
  return running;
}

export async function checkAfterChaos(
  stack: Stack, _servers: SharedServers, log: (line: string) => void,
  network?: { nemeses: readonly FaultWindow[]; t0: number; leaseTtlMs: number },
): Promise<Violation[]> {
  const violations: Violation[] = [];
  /** settleWithin, saying how long `what` took to settle: where a slow run spent its time */
  const settle = async <T>(what: string, timeoutMs: number, probe: () => Promise<T | null>): Promise<T | null> => {
    const startedAt = Date.now();
    const value = await settleWithin(timeoutMs, probe);
    log(`${what}: ${value === null ? 'not settled' : 'settled'} in ${Date.now() - startedAt} ms`);
    return value;
  };
  const violate = (check: string, detail: string) => {
    log(`VIOLATION ${check}: ${detail}`);
    violations.push({ check, detail });
  };

  // 1. Every operation ends.
  let lastRunning = '';
  const checkStartedAt = Date.now();
  const stillRunning = await settle('every operation ended', 240_000, async () => {
    const running = await runningOperations(stack);
    // each change of what still runs, with when: what a slow settle waited for
    if (running.join(', ') !== lastRunning) log(`after ${Date.now() - checkStartedAt} ms still running: ${running.join(', ') || 'nothing'}`);
    lastRunning = running.join(', ');
    return running.length === 0 ? true : null;
  });
  if (!stillRunning) violate('operations-running', (await runningOperations(stack)).join(', '));
  for await (const run of stack.temporal.workflow.list({ query: `TaskQueue = '${stack.taskQueue}' AND ExecutionStatus != 'Running'` })) {
    if (LOOPS.includes(run.type) || run.type === 'ping') continue;
    const outcome = (run.searchAttributes?.ScalegateOutcome as string[] | undefined)?.[0];
    if (run.status.name !== 'COMPLETED' && run.status.name !== 'FAILED' && run.status.name !== 'CANCELLED') {
      violate('operation-ended-badly', `${run.workflowId} ${run.type} ${run.status.name}`);
    } else if (!outcome) {
      violate('operation-without-outcome', `${run.workflowId} ${run.type} ${run.status.name}`);
    } else if (outcome === 'failed') {
      const reason = await stack.temporal.workflow.getHandle(run.workflowId, run.runId).result().then(
        (result) => `completed with outcome failed: ${JSON.stringify((result as { error?: unknown })?.error ?? result).slice(0, 300)}`,
        (e: Error) => rootCause(e),
      );
      violate('operation-failed', `${run.workflowId} ${run.type}: ${reason}`);
    }
  }

  // 1b. The control plane ran twice over (two APIs, two workers), each thing once: one lease
  // sweeper and one reconcile loop running, and one ledger row per operation run (its end).
  for (const loop of ['reconcile', 'leaseSweeper']) {
    let running = 0;
    for await (const run of stack.temporal.workflow.list({ query: `TaskQueue = '${stack.taskQueue}' AND WorkflowType = '${loop}' AND ExecutionStatus = 'Running'` })) {
      if (run.type === loop) running += 1;
    }
    if (running !== 1) violate('loop-not-single', `${loop}: ${running} running`);
  }
  const doubled = await stack.db.query<{ workflow_id: string; run_id: string; rows: number }>(
    `select workflow_id, run_id, count(*)::int as rows from ledger where run_id is not null and kind <> 'autoscale' group by 1, 2 having count(*) > 1`);
  for (const r of doubled.rows) violate('ledger-rows-per-operation', `${r.workflow_id} (run ${r.run_id}): ${r.rows} ledger rows`);

  // 2. Placement = desired (or unplaced) = live tasks, once the reconcile loop had its passes.
  const notConverged = async () => {
    const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    return (state.workloads as any[]).filter((w) => CHAOS_WORKLOADS.includes(w.name) && w.status !== 'retired')
      .filter((w) => !(w.ready === w.placed && (w.placed === w.desired || state.unplaced.some((u: any) => u.workload === w.name))));
  };
  if (!(await settle('placement converged', 120_000, async () => ((await notConverged()).length === 0 ? true : null)))) {
    for (const w of await notConverged()) violate('placement-not-converged', `${w.name}: desired ${w.desired}, placed ${w.placed}, ready ${w.ready}, status ${w.status}`);
  }
  // The agents' own task lists equal the placement (a task recovery moved away is revoked at its
  // runtime's next heartbeat and drained: that is waited for, bounded).
  const taskMismatches = async (): Promise<Violation[]> => {
    const found: Violation[] = [];
    const now = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    // Every agent answers (all faults are undone): one that does not yet (restarting, its host's
    // link just healed) is not settled, never "runs nothing" (network seed 37: a restarted agent's
    // adopted task, not yet revoked, was missed that way and its process outlived the settle).
    for (const runtimeId of Object.keys(stack.agents)) {
      const answer = await stack.agentApi(runtimeId, 'GET', '/v1/tasks').catch((error: Error) => ({ status: 0, body: error.message }));
      if (answer.status !== 200) found.push({ check: 'agent-not-answering', detail: `${runtimeId}: ${answer.status || answer.body}` });
    }
    for (const name of CHAOS_WORKLOADS) {
      const workload = (now.workloads as any[]).find((w) => w.name === name);
      const assigned = new Set<string>((workload?.placement?.assignments ?? []).map((a: any) => `${a.runtimeId}/${a.taskId}`));
      const live = (await tasksOf(stack, name)).filter((t) => !['stopped', 'failed'].includes(t.state));
      const liveKeys = new Set(live.map((t) => `${t.runtimeId}/${t.taskId}`));
      for (const key of assigned) if (!liveKeys.has(key)) found.push({ check: 'placed-task-not-running', detail: `${name}: ${key}` });
      for (const key of liveKeys) if (!assigned.has(key)) found.push({ check: 'task-without-placement', detail: `${name}: ${key}` });
    }
    return found;
  };
  if (!(await settle('live tasks match placement', 60_000, async () => ((await taskMismatches()).length === 0 ? true : null)))) {
    for (const v of await taskMismatches()) violate(v.check, v.detail);
  }
  const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
  // Task identity (DESIGN.md §3): no placement names one task id twice, and every partition of the
  // consumer's placement has exactly one owner (the invariants test/integration/operation-sequences checks after each step).
  for (const w of state.workloads as any[]) {
    if (!CHAOS_WORKLOADS.includes(w.name)) continue;
    const assignments: { taskId: string; partitions?: number[] }[] = w.placement?.assignments ?? [];
    for (const id of duplicateTaskIds(assignments)) violate('task-id-repeated', `${w.name}: ${id} names more than one replica`);
    if (w.name !== CHAOS_CONSUMER || assignments.length === 0) continue;
    const owners: Record<number, number> = {};
    for (const partition of assignments.flatMap((a) => a.partitions ?? [])) owners[partition] = (owners[partition] ?? 0) + 1;
    const partitions = Number((await stack.api('GET', `/v1/workloads/${w.name}`, { role: 'viewer' })).body.spec?.partitions ?? 0);
    for (let p = 0; p < partitions; p++) if (owners[p] !== 1) violate('partition-owners', `${w.name}: partition ${p} has ${owners[p] ?? 0} owners in the placement`);
  }
  // One OS process per service task, none for a task no placement holds.
  const serviceAssignments = new Set<string>((((state.workloads as any[]).find((w) => w.name === CHAOS_SERVICE)?.placement?.assignments ?? []) as any[]).map((a) => a.taskId));
  const processes = taskProcesses().filter((p) => p.run === stack.home);
  for (const taskId of serviceAssignments) {
    const count = processes.filter((p) => p.taskId === taskId).length;
    if (count !== 1) violate('processes-per-task', `${taskId}: ${count} process(es)`);
  }
  for (const p of processes) {
    if (p.taskId.startsWith(`${CHAOS_SERVICE}-`) && !serviceAssignments.has(p.taskId)) violate('process-without-placement', `pid ${p.pid} task ${p.taskId}`);
  }

  // 3. The consumer: its sink equals its source once it caught up.
  const orders = await settle('orders records in the sink', 120_000, async () => {
    const audit = await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: CHAOS_TABLES.orders.source, sink: CHAOS_TABLES.orders.sink });
    return audit.missing === 0 ? audit : null;
  }) ?? await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: CHAOS_TABLES.orders.source, sink: CHAOS_TABLES.orders.sink });
  for (const field of ['missing', 'duplicates', 'extra', 'orderViolations', 'keyMismatches'] as const) {
    if (orders[field] !== 0) violate(`consumer-${field}`, `${CHAOS_CONSUMER}: ${orders[field]} (source ${orders.sourceCount}, sink ${orders.sinkCount})`);
  }
  const overlaps = await ownershipOverlaps({ databaseUrl: stack.databaseUrl, workload: CHAOS_CONSUMER });
  if (overlaps.length) violate('consumer-ownership-overlap', JSON.stringify(overlaps.slice(0, 5)));
  // Two live owners as the sink sees them: a writer whose rows come back after another's without acquiring again.
  const interleaved = await sinkWriterInterleavings(stack.db, { workload: CHAOS_CONSUMER, sink: CHAOS_TABLES.orders.sink });
  if (interleaved.length) violate('consumer-two-live-owners', `${interleaved.length} run(s), e.g. ${JSON.stringify(interleaved.slice(0, 5))}`);
  if (network) violations.push(...(await networkChecks(stack, network, violate)));

  // 4. The stream job: a checkpoint covers every record, the sink is exact, checkpoints go on.
  const total = (await stack.db.query<{ n: number }>(`select count(*)::int as n from ${CHAOS_TABLES.clicks.source}`)).rows[0].n;
  const covered = await settle('a checkpoint covering every clicks record', 120_000, async () => {
    const audit = await auditStreamCheckpoint(stack.db, { job: CHAOS_JOB, source: CHAOS_TABLES.clicks.source, sink: CHAOS_TABLES.clicks.sink });
    return audit.coveredSourceRows === total ? audit : null;
  });
  if (!covered) violate('stream-checkpoint-behind', `${CHAOS_JOB}: no completed checkpoint covers all ${total} records`);
  else if (!covered.consistent) violate('stream-sink-beyond-checkpoint', `${CHAOS_JOB}: ${JSON.stringify(covered)}`);
  const sink = await auditStreamSink(stack.db, { source: CHAOS_TABLES.clicks.source, sink: CHAOS_TABLES.clicks.sink });
  if (!sink.exact) violate('stream-not-exactly-once', `${CHAOS_JOB}: source ${sink.sourceRows}, sink ${sink.sinkTotal}, mismatched keys ${sink.mismatchedKeys}, extra keys ${sink.extraKeys}`);
  const lastCheckpoint = async () => (await stack.api('GET', `/v1/jobs/${CHAOS_JOB}`, { role: 'viewer' })).body?.lastCompletedCheckpoint?.id ?? 0;
  const before = await lastCheckpoint();
  if ((await settle('the stream checkpoint advancing', 30_000, async () => ((await lastCheckpoint()) > before ? true : null))) === null) {
    violate('checkpoint-clock-stopped', `${CHAOS_JOB}: no checkpoint completed after ${before} within 30 s`);
  }
  return violations;
}

/** The agent events of the stack's logs (its JSON lines), with the runtime that logged them. */
function agentEvents(logs: readonly string[], event: string): { runtime: string; fields: Record<string, any> }[] {
  const found: { runtime: string; fields: Record<string, any> }[] = [];
  for (const line of logs) {
    const match = /^\[agent:([^\]]+)\] (\{.*\})$/.exec(line);
    if (!match || !match[2]!.includes(`"event":"${event}"`)) continue;
    try {
      found.push({ runtime: match[1]!, fields: JSON.parse(match[2]!) });
    } catch {
      // a line that is not whole JSON
    }
  }
  return found;
}

async function networkChecks(
  stack: Stack, network: { nemeses: readonly FaultWindow[]; t0: number; leaseTtlMs: number }, violate: (check: string, detail: string) => void,
): Promise<Violation[]> {
  // A healed node stops exactly what recovery moved: every task it revoked is placed no more.
  const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
  const placed = new Set<string>((state.workloads as any[]).flatMap((w) => (w.placement?.assignments ?? []).map((a: any) => a.taskId as string)));
  for (const { runtime, fields } of agentEvents(stack.logs, 'revoking tasks')) {
    for (const taskId of fields.taskIds as string[]) if (placed.has(taskId)) violate('revoked-task-still-placed', `${runtime} revoked ${taskId}, which the placement still holds (${fields.reason})`);
  }
  // Leases never depend on an agent's clock: a node whose clock alone was skewed is not declared LOST meanwhile.
  const { rows: lost } = await stack.db.query<LostEvent>(`select subject, at, detail->>'by' as by from events where type = 'runtime.lost' order by id`);
  for (const detail of skewedAgentsDeclaredLost(network.nemeses, lost, network.t0, network.leaseTtlMs, Date.now())) violate('skewed-agent-declared-lost', detail);
  return [];
}

/** The innermost message of a failure, with the activity that failed when there is one. */
function rootCause(error: Error): string {
  const parts: string[] = [];
  let current: unknown = error;
  while (current instanceof Error) {
    const activity = (current as { activityType?: string }).activityType;
    if (activity) parts.push(`activity ${activity}`);
    if (!(current.cause instanceof Error)) parts.push(current.message);
    current = current.cause;
  }
  return parts.join(': ');
}

/** The service tasks' environment variable naming their chaos run (the stack's home folder). */
export const CHAOS_RUN_VAR = 'SCALEGATE_CHAOS_RUN';

interface SeenProcess {
  pid: number;
  taskId: string;
  home: string | null;
  /** the chaos run a task belongs to (CHAOS_RUN_VAR), null when it names none */
  run: string | null;
}

/** Task processes on this machine (their environment names SCALEGATE_TASK_ID), by pid. */
export function taskProcesses(): SeenProcess[] {
  const found: SeenProcess[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string;
    try {
      environ = fs.readFileSync(`/proc/${entry}/environ`, 'utf8');
    } catch {
      continue; // gone, or not ours to read
    }
    const vars = environ.split('\0');
    const taskId = vars.find((v) => v.startsWith('SCALEGATE_TASK_ID='))?.slice('SCALEGATE_TASK_ID='.length);
    const home = vars.find((v) => v.startsWith('SCALEGATE_HOME='))?.slice('SCALEGATE_HOME='.length) ?? null;
    const run = vars.find((v) => v.startsWith(`${CHAOS_RUN_VAR}=`))?.slice(CHAOS_RUN_VAR.length + 1) ?? null;
    if (taskId || home) found.push({ pid: Number(entry), taskId: taskId ?? '', home, run });
  }
  return found;
}

/** Processes of the run still alive after its stack stopped: the stack's own (SCALEGATE_HOME) and its service tasks (CHAOS_RUN_VAR). */
export function leftoverProcesses(home: string): string[] {
  return taskProcesses()
    .filter((p) => p.home === home || p.run === home)
    .filter((p) => p.pid !== process.pid)
    .map((p) => `pid ${p.pid}${p.taskId ? ` task ${p.taskId}` : ''}${p.home ? ` home ${p.home}` : ''}`);
}
