// Supervision (DESIGN.md §3 "Supervision"): when a task whose process exited on its own is started
// again, and when its restarts amount to a crash loop. Pure: the process driver keeps a
// SupervisionRecord per task and asks these functions; the control plane reads what the agents
// report (crashLooping, restarts) through crashLoopingTasks.
//
// Backoff: the first restart after `baseMs`, each next one twice as late, at most `maxMs` (1 s
// doubling to 5 min by default); a run that stayed ready for `healthyAfterMs` resets it. A task
// restarted `crashLoopRestarts` times within `crashLoopWindowMs` is crash-looping until a run of it
// stays ready for `healthyAfterMs` (or the restarts age out of the window): it is not ready, the
// scale-out baseline gate refuses its workload, and its heartbeat tells the control plane.

export interface RestartPolicy {
  baseMs: number;
  maxMs: number;
  /** a run ready this long is healthy: the backoff starts again from baseMs and a crash loop ends */
  healthyAfterMs: number;
  /** this many restarts within crashLoopWindowMs make a crash loop */
  crashLoopRestarts: number;
  crashLoopWindowMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  baseMs: 1_000,
  maxMs: 300_000,
  healthyAfterMs: 60_000,
  crashLoopRestarts: 5,
  crashLoopWindowMs: 600_000,
};

/** How a run of a task ended. */
export interface TaskExit {
  code: number | null;
  signal: string | null;
  /** ISO-8601 */
  at: string;
}

/** What the driver keeps about one task's restarts (plain data). */
export interface SupervisionRecord {
  /** every restart of the task, for its whole life on this agent */
  restarts: number;
  /** restarts since the last healthy run: the backoff's exponent */
  consecutive: number;
  /** when each restart within the crash-loop window was scheduled (ms), oldest first */
  recentRestartsAtMs: number[];
  lastExit: TaskExit | null;
}

export const freshSupervision = (restarts = 0): SupervisionRecord => ({ restarts, consecutive: 0, recentRestartsAtMs: [], lastExit: null });

/** The delay before the `attempt`-th consecutive restart (1-based): baseMs · 2^(attempt−1), at most maxMs. */
export function restartDelayMs(policy: Pick<RestartPolicy, 'baseMs' | 'maxMs'>, attempt: number): number {
  const exponent = Math.max(0, attempt - 1);
  // 2^exponent overflows to Infinity long after the cap; min() keeps it finite.
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(exponent, 52));
}

/**
 * An exit nobody asked for: the record after it and how long to wait before the restart.
 * `readyForMs` is how long the run that ended had been ready (null: it never was).
 */
export function scheduleRestart(
  record: SupervisionRecord,
  policy: RestartPolicy,
  exit: TaskExit,
  readyForMs: number | null,
  nowMs: number,
): { record: SupervisionRecord; delayMs: number; restartAtMs: number } {
  const healthy = readyForMs !== null && readyForMs >= policy.healthyAfterMs;
  const consecutive = healthy ? 1 : record.consecutive + 1;
  const kept = healthy ? [] : record.recentRestartsAtMs.filter((at) => at > nowMs - policy.crashLoopWindowMs);
  const delayMs = restartDelayMs(policy, consecutive);
  return {
    record: { restarts: record.restarts + 1, consecutive, recentRestartsAtMs: [...kept, nowMs], lastExit: exit },
    delayMs,
    restartAtMs: nowMs + delayMs,
  };
}

/**
 * Is the task crash-looping now? `crashLoopRestarts` restarts within the window, unless the
 * current run has been ready for `healthyAfterMs` (`readyForMs`, null when not ready).
 */
export function isCrashLooping(record: SupervisionRecord, policy: RestartPolicy, nowMs: number, readyForMs: number | null): boolean {
  if (readyForMs !== null && readyForMs >= policy.healthyAfterMs) return false;
  const within = record.recentRestartsAtMs.filter((at) => at > nowMs - policy.crashLoopWindowMs).length;
  return within >= policy.crashLoopRestarts;
}

/** "code 1", "signal SIGKILL", or "an unknown status" (an adopted process ends unseen). */
export function describeExit(exit: Pick<TaskExit, 'code' | 'signal'>): string {
  if (exit.code !== null) return `code ${exit.code}`;
  if (exit.signal !== null) return `signal ${exit.signal}`;
  return 'an unknown status';
}

/** What the control plane reads of a reported task (a TaskReport's supervision fields). */
export interface SupervisedReport {
  taskId: string;
  workload: string;
  state: string;
  counts: Record<string, number>;
  crashLooping?: boolean;
  lastExit?: TaskExit;
  nextRestartAt?: string;
}

/** A crash-looping task the control plane shows in `state`, with the decision taken about it. */
export interface CrashLoopingTask {
  workload: string;
  taskId: string;
  runtimeId: string;
  restarts: number;
  lastExit: TaskExit | null;
  nextRestartAt: string | null;
  /** handleCrashLoops' decision (null: none recorded yet) */
  decision: CrashLoopAction | null;
  reason: string;
}

/** The restarts a report counts (0 when its driver counts none). */
export const restartsOf = (report: Pick<SupervisedReport, 'counts'>): number => report.counts.restarts ?? 0;

/** What a runtime not LOST reports about each of its tasks, by runtime and task id (assignmentKey). */
export function reportsByAssignment<R extends { taskId: string }>(runtimes: readonly { id: string; status: string; tasks: readonly R[] }[]): Map<string, R> {
  const reports = new Map<string, R>();
  for (const runtime of runtimes) {
    if (runtime.status === 'LOST') continue;
    for (const task of runtime.tasks) reports.set(assignmentKey({ runtimeId: runtime.id, taskId: task.taskId }), task);
  }
  return reports;
}

export const assignmentKey = (a: { runtimeId: string; taskId: string }): string => `${a.runtimeId}\n${a.taskId}`;

/** What `state` shows of an assignment's task: as its runtime reports it (null: not reported). */
export function placedTask<R extends SupervisedReport>(
  a: { runtimeId: string; taskId: string; index: number },
  report: R | undefined,
): {
  taskId: string; runtimeId: string; index: number; state: R['state'] | null; restarts: number | null; crashLooping: boolean;
  lastExit: TaskExit | null; nextRestartAt: string | null;
} {
  return {
    taskId: a.taskId, runtimeId: a.runtimeId, index: a.index, state: report?.state ?? null, restarts: report ? restartsOf(report) : null,
    crashLooping: report?.crashLooping === true, lastExit: report?.lastExit ?? null, nextRestartAt: report?.nextRestartAt ?? null,
  };
}

/** The latest decision recorded about a crash-looping task (event `task.crash-loop-decided`). */
export interface RecordedCrashLoopDecision {
  runtimeId: string;
  taskId: string;
  action: CrashLoopAction;
  reason: string;
}

/**
 * The crash-looping tasks among what placed assignments' runtimes report (not LOST), with the
 * reason shown in `state`: the decision handleCrashLoops recorded about it (`decisions`, newest
 * first), or that one is awaited. Its agent keeps restarting it meanwhile; its workload reads
 * degraded and refuses a scale-out until it is healthy again.
 */
export function crashLoopingTasks(
  placements: readonly { workload: string; assignments: readonly { runtimeId: string; taskId: string }[] }[],
  runtimes: readonly { id: string; status: string; tasks: readonly SupervisedReport[] }[],
  decisions: readonly RecordedCrashLoopDecision[] = [],
): CrashLoopingTask[] {
  const reports = reportsByAssignment(runtimes);
  const decided = new Map<string, RecordedCrashLoopDecision>();
  for (const d of decisions) if (!decided.has(assignmentKey(d))) decided.set(assignmentKey(d), d);
  const found: CrashLoopingTask[] = [];
  for (const placement of placements) {
    for (const a of placement.assignments) {
      const report = reports.get(assignmentKey(a));
      if (!report?.crashLooping) continue;
      const restarts = restartsOf(report);
      const exit = report.lastExit ? `, last exit ${describeExit(report.lastExit)}` : '';
      const next = report.nextRestartAt ? `; next restart at ${report.nextRestartAt}` : '';
      const decision = decided.get(assignmentKey(a));
      const said = decision && decision.action !== 'none' ? decision.reason : `awaiting the decision of crash-loops:${placement.workload}, running with its backoff`;
      found.push({
        workload: placement.workload, taskId: a.taskId, runtimeId: a.runtimeId, restarts,
        lastExit: report.lastExit ?? null, nextRestartAt: report.nextRestartAt ?? null, decision: decision?.action ?? null,
        reason: `crash-looping: task ${a.taskId} on ${a.runtimeId} restarted ${restarts} time(s)${exit}; ${said}${next}`,
      });
    }
  }
  return found;
}


/**
 * Per workload, the restarts of its placed tasks as their agents report them, and how many of them
 * crash-loop (the gauges scalegate_task_restarts and scalegate_tasks_crash_looping). A replaced
 * task's restarts leave the sum with it: a gauge, not a counter.
 */
export function supervisionCounts(
  workloads: readonly { name: string }[],
  placements: readonly { workload: string; assignments: readonly { runtimeId: string; taskId: string }[] }[],
  runtimes: readonly { id: string; status: string; tasks: readonly SupervisedReport[] }[],
): Record<string, { restarts: number; crashLooping: number }> {
  const reports = reportsByAssignment(runtimes);
  const assignmentsOf = new Map(placements.map((p) => [p.workload, p.assignments]));
  const counts: Record<string, { restarts: number; crashLooping: number }> = {};
  for (const { name } of workloads) {
    const tasks = (assignmentsOf.get(name) ?? []).flatMap((a) => reports.get(assignmentKey(a)) ?? []);
    counts[name] = { restarts: tasks.reduce((n, t) => n + restartsOf(t), 0), crashLooping: tasks.filter((t) => t.crashLooping).length };
  }
  return counts;
}

// -- the control plane's decision about a crash-looping task (workflow handleCrashLoops) -----------

/**
 * `move`: through recovery's path (domain/recovery.ts, as if its runtime were lost, for this
 * workload only), the plan applied by applyPlan; `leave`: it keeps running under its backoff, the
 * reason shown in `state`; `none`: nothing to decide any more (not placed, or not crash-looping now).
 */
export type CrashLoopAction = 'move' | 'leave' | 'none';

export interface CrashLoopDecision {
  action: CrashLoopAction;
  reason: string;
}

/** A workload may move a crash-looping task this often within the crash-loop window; past it, the fault is its own. */
export const CRASH_LOOP_MOVES_PER_WINDOW = 1;

/**
 * Move or leave one crash-looping task, from what its workload's runtimes report. A fault that
 * follows the workload (every replica crash-looping, replicas crash-looping on two runtimes, or a
 * task moved already within the window that crash-loops again) is the workload's own: moving would
 * only carry it elsewhere, so the task is left with the reason. A fault of one runtime (the other
 * replicas run healthy elsewhere) moves the task off it when another eligible runtime has room.
 */
export function decideCrashLoop(input: {
  task: { workload: string; taskId: string; runtimeId: string };
  /** null: not defined, or retired */
  workload: { kind: string; retired?: boolean; runtime?: unknown } | null;
  /** the workload's placement (null: none) */
  assignments: readonly { runtimeId: string; taskId: string }[] | null;
  /** what the runtimes not LOST report, by assignmentKey */
  reports: ReadonlyMap<string, Pick<SupervisedReport, 'state' | 'crashLooping' | 'lastExit'> & { counts?: Record<string, number> }>;
  /** moves of this workload's crash-looping tasks recorded within the crash-loop window */
  recentMoves: number;
  /** whether recovery's plan places the task's replacement on another runtime (false: no eligible runtime has room) */
  roomElsewhere: boolean;
}): CrashLoopDecision {
  const { task } = input;
  const subject = `task ${task.taskId} on ${task.runtimeId}`;
  if (!input.workload || input.workload.retired) return { action: 'none', reason: `${task.workload} is not defined any more: nothing to decide` };
  const placed = input.assignments ?? [];
  if (!placed.some((a) => a.runtimeId === task.runtimeId && a.taskId === task.taskId)) {
    return { action: 'none', reason: `${subject} is not placed any more (an operation moved or stopped it): nothing to decide` };
  }
  const report = input.reports.get(assignmentKey(task));
  if (!report?.crashLooping) return { action: 'none', reason: `${subject} is not crash-looping now (${report ? `it reports ${report.state}` : 'its runtime reports nothing of it'})` };
  const exit = report.lastExit ? `, last exit ${describeExit(report.lastExit)}` : '';
  const left = (why: string): CrashLoopDecision => ({ action: 'leave', reason: `left running with its backoff: ${why}` });
  if (input.workload.kind === 'stream') return left(`a stream subtask rejoins its dataflow only through the job's replan (${subject}${exit})`);
  const looping = placed.filter((a) => input.reports.get(assignmentKey(a))?.crashLooping === true);
  const loopingRuntimes = new Set(looping.map((a) => a.runtimeId));
  if (looping.length === placed.length) {
    return left(`every replica of ${task.workload} crash-loops (${looping.length} of ${placed.length}${exit}): the fault is the workload's own, moving would carry it along; fix its definition and roll it out`);
  }
  if (loopingRuntimes.size > 1) {
    return left(`replicas of ${task.workload} crash-loop on ${loopingRuntimes.size} runtimes (${[...loopingRuntimes].sort().join(', ')}): the fault follows the workload, not one runtime`);
  }
  if (input.recentMoves >= CRASH_LOOP_MOVES_PER_WINDOW) {
    return left(`a crash-looping task of ${task.workload} was moved already within the crash-loop window, and ${subject} crash-loops again${exit}: the fault follows the workload`);
  }
  if (!input.roomElsewhere) return left(`no other eligible runtime has room for ${subject}`);
  const healthy = placed.length - looping.length;
  return { action: 'move', reason: `${subject} crash-loops${exit} while ${healthy} other replica(s) of ${task.workload} run healthy: moved off ${task.runtimeId} through recovery's path` };
}
