// Which operation changes a workload's size (DESIGN.md §3 "plan/apply is the scale procedure", §4):
// one decision for every door (POST /scale, a plan's apply, the autoscaler), pure: the API and the
// autoscaler workflow ask the same function.
// The doors translate: they read the workload and its placement, ask here, and start what comes back.
// The operation chosen checks its own start again (a scaleOut/scaleIn whose placement moved meanwhile
// refuses, naming what it found), so a read that raced another change never changes the wrong way.
import type { WorkloadKind } from '../protocol';
import { SCALE_OPTIONS_TAKEN } from '../protocol/scale-inputs';

export type ScaleDoor = 'request' | 'plan' | 'autoscaler';

export type ScaleChoice =
  | { workflow: 'scaleOut' | 'scaleIn' | 'applyPlan'; workflowId: string }
  | { workflow: 'stopTheWorldReplan'; workflowId: string }
  | { workflow: 'rescaleOperator'; workflowId: string };

/** A request no operation takes: `conflict` (it asks for what runs) or `validation-failed` (it cannot be asked so). */
export interface ScaleRefusal {
  refused: 'conflict' | 'validation-failed';
  message: string;
}

export interface ScaleAsk {
  door: ScaleDoor;
  workload: string;
  kind: WorkloadKind;
  /** the replicas (subtasks) the placement holds now */
  current: number;
  target: number;
  approval?: 'auto' | 'manual';
  /** a plan's shortfall: replicas it asked for but could not place (eligible runtimes were missing) */
  unplaced?: number;
}

export function chooseScale(ask: ScaleAsk): ScaleChoice | ScaleRefusal {
  const scale = (workflow: 'scaleOut' | 'scaleIn' | 'applyPlan'): ScaleChoice => ({ workflow, workflowId: `scale:${ask.workload}` });
  const manual = ask.approval === 'manual';
  if (ask.door === 'plan') {
    // A plan short of room would stop replicas nobody asked to stop (chaos seed 10: every runtime
    // away, a plan for 3 placed 0 of them, and its apply became a scale-in to 0).
    if (ask.unplaced && ask.target < Math.max(ask.current, 1)) {
      return {
        refused: 'conflict',
        message: `the plan places ${ask.target} replica(s) of ${ask.workload}, ${ask.unplaced} short of what it asked for (too few eligible runtimes when it was made), below the ${ask.current} that run; plan again once the runtimes are back`,
      };
    }
    // A plan is reviewed as a whole: a stream job's, a first placement's and a same-size one (moves) apply as planned.
    if (ask.kind === 'stream' || ask.current === 0 || ask.target === ask.current) return scale('applyPlan');
    return scale(ask.target > ask.current ? 'scaleOut' : 'scaleIn');
  }
  if (ask.target === ask.current) return { refused: 'conflict', message: `${ask.workload} already runs ${ask.current} replica(s)` };
  if (ask.kind === 'stream') {
    // The autoscaler sizes a stream job by its keyed aggregate: hot for an integer factor, else the replan once.
    if (ask.door === 'autoscaler') return { workflow: 'rescaleOperator', workflowId: `rescale:${ask.workload}` };
    // A request scales every operator proportionally, through the replan from the last completed checkpoint.
    if (manual) return { refused: 'validation-failed', message: 'manual approval applies to scale-out of services and consumers; a stream job scales through the stop-the-world replan' };
    return { workflow: 'stopTheWorldReplan', workflowId: `replan:${ask.workload}` };
  }
  if (ask.target > ask.current) return scale('scaleOut');
  if (manual) return { refused: 'validation-failed', message: 'manual approval applies to scale-out only' };
  return scale('scaleIn');
}

export const isRefusal = (choice: ScaleChoice | ScaleRefusal): choice is ScaleRefusal => 'refused' in choice;

/** The options of a scale request (POST /v1/workloads/:name/scale) each operation takes; the others it would drop. */
const OPTIONS_TAKEN = SCALE_OPTIONS_TAKEN;
export const SCALE_REQUEST_OPTIONS = ['soakMs', 'convergeTimeoutMs', 'steps', 'accept', 'drainTimeoutMs', 'perInstanceLimit', 'override', 'force'] as const;
export type ScaleRequestOption = (typeof SCALE_REQUEST_OPTIONS)[number];

/**
 * A scale request means one thing: an option the chosen operation does not take (a drain timeout
 * on a scale-out, steps on a scale-in) is refused, naming it, instead of dropped without a word.
 * Answers the refusal, or null.
 */
export function optionsNotTaken(choice: ScaleChoice, options: Partial<Record<ScaleRequestOption, unknown>>, change: string): ScaleRefusal | null {
  if (!(choice.workflow in OPTIONS_TAKEN)) return null;
  const taken: readonly string[] = OPTIONS_TAKEN[choice.workflow as keyof typeof OPTIONS_TAKEN];
  const given = SCALE_REQUEST_OPTIONS.filter((option) => options[option] !== undefined && !taken.includes(option));
  if (given.length === 0) return null;
  const operation = choice.workflow === 'stopTheWorldReplan' ? 'a stream job\'s scale (the stop-the-world replan)' : `a ${choice.workflow === 'scaleOut' ? 'scale-out' : 'scale-in'}`;
  return {
    refused: 'validation-failed',
    message: `${given.join(', ')} ${given.length === 1 ? 'does' : 'do'} not apply to ${operation} (${change}); it takes ${taken.join(', ')}: leave ${given.length === 1 ? 'it' : 'them'} out`,
  };
}
