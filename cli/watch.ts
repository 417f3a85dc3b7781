// `--wait` and `operations watch`: follow one operation until it ends, a line per step of progress
// (gates → plan → tasks ready n/m → soak countdown → comparison), then its outcome and reason. The
// exit code says how it ended (EXIT_CODES). On a terminal the countdown and the ready count update
// in place; elsewhere each change is a plain line, without control characters.

/** How `--wait` exits: by the operation's status (GET /v1/operations/:id). */
export const EXIT_CODES = { completed: 0, failed: 1, refused: 3, compensated: 4, cancelled: 5 } as const;
import { setTimeout as wait } from 'node:timers/promises';
import type { z } from 'zod';
import { StateSchema } from '../protocol';
import { OperationAnswerSchema, statusOf, UnreadableAnswer, type OperationAnswer } from './answers';
export type EndedStatus = keyof typeof EXIT_CODES;

/** The workload an operation's id names (scale:, replan:, rescale:), whose replicas it changes. */
export function workloadOf(workflowId: string): string | null {
  const match = /^(?:scale|replan|rescale):(.+)$/.exec(workflowId);
  return match ? match[1] : null;
}

export interface ReplicaFigures {
  desired?: number;
  placed?: number;
  ready?: number;
}

/**
 * One operation's progress as a line: `key` is what changes it (a new key is a new line), `text`
 * is the line, whose countdown and ready count may change under the same key.
 */
export function progressLine(op: OperationAnswer, replicas: ReplicaFigures | null, nowMs: number): { key: string; text: string } {
  const parts: string[] = [];
  const keyParts: string[] = [op.phase ?? 'starting'];
  if (op.gates?.rows?.length) {
    const rows = op.gates.rows;
    const failed = rows.filter((r) => !r.passed).map((r) => r.gate);
    parts.push(`gates ${rows.length - failed.length}/${rows.length} passed${failed.length ? ` (failed: ${failed.join(', ')})` : ''}`);
    keyParts.push('gates');
  }
  if (op.plan) {
    parts.push(`plan +${op.plan.starts?.length ?? 0} −${op.plan.stops?.length ?? 0}${op.plan.moves?.length ? ` ↔${op.plan.moves.length}` : ''}`);
    keyParts.push('plan');
  }
  const rescale = statusOf(op, 'rescaleOperator');
  if (rescale && rescale.to !== undefined) {
    parts.push(`${rescale.operator} ${rescale.from === null || rescale.from === undefined ? '' : `${rescale.from} `}→ ${rescale.to}${rescale.hot === false ? ' (stop-the-world)' : ''}${rescale.checkpoint ? ` at checkpoint ${rescale.checkpoint}` : ''}`);
  }
  const rollout = statusOf(op, 'rollout');
  if (rollout?.steps?.length) {
    const judged = rollout.steps.filter((step) => step.outcome !== 'pending').length;
    parts.push(`${rollout.fromRevision ?? '?'} → ${rollout.toRevision}: step ${Math.min(judged + 1, rollout.steps.length)}/${rollout.steps.length}${judged ? ` (${rollout.steps.slice(0, judged).map((step) => `${step.role} ${step.outcome}`).join(', ')})` : ''}`);
    keyParts.push(`steps ${judged}`);
  }
  const recovery = statusOf(op, 'recoverRuntime');
  if (recovery?.decisions?.length) parts.push(`${recovery.decisions.length} workload(s) decided`);
  if (replicas && replicas.placed !== undefined && replicas.ready !== undefined && op.status === 'running') {
    parts.push(`tasks ready ${replicas.ready}/${replicas.placed}`);
  }
  const soakEndsAt = op.soakEndsAt ?? rollout?.soakEndsAt;
  if (op.phase === 'soaking' && soakEndsAt) {
    parts.push(`soak ${Math.max(0, Math.ceil((Date.parse(soakEndsAt) - nowMs) / 1000))} s left`);
  }
  const verdict = op.evidence?.comparison?.verdict ?? rollout?.comparison?.verdict;
  if (verdict) {
    parts.push(`comparison ${verdict}`);
    keyParts.push(`comparison ${verdict}`);
  }
  return { key: keyParts.join('|'), text: `${op.phase ?? 'starting'}${parts.length ? `: ${parts.join(' · ')}` : ''}` };
}

/** A field of a value of no declared shape (an operation's result of any kind), or undefined. */
const fieldOf = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);

/** Why an operation ended as it did, in one line (null: nothing more to say than its status). */
export function outcomeReason(op: OperationAnswer): string | null {
  const result = op.result;
  const candidates = [
    op.failure, op.evidenceGap, op.compensation?.reason, fieldOf(result, 'error'), fieldOf(fieldOf(result, 'compensation'), 'reason'), fieldOf(result, 'reason'),
    op.evidence?.comparison?.reasons?.length ? op.evidence.comparison.reasons.join('; ') : null,
  ];
  return candidates.find((c): c is string => typeof c === 'string' && c.length > 0) ?? null;
}

export interface FollowOptions {
  /** GET an API path as the viewer, its answer parsed with `schema` */
  get<S extends z.ZodType>(path: string, schema: S): Promise<z.output<S>>;
  /** write text as it is (no newline added) */
  write(text: string): void;
  /** a terminal: update the current line in place */
  tty: boolean;
  /** the run to follow (the one a start answered): another run of the id started later is not it */
  runId?: string;
  intervalMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** Follows `workflowId` to its end: prints its progress and its outcome, answers the final view. */
export async function followOperation(workflowId: string, options: FollowOptions): Promise<OperationAnswer> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => wait(ms));
  const startedAt = now();
  const workload = workloadOf(workflowId);
  const elapsed = () => `${((now() - startedAt) / 1000).toFixed(1).padStart(5)} s`;
  let shown: { key: string; text: string } | null = null;
  let lineOpen = false;
  let unreachable = false;
  const withoutCountdown = (text: string) => text.replace(/soak \d+ s left/, 'soak');
  const print = (line: { key: string; text: string }) => {
    if (options.tty) {
      if (shown?.text === line.text) return;
      // Same step: rewrite the line (countdown, ready count); a new step starts a new line.
      const sameStep = shown?.key === line.key;
      options.write(`${sameStep ? '\r\x1b[K' : lineOpen ? '\n' : ''}[${elapsed()}] ${line.text}`);
      lineOpen = true;
    } else {
      // Off a terminal a line per change of step or figures; a ticking countdown is not a change.
      if (shown && withoutCountdown(shown.text) === withoutCountdown(line.text)) return;
      options.write(`[${elapsed()}] ${line.text}\n`);
    }
    shown = line;
  };
  for (;;) {
    // The state is read before the operation: a ready count then never runs ahead of the steps the
    // operation shows (the placements an operation writes follow its gates and its plan).
    const state = workload ? await options.get('/v1/state', StateSchema).catch((error: unknown) => {
      if (error instanceof UnreadableAnswer) throw error;
      return null;
    }) : null;
    let op: OperationAnswer;
    try {
      op = await options.get(`/v1/operations/${encodeURIComponent(workflowId)}${options.runId ? `?runId=${encodeURIComponent(options.runId)}` : ''}`, OperationAnswerSchema);
      unreachable = false;
    } catch (error) {
      // An API restart or a Temporal hiccup is not the operation's end: say so once, keep following.
      if (error instanceof UnreadableAnswer) throw error;
      if ((error as { status?: number }).status === 404 || (error as { status?: number }).status === 401 || (error as { status?: number }).status === 403) throw error;
      if (!unreachable) print({ key: 'unreachable', text: `cannot read ${workflowId} (${(error as Error).message}); still trying` });
      unreachable = true;
      await sleep(options.intervalMs ?? 500);
      continue;
    }
    const replicas: ReplicaFigures | null = op.status === 'running' ? (state?.workloads?.find((w) => w.name === workload) ?? null) : null;
    print(progressLine(op, replicas, now()));
    if (op.status !== 'running') {
      const reason = outcomeReason(op);
      options.write(`${lineOpen && options.tty ? '\n' : ''}${op.status}${reason ? `: ${reason}` : ''} (${workflowId}, ${elapsed().trim()})\n`);
      return op;
    }
    await sleep(options.intervalMs ?? 500);
  }
}

/** The exit code of an ended operation's status (an unknown status is a failure). */
export const exitCodeOf = (status: string): number => (status in EXIT_CODES ? EXIT_CODES[status as EndedStatus] : EXIT_CODES.failed);
