// The CLI's readable renderings of the API's answers (cli/main.ts parses them with the protocol
// schemas first): one function per answer, each a few sections of fields and tables (cli/format.ts).

import { z } from 'zod';
import { OperationListSchema, PlanSchema, RuntimeViewSchema, StateSchema, StreamJobListSchema, WorkloadViewSchema, type Assignment, type LedgerEvent, type StartedOperation, type StreamJobView } from '../protocol';
import { TierListSchema } from '../protocol/tiers';
import { statusOf, type Observation, type OperationAnswer, type TierAnswer } from './answers';
import { fields, labels, relative, runtimesOf, section, table, type Cell } from './format';

/**
 * A workload's counts as /v1/state reports them (desired, placed, ready), and its status with the
 * tasks that are placed but not ready named by number, so a failed task never reads as `placed`.
 */
type StateAnswer = z.output<typeof StateSchema>;

export function workloadCounts(w: StateAnswer['workloads'][number]): [Cell, Cell, Cell, Cell] {
  const placed = w.placed ?? w.placement?.assignments.length ?? 0;
  const unready = typeof w.ready === 'number' ? placed - w.ready : 0;
  const desired = w.replicas === 'all' ? `all (${w.desired ?? '?'})` : w.desired ?? w.replicas;
  return [desired, placed, w.ready, unready > 0 && w.status !== 'retired' ? `${w.status}, ${unready} not ready` : w.status];
}

export function renderState(state: StateAnswer): string {
  const parts = [
    section('RUNTIMES', table(['id', 'status', 'labels', 'slots', 'tasks', 'lease', 'fence'],
      state.runtimes.map((r) => [r.id, r.status, labels(r.labels), r.slots, r.tasks, relative(r.leaseExpiresAt), r.fence]))),
    section('WORKLOADS', table(['name', 'kind', 'desired', 'placed', 'ready', 'status', 'runtimes', 'fence'],
      state.workloads.map((w) => [w.name, w.kind, ...workloadCounts(w), runtimesOf(w.placement?.assignments), w.placement?.fence]))),
  ];
  if (state.unplaced.length) parts.push(section('UNPLACED', table(['workload', 'reason', 'missing'], state.unplaced.map((u) => [u.workload, u.reason, u.missing]))));
  parts.push(section('OPERATIONS', state.operationsAvailable === false
    ? '(Temporal unreachable: running operations unknown)'
    : table(['workflow', 'kind', 'target', 'phase', 'started'], state.operations.map((o) => [o.workflowId, o.kind, o.target, o.phase, relative(o.startedAt)]))));
  parts.push(...renderSupervision(state));
  parts.push(`reconcile: last pass ${relative(state.reconcile?.at)}${state.reconcile?.skipped ? ' (skipped: nothing changed)' : ''}, ${state.reconcile?.passes ?? 0} pass(es), ${state.reconcile?.skips ?? 0} skip(s)`);
  return parts.join('\n\n');
}

/** Each placed task as its runtime reports it, with its restarts; then the crash-looping ones and the decision (DESIGN.md §3 "Supervision"). */
function renderSupervision(state: StateAnswer): string[] {
  const tasks = state.workloads.flatMap((w) => (w.tasks ?? []).map((t) =>
    [w.name, t.taskId, t.runtimeId, t.state ?? '(not reported)', t.restarts ?? '-', t.crashLooping ? 'yes' : 'no',
      // the revision it runs; marked where it is not the workload's current one (mid-rollout)
      t.revision ? `${t.revision}${w.runs && t.revision !== w.runs ? ' (old)' : ''}` : '-']));
  const parts = tasks.length ? [section('TASKS', table(['workload', 'task', 'runtime', 'state', 'restarts', 'crash-looping', 'revision'], tasks))] : [];
  if (state.crashLooping?.length) parts.push(section('CRASH-LOOPING', state.crashLooping.map((c) => c.reason).join('\n')));
  return parts;
}

export function renderWorkloadList(state: StateAnswer): string {
  return table(['name', 'kind', 'desired', 'placed', 'ready', 'status', 'runtimes'],
    state.workloads.map((w) => [w.name, w.kind, ...workloadCounts(w), runtimesOf(w.placement?.assignments)]));
}

const assignmentRows = (assignments: Assignment[]) => assignments.map((a) => [a.index, a.taskId, a.runtimeId, a.ports ? `${a.ports.public}/${a.ports.internal}` : null, a.partitions?.join(',')]);

export function renderWorkload(w: z.output<typeof WorkloadViewSchema>): string {
  const head = fields([
    ['name', w.name], ['kind', w.kind], ['replicas', w.replicas], ['selector', labels(w.selector)], ['colocate', w.colocate],
    ['retired', w.retired], ['revision', w.revision],
    ['contract', w.contract ? Object.entries(w.contract).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ') : undefined],
    ['placement', w.placement ? `fence ${w.placement.fence}, generation ${w.placement.generation}` : 'pending (none yet)'],
  ]);
  if (!w.placement) return head;
  return `${head}\n\n${section('ASSIGNMENTS', table(['index', 'task', 'runtime', 'ports', 'partitions'], assignmentRows(w.placement.assignments)))}`;
}

export function renderPlan(p: z.output<typeof PlanSchema>): string {
  const changes = [
    ...p.starts.map((a) => ['start', a.taskId, null, a.runtimeId]),
    ...p.stops.map((a) => ['stop', a.taskId, a.runtimeId, null]),
    ...p.moves.map((m) => ['move', m.to.taskId, m.from.runtimeId, m.to.runtimeId]),
  ];
  return [
    fields([['plan', p.id], ['workload', p.workload], ['replicas', `${p.fromReplicas} → ${p.replicas === 'all' ? `all (${p.target.length})` : p.replicas}`],
      ['basis', `registry revision ${p.basis.registryRevision}, placement fence ${p.basis.placementFence}`],
      ['unplaced', p.unplaced ? `${p.unplaced.missing} replica(s): ${p.unplaced.reason}` : undefined]]),
    section('CHANGES', changes.length ? table(['change', 'task', 'from', 'to'], changes) : '(none: already at this size)'),
    ...(p.warnings.length ? [section('WARNINGS', p.warnings.map((w) => `- ${w}`).join('\n'))] : []),
    ...(p.evidenceRequired?.length ? [section('EVIDENCE REQUIRED', p.evidenceRequired.map((e) => `- ${e}`).join('\n'))] : []),
    `apply it with: scalegate apply ${p.id}`,
  ].join('\n\n');
}

/** Where a run's evidence page is (GET /v1/operations/:workflowId/report?runId=; `operations report` saves it): the link names its run. */
export const reportUrl = (api: string, workflowId: string, runId: string): string =>
  `${api}/v1/operations/${encodeURIComponent(workflowId)}/report?runId=${encodeURIComponent(runId)}`;

export function renderStarted(what: string, s: StartedOperation, api: string): string {
  return fields([[what, `${s.kind} ${s.workflowId}`], ['run', s.runId], ['web ui', s.uiUrl], ['report', reportUrl(api, s.workflowId, s.runId)]]) +
    `\nfollow it with: scalegate operations watch ${s.workflowId}`;
}

export function renderOperation(o: OperationAnswer, api?: string): string {
  const parts = [fields([
    ['workflow', o.workflowId], ['run', o.runId], ['kind', o.kind], ['status', o.status], ['phase', o.phase],
    ['started', o.startedAt], ['closed', o.closedAt], ['report', api ? reportUrl(api, o.workflowId, o.runId) : undefined],
    ['approval', o.approval ? `${o.approval.mode}${o.approval.decision ? ` (${o.approval.decision} by ${o.approval.by})` : ''}` : undefined],
    ['failure', o.failure ?? undefined],
  ])];
  if (o.gates) parts.push(section('GATES', table(['gate', 'passed', 'detail'], o.gates.rows.map((r) => [r.gate, r.passed ? 'yes' : 'NO', r.detail]))));
  if (o.evidenceGap) parts.push(section('EVIDENCE GAP', o.evidenceGap));
  if (o.plan) {
    parts.push(section('PLAN', fields([['id', o.plan.id], ['starts', o.plan.starts.length], ['stops', o.plan.stops.length], ['moves', o.plan.moves.length],
      ['target', runtimesOf(o.plan.target)], ['warnings', o.plan.warnings.join('; ') || undefined]])));
  }
  if (o.kubernetes) {
    const k = o.kubernetes;
    const list = (names: string[] | undefined) => (names?.length ? names.join(', ') : undefined);
    parts.push(section('KUBERNETES', fields([
      ['object', k.object], ['resourceVersion', k.resourceVersion], ['conflicts', k.conflicts || undefined],
      ['victims', list(k.victims?.map((v) => `${v} (${k.reasons?.[v] ?? '?'})`))], ['marked', list(k.marked)], ['acknowledged', list(k.acknowledged)],
      ['not acknowledged', list(k.missing)], ['forced', list(k.forced)], ['marks removed', list(k.unmarked)], ['deleted', list(k.deleted)],
    ])));
  }
  const scaleIn = o.scaleIn;
  if (scaleIn?.victims?.length && !o.kubernetes) parts.push(section('VICTIMS', table(['task', 'runtime', 'why'], scaleIn.victims.map((v) => [v.taskId, v.runtimeId, scaleIn.reasons?.[v.taskId]]))));
  if (o.evidence?.comparison) {
    parts.push(section('EVIDENCE', fields([['verdict', o.evidence.comparison.verdict], ['reasons', (o.evidence.comparison.reasons ?? []).join('; ') || undefined]])));
  }
  if (o.compensation) {
    parts.push(section('COMPENSATION', fields([['reason', o.compensation.reason], ['replicas', o.compensation.replicas],
      ['outcome', o.compensation.outcome ? `fence ${o.compensation.outcome.fence}, generation ${o.compensation.outcome.generation}` : o.kubernetes ? `${o.status}: ${o.kubernetes.object} at ${o.compensation.replicas}` : 'running']])));
  }
  if (o.result !== undefined && o.result !== null && !o.gates) parts.push(...resultSections(o));
  return parts.join('\n\n');
}

const list = (items: unknown[] | null | undefined, max = 6): string | undefined =>
  items?.length ? `${items.slice(0, max).join(', ')}${items.length > max ? ` +${items.length - max}` : ''}` : undefined;
const ratio = (record: Record<string, number> | null | undefined) => (record ? Object.entries(record).map(([k, v]) => `${k} ${v}`).join(', ') : undefined);

/** The sections of an operation's own status or result, by its kind; a kind without its own shows its fields. */
function resultSections(o: Pick<OperationAnswer, 'kind' | 'result'>): string[] {
  const rescale = statusOf(o, 'rescaleOperator');
  if (rescale) {
    const r = rescale;
    const sections = [section('RESCALE', fields([
      ['operator', r.operator], ['parallelism', `${r.from ?? '?'} → ${r.to}`], ['outcome', r.outcome],
      ['hot', r.hot === null ? undefined : r.hot ? 'yes: cut over at a checkpoint barrier' : 'no: the stop-the-world replan'],
      ['reason', r.reason ?? undefined], ['checkpoint', r.checkpoint ?? undefined], ['added', list(r.added)], ['retired', list(r.retired)], ['error', r.error ?? undefined],
    ]))];
    if (r.compensation) {
      const c = r.compensation;
      sections.push(section('COMPENSATION', fields([['reason', c.reason], ['joined', c.joined ?? undefined],
        ['restored from', c.outcome?.restoredFrom ?? undefined], ['generation', c.outcome?.generation ?? undefined],
        ['parallelism', c.outcome?.parallelism ? `${ratio(c.outcome.parallelism.from)} → ${ratio(c.outcome.parallelism.to)}` : undefined]])));
    }
    return sections;
  }
  const recovery = statusOf(o, 'recoverRuntime');
  if (recovery) {
    const r = recovery;
    const t = r.timings;
    const sections = [section('RECOVERY', fields([
      ['runtime', r.runtime], ['by', r.by], ['reason', r.reason], ['outcome', r.outcome],
      ['lost', r.lost ? `${r.lost.outcome} (fence ${r.lost.fence}${r.lost.lostAt ? `, at ${r.lost.lostAt}` : ''})` : undefined],
      ['timings', [['started', t.startedAt], ['decided', t.decidedAt], ['converged', t.convergedAt], ['ended', t.endedAt]].filter(([, at]) => at).map(([what, at]) => `${what} ${at}`).join(', ') || undefined],
      ['error', r.error ?? undefined],
    ]))];
    if (r.decisions?.length) {
      sections.push(section('DECISIONS', table(['workload', 'kind', 'from→to', 'phase', 'applied', 'attempts', 'error'],
        r.decisions.map((d) => [d.workload, d.kind, `${d.fromReplicas}→${d.toReplicas}`, d.phase, d.applied, d.attempts, d.error]))));
    }
    if (r.compensation) sections.push(section('COMPENSATION', fields([['reason', r.compensation.reason], ['workloads', list(r.compensation.workloads.map((w) => w.workload))]])));
    return sections;
  }
  // applyPlan, stopTheWorldReplan, retireWorkload and the loops: their fields, one per line.
  const r = o.result;
  if (r === null || r === undefined) return [];
  return [section('RESULT', fields(Object.entries(r).map(([key, value]): [string, Cell] => [key, summarize(value)])))];
}

/** A value on one line: scalars as they are, short lists joined, anything else as compact JSON cut to 100 characters. */
function summarize(value: unknown): Cell {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return value as Cell;
  if (Array.isArray(value) && value.every((v) => ['string', 'number'].includes(typeof v))) return list(value, 10) ?? '(none)';
  const json = JSON.stringify(value);
  return json.length > 100 ? `${json.slice(0, 99)}…` : json;
}

/** `operations list`: one row per run, newest first. */
export function renderOperationList(operations: z.output<typeof OperationListSchema>['operations']): string {
  if (!operations.length) return '(no operations)';
  // the run id whole (a long workflow id is cut first): it is what `operations show --run` takes
  return table(['workflow', 'run', 'kind', 'status', 'started'], operations.map((o) => [o.workflowId, o.runId, o.kind, o.status, o.startedAt]));
}

export function renderLedger(events: LedgerEvent[]): string {
  return table(['id', 'at', 'kind', 'workload', 'from→to', 'outcome', 'reason', 'workflow'],
    events.map((e) => [e.id, e.at, e.kind, e.workload ?? e.tier, `${e.fromReplicas ?? '-'}→${e.toReplicas ?? '-'}`, e.outcome, e.reason, e.workflowId]));
}

/** "kafka lag of orders every 15000 ms; last 1200 (3 s ago)", or the last reading's error. */
function pullText(kafkaLag: { workload: string; intervalMs: number }, pull: TierAnswer['pull']): string {
  const last = !pull ? 'not read yet' : pull.error ? `last reading failed: ${pull.error}` : pull.lastAt ? `last ${pull.lastLag} (${relative(pull.lastAt)})` : 'not read yet';
  return `kafka lag of ${kafkaLag.workload} every ${kafkaLag.intervalMs} ms; ${last}`;
}

export function renderTier(t: TierAnswer): string {
  const p = t.policy;
  const targets = Object.entries(p.targets).map(([k, v]) => `${k} ${v}`).join(', ');
  const parts = [fields([
    ['tier', t.tier], ['revision', t.revision], ['workloads', p.workloads.join(', ')], ['replicas', `${p.minReplicas}–${p.maxReplicas} (max step ${p.maxStep})`],
    ['targets', targets], ['tolerance', p.tolerance], ['stabilization', `up ${p.scaleUpStabilizationMs} ms, down ${p.scaleDownStabilizationMs} ms`],
    ['cooldown', `${p.cooldownMs} ms`], ['change windows', p.changeWindows.map((w) => `${w.cron} for ${w.durationMs} ms`).join('; ') || '(none)'],
    ['autoscaler', `${t.autoscaler.workflowId} ${t.autoscaler.status}${t.autoscaler.phase ? ` (${t.autoscaler.phase})` : ''}`],
    ...(p.observe ? [['pulls', pullText(p.observe.kafkaLag, t.pull)] as [string, string]] : []),
  ])];
  const figures = (o: Observation) => (['qps', 'activeUsers', 'cpuUtilization', 'queueDepth'] as const).filter((k) => o[k] !== undefined).map((k) => `${k} ${o[k]}`).join(', ') + (o.pulled ? ` (pulled: ${o.pulled})` : '');
  if (t.observations?.length) {
    parts.push(section('OBSERVATIONS', table(['seq', 'at', 'figures'], t.observations.slice(-5).map((o) => [o.seq, new Date(o.atMs).toISOString(), figures(o)]))));
  }
  const d = t.lastDecision;
  parts.push(section('LAST DECISION', d ? fields([
    ['at', `${d.at} (${relative(d.at)})`], ['workload', d.workload], ['from→to', `${d.from}→${d.to}`], ['decision', d.decision], ['reason', d.reason],
    ['desired per signal', (d.desiredPerSignal ?? []).map((e) => `${e.signal} ${e.observed} → ${e.desired}`).join(', ')],
  ]) : '(none yet)'));
  parts.push(section('RUNNING OPERATIONS', t.runningOperations.length
    ? table(['workflow', 'kind', 'by', 'from→to', 'started'], t.runningOperations.map((o) => [o.workflowId, o.kind, o.by, o.from !== undefined ? `${o.from}→${o.to}` : '', relative(o.startedAt)]))
    : '(none)'));
  if (t.waiting?.length) parts.push(section('WAITING', table(['workload', 'reason'], t.waiting.map((w) => [w.workload, w.reason]))));
  return parts.join('\n\n');
}

const checkpointText = (c: StreamJobView['lastCompletedCheckpoint'], when: 'completedAt' | 'triggeredAt') => (c ? `${c.id} (generation ${c.generation}, ${when === 'completedAt' ? 'completed' : 'triggered'} ${relative(c[when])})` : undefined);

/** How old a job's counters are: the agents report them with their heartbeats, the oldest report bounds them all. */
function countersAge(subtasks: { reportedAt?: string | null }[]): string {
  const times = subtasks.map((t) => t.reportedAt).filter((at): at is string => typeof at === 'string').sort();
  if (times.length === 0) return 'not reported yet';
  return `as of ${relative(times[0])} (the oldest agent report; each agent reports with its heartbeat)`;
}

export function renderJob(j: StreamJobView): string {
  const operators = j.operators.map((o) => `${o.id} (${o.kind}, ${o.parallelism})`).join(' → ');
  const operation = j.runningOperation ? `${j.runningOperation.workflowId} ${j.runningOperation.kind}${j.runningOperation.phase ? ` (${j.runningOperation.phase})` : ''}` : '(none)';
  return [
    fields([
      ['job', j.job], ['operators', operators], ['generation', j.generation],
      ['last checkpoint', checkpointText(j.lastCompletedCheckpoint, 'completedAt') ?? '(none completed yet)'],
      ['in flight', checkpointText(j.checkpointInFlight, 'triggeredAt')], ['operation', operation],
      ['counters', countersAge(j.subtasks)],
    ]),
    section('SUBTASKS', table(['operator', 'index', 'runtime', 'incarnation', 'state', 'in', 'out', 'read', 'checkpoint', 'reported'],
      j.subtasks.map((t) => [t.operator, t.index, t.runtimeId, t.incarnation?.slice(0, 8), t.state, t.recordsIn, t.recordsOut, t.recordsRead, t.lastCheckpoint, relative(t.reportedAt)]))),
  ].join('\n\n');
}

export function renderJobList(answer: z.output<typeof StreamJobListSchema>): string {
  return table(['job', 'operators', 'generation', 'desired', 'placed', 'ready'], answer.jobs.map((j) => [
    j.job, j.operators.map((o) => `${o.id} ${o.parallelism}`).join(' → '), j.generation, j.desired, j.placed, j.ready,
  ]));
}

export function renderTierList(answer: z.output<typeof TierListSchema>): string {
  return table(['tier', 'workloads', 'replicas', 'targets', 'revision', 'updated'], answer.tiers.map((t) => [
    t.tier, t.policy.workloads.join(', '), `${t.policy.minReplicas}–${t.policy.maxReplicas}`,
    Object.entries(t.policy.targets).map(([k, v]) => `${k} ${v}`).join(', '), t.revision, relative(t.updatedAt),
  ]));
}

export function renderRuntime(r: z.output<typeof RuntimeViewSchema>): string {
  return fields([['runtime', r.id], ['status', r.status], ['labels', labels(r.labels)], ['fence', r.fence], ['lease', relative(r.leaseExpiresAt)]]);
}

// ---------------------------------------------------------------------------------------------
