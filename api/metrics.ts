// /metrics through prom-client (label values escaped by it): the Node process metrics, HTTP
// requests by route and status, and scalegate's own figures read from their real sources at
// scrape time:
//   - operations started, by kind          Temporal visibility (executions on the task queue)
//   - completed / refused / compensated    the ledger (one row per ended operation)
//   - gate failures by gate row            the ledger's scale-out rows (inputs.gates)
//   - converge duration                    the awaitTasksReady activities in the histories of the
//                                          operations that closed since this API started
//   - placement passes, skips, duration    the reconcile marker; the reconcilePass activities in
//                                          the reconcile loop's history
//   - unplaced workloads, runtimes         the registry
//   - desired / placed / ready replicas    the registry, the placements and the agents' task
//                                          reports (domain/replicas.ts, as GET /v1/state)
//   - lease expirations                    counted where this API declares runtimes LOST
//   - recoveries                           the ledger's `recover` rows (none until recovery lands)
// A source that cannot be read leaves its figures as they were and sets
// scalegate_metrics_source_up{source} to 0; a scrape never fails because of one.
//
// Every label takes its values from a fixed enum (METRIC_LABELS below): a value a source holds
// outside it (free text, a kind from a newer version) is counted as `other`, never copied.
import type { Client, WorkflowHandle } from '@temporalio/client';
import { STATUS_CODES } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DECISION_CODE } from '../domain/autoscale';
import { GATE_ORDER } from '../domain/gates';
import { REPLICA_STATES, replicaCounts } from '../domain/replicas';
import { supervisionCounts } from '../domain/supervision';
import { LEDGER_KIND, LEDGER_OUTCOMES, RUNTIME_STATUSES, type Labels, type Placement, type ReplicaCount, type Runtime, type TaskReport, type Unplaced } from '../protocol';
import type { LedgerStats } from '../store/ledger';

/** Workflow type → the kind the ledger writes for it, the one label every operation metric uses. */
export const OPERATION_KINDS = {
  scaleOut: 'scale-out',
  scaleIn: 'scale-in',
  applyPlan: 'apply',
  stopTheWorldReplan: 'replan',
  retireWorkload: 'retire',
  rescaleOperator: 'rescale',
} as const;
const KINDS = Object.values(OPERATION_KINDS);
/** the workflows that converge (await new tasks ready) */
const CONVERGING_TYPES = ['scaleOut', 'scaleIn', 'applyPlan', 'stopTheWorldReplan', 'rescaleOperator'];

// ---------------------------------------------------------------------------------------------
// Label enums

/** What a label says for a value outside its enum. */
export const OTHER = 'other';
/** The route label of a request no route matched (a 404 on an unknown path). */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * The autoscaler's decision labels (the `inputs.decision` of its ledger rows, written by
 * workflows/autoscaler.ts) → the code the decision label of /metrics says. A refusal's label
 * carries its detail (`refused: <why>`): it counts as `refused`.
 */
const DECISION_OF_LABEL: Record<string, string> = {
  'scale-out': DECISION_CODE.scaleOut,
  'scale-in': DECISION_CODE.scaleIn,
  'no-change: within tolerance': DECISION_CODE.withinTolerance,
  'no-change: at desired size': DECISION_CODE.atDesired,
  'no-change: stabilizing': DECISION_CODE.stabilizing,
  'no-change: change window': DECISION_CODE.changeWindow,
  'no-change: cooldown': DECISION_CODE.cooldown,
  'no-change: no observation': DECISION_CODE.noObservation,
  'no-change: workload not active': 'not-active',
  'no-change: backing off after a refusal': 'backing-off',
  'no-change: bounded': 'bounded',
  'no-change: operation running': 'operation-running',
};
const REFUSED_PREFIX = 'refused:';

/** The values of each label kind; `other` ends each whose source may hold something else (text, a number, a row). */
export const LABEL_VALUES = {
  method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', OTHER],
  status: [...Object.keys(STATUS_CODES), OTHER],
  operationKind: [...KINDS, OTHER],
  ledgerKind: [...Object.values(LEDGER_KIND), OTHER],
  /** `none`: a row without outcome */
  ledgerOutcome: [...LEDGER_OUTCOMES, 'none', OTHER],
  gate: [...GATE_ORDER, OTHER],
  /** how an awaitTasksReady activity ended */
  activityOutcome: ['completed', 'failed', 'timed-out', 'cancelled'],
  unplacedReason: ['placement-unavailable' satisfies Unplaced['reason'], OTHER],
  runtimeStatus: [...RUNTIME_STATUSES],
  decision: [...new Set(Object.values(DECISION_OF_LABEL)), 'refused', OTHER],
  source: ['postgres', 'temporal'],
  replicaState: [...REPLICA_STATES],
} as const satisfies Record<string, readonly string[]>;
type LabelKind = keyof typeof LABEL_VALUES;
/**
 * Labels whose values are not a constant list but still bounded: `route` by the API's route
 * table (the patterns, never a raw URL, plus `unmatched`), `workload` by the registry (workload
 * names are bounded by protocol/workload.ts; retired workloads have no series).
 */
export type DynamicLabel = 'route' | 'workload';

/** Every label of every scalegate_* metric and where its values come from. */
export const METRIC_LABELS = {
  scalegate_http_requests_total: { method: 'method', route: 'route', status: 'status' },
  scalegate_http_request_duration_seconds: { method: 'method', route: 'route' },
  scalegate_operations_started_total: { kind: 'operationKind' },
  scalegate_operations_completed_total: { kind: 'operationKind' },
  scalegate_operations_refused_total: { kind: 'operationKind' },
  scalegate_operations_compensated_total: { kind: 'operationKind' },
  scalegate_ledger_events_total: { kind: 'ledgerKind', outcome: 'ledgerOutcome' },
  scalegate_gate_failures_total: { gate: 'gate' },
  scalegate_converge_duration_seconds: { kind: 'operationKind', outcome: 'activityOutcome' },
  scalegate_placement_pass_duration_seconds: {},
  scalegate_placement_passes_total: {},
  scalegate_placement_pass_skips_total: {},
  scalegate_unplaced_workloads: { reason: 'unplacedReason' },
  scalegate_runtimes: { status: 'runtimeStatus' },
  scalegate_workload_replicas: { workload: 'workload', state: 'replicaState' },
  scalegate_task_restarts: { workload: 'workload' },
  scalegate_tasks_crash_looping: { workload: 'workload' },
  scalegate_lease_expirations_total: {},
  scalegate_autoscaler_decisions_total: { decision: 'decision' },
  scalegate_recoveries_total: { outcome: 'ledgerOutcome' },
  scalegate_metrics_source_up: { source: 'source' },
} as const satisfies Record<string, Record<string, LabelKind | DynamicLabel>>;

/** `value` when its enum holds it, else `other`. */
function bounded(kind: LabelKind, value: string): string {
  return (LABEL_VALUES[kind] as readonly string[]).includes(value) ? value : OTHER;
}

/** An autoscaler decision label (free text for a refusal) → its code, `other` when unknown. */
export function decisionCode(label: string): string {
  const text = label.trim();
  if (text.startsWith(REFUSED_PREFIX)) return 'refused';
  return Object.hasOwn(DECISION_OF_LABEL, text) ? DECISION_OF_LABEL[text] : OTHER;
}

/** An unplaced row's reason → its code, `other` when unknown. */
export const unplacedReasonCode = (reason: string): string => bounded('unplacedReason', reason.trim());

export interface MetricSources {
  taskQueue: string;
  ledgerStats(): Promise<LedgerStats>;
  reconcileMarker(): Promise<{ passes: number; skips: number }>;
  unplaced(): Promise<{ workload: string; reason: string }[]>;
  runtimes(): Promise<(Runtime & { tasks: readonly TaskReport[] })[]>;
  workloads(): Promise<{ name: string; replicas: ReplicaCount; selector: Labels; retired: boolean }[]>;
  placements(): Promise<Pick<Placement, 'workload' | 'assignments'>[]>;
  temporal(): Promise<Client>;
}

/** Sets a counter to an absolute value read from a monotonic source (the ledger, visibility). */
function setCounter<T extends string>(counter: Counter<T>, values: { labels: Partial<Record<T, string>>; value: number }[]) {
  counter.reset();
  for (const { labels, value } of values) counter.inc(labels, value);
}

const secondsOf = (time: { seconds?: unknown; nanos?: number | null } | null | undefined): number | null => {
  if (!time || time.seconds === undefined || time.seconds === null) return null;
  const s = time.seconds as number | { toNumber(): number };
  return (typeof s === 'number' ? s : s.toNumber()) + (time.nanos ?? 0) / 1e9;
};

type ActivityOutcome = (typeof LABEL_VALUES.activityOutcome)[number];
/** One event of a workflow's history, as the client fetches it. */
type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];
/** Durations of the activities of one type in a history: scheduled → completed, failed or timed out. */
function activityDurations(events: HistoryEvent[], activityType: string, afterEventId = 0): { seconds: number; outcome: ActivityOutcome; eventId: number }[] {
  const scheduled: Record<string, number> = {};
  const found: { seconds: number; outcome: ActivityOutcome; eventId: number }[] = [];
  for (const event of events) {
    const id = Number(event.eventId);
    const at = secondsOf(event.eventTime);
    if (at === null) continue;
    const attrs = event.activityTaskScheduledEventAttributes;
    if (attrs?.activityType?.name === activityType) scheduled[id] = at;
    const ended: [ActivityOutcome, { scheduledEventId?: unknown } | null | undefined][] = [
      ['completed', event.activityTaskCompletedEventAttributes],
      ['failed', event.activityTaskFailedEventAttributes],
      ['timed-out', event.activityTaskTimedOutEventAttributes],
      ['cancelled', event.activityTaskCanceledEventAttributes],
    ];
    for (const [outcome, end] of ended) {
      const from = end ? scheduled[Number(end.scheduledEventId)] : undefined;
      if (from !== undefined && id > afterEventId) found.push({ seconds: Math.max(0, at - from), outcome, eventId: id });
    }
  }
  return found;
}

export function createMetrics(options: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const startedAt = Date.now();

  const httpRequests = new Counter({
    name: 'scalegate_http_requests_total', help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'] as const, registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'scalegate_http_request_duration_seconds', help: 'HTTP request duration by method and route',
    labelNames: ['method', 'route'] as const, buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry],
  });
  const started = new Counter({
    name: 'scalegate_operations_started_total', help: 'operations started, by kind (Temporal visibility: executions on the task queue)',
    labelNames: ['kind'] as const, registers: [registry],
  });
  const completed = new Counter({ name: 'scalegate_operations_completed_total', help: 'operations completed, by kind (ledger)', labelNames: ['kind'] as const, registers: [registry] });
  const refused = new Counter({ name: 'scalegate_operations_refused_total', help: 'operations refused before any change (a gate failed), by kind (ledger)', labelNames: ['kind'] as const, registers: [registry] });
  const compensated = new Counter({ name: 'scalegate_operations_compensated_total', help: 'operations aborted and compensated by the stop-the-world replan, by kind (ledger)', labelNames: ['kind'] as const, registers: [registry] });
  const ledgerEvents = new Counter({ name: 'scalegate_ledger_events_total', help: 'ledger rows by kind and outcome', labelNames: ['kind', 'outcome'] as const, registers: [registry] });
  const gateFailures = new Counter({ name: 'scalegate_gate_failures_total', help: 'failed evidence-gate rows, by gate (ledger)', labelNames: ['gate'] as const, registers: [registry] });
  const converge = new Histogram({
    name: 'scalegate_converge_duration_seconds', help: 'how long operations waited for their tasks to be ready (awaitTasksReady), by kind and outcome',
    labelNames: ['kind', 'outcome'] as const, buckets: [0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900], registers: [registry],
  });
  const passDuration = new Histogram({
    name: 'scalegate_placement_pass_duration_seconds', help: 'duration of reconcile placement passes (reconcilePass activities)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers: [registry],
  });
  const passes = new Counter({ name: 'scalegate_placement_passes_total', help: 'reconcile placement passes that ran (reconcile marker)', registers: [registry] });
  const skips = new Counter({ name: 'scalegate_placement_pass_skips_total', help: 'reconcile placement passes skipped because nothing they decide from changed (reconcile marker)', registers: [registry] });
  const unplaced = new Gauge({ name: 'scalegate_unplaced_workloads', help: 'workloads with unplaced replicas, by reason', labelNames: ['reason'] as const, registers: [registry] });
  const runtimes = new Gauge({ name: 'scalegate_runtimes', help: 'runtimes by status', labelNames: ['status'] as const, registers: [registry] });
  const replicas = new Gauge({
    name: 'scalegate_workload_replicas', help: 'replicas of each workload not retired: desired (registry), placed (its placement), ready (its assigned tasks the agents report ready)',
    labelNames: ['workload', 'state'] as const, registers: [registry],
  });
  const taskRestarts = new Gauge({
    name: 'scalegate_task_restarts', help: 'restarts of the placed tasks of each workload not retired, as their agents report them (a task whose process exited on its own and was started again; a replaced task takes its count with it)',
    labelNames: ['workload'] as const, registers: [registry],
  });
  const crashLooping = new Gauge({
    name: 'scalegate_tasks_crash_looping', help: 'placed tasks of each workload not retired that their agents report crash-looping (restarted too often within the window)',
    labelNames: ['workload'] as const, registers: [registry],
  });
  const leaseExpirations = new Counter({ name: 'scalegate_lease_expirations_total', help: 'runtimes this API declared LOST because their lease ran out', registers: [registry] });
  const autoscaleDecisions = new Counter({ name: 'scalegate_autoscaler_decisions_total', help: 'autoscaler decisions, by decision code (ledger rows of kind autoscale: scale-out, scale-in, refused, within-tolerance, cooldown, ...)', labelNames: ['decision'] as const, registers: [registry] });
  const recoveries = new Counter({ name: 'scalegate_recoveries_total', help: 'runtime recoveries, by outcome (ledger rows of kind recover)', labelNames: ['outcome'] as const, registers: [registry] });
  const sourceUp = new Gauge({ name: 'scalegate_metrics_source_up', help: 'whether the last scrape could read a source (postgres, temporal)', labelNames: ['source'] as const, registers: [registry] });
  leaseExpirations.inc(0);
  passDuration.zero({});
  for (const kind of KINDS) for (const counter of [started, completed, refused, compensated]) counter.inc({ kind }, 0);

  /** runIds of closed operations whose history was read, with their close time (pruned after the window) */
  const seenRuns: Record<string, number> = {};
  const reconcileSeen = { runId: '', eventId: 0, markerPasses: -1 };
  const WINDOW_MS = 15 * 60_000;

  /** The routes the API serves (declareRoutes); a request outside them is `unmatched`. */
  let routes: ReadonlySet<string> | null = null;

  async function readPostgres(sources: MetricSources) {
    const [stats, marker, unplacedRows, runtimeRows, workloads, placements] = await Promise.all([
      sources.ledgerStats(), sources.reconcileMarker(), sources.unplaced(), sources.runtimes(), sources.workloads(), sources.placements(),
    ]);
    const outcomes = (wanted: string[]) => KINDS.map((kind) => ({
      labels: { kind }, value: stats.byOutcome.filter((r) => r.kind === kind && wanted.includes(r.outcome)).reduce((n, r) => n + r.count, 0),
    }));
    setCounter(completed, outcomes(['completed', 'completed-above-target', 'degraded']));
    setCounter(refused, outcomes(['refused']));
    setCounter(compensated, outcomes(['compensated']));
    setCounter(ledgerEvents, stats.byOutcome.map((r) => ({ labels: { kind: bounded('ledgerKind', r.kind), outcome: bounded('ledgerOutcome', r.outcome) }, value: r.count })));
    setCounter(gateFailures, stats.gateFailures.map((r) => ({ labels: { gate: bounded('gate', r.gate) }, value: r.count })));
    setCounter(autoscaleDecisions, stats.autoscaleDecisions.map((r) => ({ labels: { decision: decisionCode(r.decision) }, value: r.count })));
    setCounter(recoveries, stats.byOutcome.filter((r) => r.kind === 'recover').map((r) => ({ labels: { outcome: bounded('ledgerOutcome', r.outcome) }, value: r.count })));
    setCounter(passes, [{ labels: {}, value: marker.passes }]);
    setCounter(skips, [{ labels: {}, value: marker.skips }]);
    unplaced.reset();
    unplaced.set({ reason: 'placement-unavailable' }, 0);
    for (const row of unplacedRows) unplaced.inc({ reason: unplacedReasonCode(row.reason) }, 1);
    runtimes.reset();
    for (const status of RUNTIME_STATUSES) runtimes.set({ status }, runtimeRows.filter((r) => r.status === status).length);
    replicas.reset();
    const active = workloads.filter((w) => !w.retired);
    const counts = replicaCounts(active, placements, runtimeRows, Date.now());
    for (const w of active) for (const state of REPLICA_STATES) replicas.set({ workload: w.name, state }, counts[w.name][state]);
    taskRestarts.reset();
    crashLooping.reset();
    const supervised = supervisionCounts(active, placements, runtimeRows);
    for (const w of active) {
      taskRestarts.set({ workload: w.name }, supervised[w.name].restarts);
      crashLooping.set({ workload: w.name }, supervised[w.name].crashLooping);
    }
    return marker;
  }

  async function readTemporal(sources: MetricSources, marker: { passes: number; skips: number } | null) {
    const client = await sources.temporal();
    const queue = `TaskQueue = "${sources.taskQueue}"`;
    const counts = await Promise.all(Object.entries(OPERATION_KINDS).map(async ([type, kind]) => ({
      labels: { kind }, value: (await client.workflow.count(`${queue} AND WorkflowType = "${type}"`)).count,
    })));
    setCounter(started, counts);

    // Converge durations of the operations that closed since this API started (each read once).
    const since = new Date(Math.max(startedAt, Date.now() - WINDOW_MS) - 1000).toISOString();
    const types = CONVERGING_TYPES.map((t) => `"${t}"`).join(', ');
    let read = 0;
    for await (const wf of client.workflow.list({ query: `${queue} AND ExecutionStatus != "Running" AND CloseTime > "${since}" AND WorkflowType IN (${types})`, pageSize: 100 })) {
      if (seenRuns[wf.runId] !== undefined || read >= 50) continue; // the rest waits for the next scrape
      read += 1;
      const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      for (const d of activityDurations(history.events ?? [], 'awaitTasksReady')) {
        converge.observe({ kind: bounded('operationKind', OPERATION_KINDS[wf.type as keyof typeof OPERATION_KINDS] ?? OTHER), outcome: d.outcome }, d.seconds);
      }
      seenRuns[wf.runId] = wf.closeTime?.getTime() ?? Date.now();
    }
    for (const [runId, closedAt] of Object.entries(seenRuns)) if (closedAt < Date.now() - 2 * WINDOW_MS) delete seenRuns[runId];

    // Placement pass durations: the reconcile loop's current run, read again only when the marker moved.
    const movedPasses = marker ? marker.passes + marker.skips : -2;
    if (movedPasses !== reconcileSeen.markerPasses) {
      const handle = client.workflow.getHandle(`reconcile:${sources.taskQueue}`);
      const description = await handle.describe().catch(() => null);
      if (description) {
        if (description.runId !== reconcileSeen.runId) Object.assign(reconcileSeen, { runId: description.runId, eventId: 0 });
        const history = await client.workflow.getHandle(description.workflowId, description.runId).fetchHistory();
        for (const d of activityDurations(history.events ?? [], 'reconcilePass', reconcileSeen.eventId)) {
          passDuration.observe(d.seconds);
          reconcileSeen.eventId = Math.max(reconcileSeen.eventId, d.eventId);
        }
      }
      reconcileSeen.markerPasses = movedPasses;
    }
  }

  let scraping: Promise<unknown> = Promise.resolve();
  return {
    contentType: registry.contentType,
    /** The route patterns the API serves: the only values of the route label besides `unmatched`. */
    declareRoutes(patterns: readonly string[]) {
      routes = new Set(patterns);
    },
    /** One request: `route` is the pattern that matched (undefined: none), never the raw URL. */
    countRequest(method: string, route: string | undefined, status: number, seconds?: number) {
      const labels = { method: bounded('method', method.toUpperCase()), route: route !== undefined && routes?.has(route) ? route : UNMATCHED_ROUTE };
      httpRequests.inc({ ...labels, status: bounded('status', String(status)) });
      if (seconds !== undefined) httpDuration.observe(labels, seconds);
    },
    countLeaseExpirations(count: number) {
      if (count > 0) leaseExpirations.inc(count);
    },
    /** Reads every source (one scrape at a time), then renders the Prometheus text. */
    async render(sources: MetricSources): Promise<string> {
      const run = scraping.then(async () => {
        const marker = await readPostgres(sources).then(
          (m) => { sourceUp.set({ source: 'postgres' }, 1); return m; },
          () => { sourceUp.set({ source: 'postgres' }, 0); return null; },
        );
        await readTemporal(sources, marker).then(
          () => sourceUp.set({ source: 'temporal' }, 1),
          () => sourceUp.set({ source: 'temporal' }, 0),
        );
        return registry.metrics();
      });
      scraping = run.catch(() => undefined);
      return run;
    },
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
