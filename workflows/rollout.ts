// rollout (DESIGN.md §4.7): replace a workload's replicas with its current revision, a canary step of
// one first, then batches (domain/rollout.ts). Each step passes the scale-out's gates, writes the
// replacement (consumers drain their replaced replicas before the write, as a scale-in does; services
// start the new one before the old stops), converges, soaks, and is compared with the old revision's
// baseline. A failed comparison, a failure after the first write, or an abort rolls every replaced
// replica back to the revision it ran, makes that revision the workload's current one again, and ends
// `compensated` naming the row; where the roll-back itself fails, the replan (at the old revision)
// is the compensation. Runs under scale:<workload>, so no scale-out starts anything meanwhile.
import { ApplicationFailure, defineQuery, proxyActivities, proxyLocalActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import {
  baselineHealth, compareEvidence, DEFAULT_BACKLOG_TOLERANCE, DEFAULT_LATENCY_TOLERANCE, DEFAULT_RSS_TOLERANCE, expectedRateAt, type EvidenceComparison, type EvidenceSnapshot,
} from '../domain/evidence';
import { capacityFrom, evaluateScaleOutGates, formatEvidenceGap, type GateReport } from '../domain/gates';
import { planRolloutSteps, replaceReplicas, revisionOfReplica, type Replacement } from '../domain/rollout';
import type { Assignment, LedgerOutcome, Workload } from '../protocol';
import { ACCEPTABLE_UNKNOWNS, LIMITS, WorkloadName } from '../protocol/names';
import { applyPlacement, DEFAULT_CONVERGE_TIMEOUT_MS, drainActivity } from './apply-placement';
import { failureMessage, formatDuration, handleAborts, parseInput, profiles, reportingOutcome, runtimesOf, trackOperation } from './operation';
import { drainDeadlineMs } from './scale-in';
import { compensate } from './stop-the-world-replan';
import { askPatch, ROLLOUT_STOPS_REPLACED } from './patches';

const store = proxyActivities<Activities>(profiles.storeCall);
const shortCalls = proxyLocalActivities<Activities>(profiles.localStore);
const agentCalls = proxyActivities<Activities>(profiles.agentCall);

export const RolloutInputSchema = z.object({
  workload: WorkloadName,
  reason: z.string().max(500).default('a new revision'),
  /** the revision to roll out: the workload's current one (a PUT that changed it names it; refused if it moved since) */
  revision: z.string().min(1).max(100).optional(),
  /** replicas per step after the canary step of one (default: the workload's `rollout.batchSize`, else half of the replicas to replace, rounded up) */
  batchSize: z.int().min(1).max(LIMITS.replicas).optional(),
  /** how long each step is watched before it is compared with the baseline (default: the workload's `rollout.soakMs`, else 5 s) */
  soakMs: z.int().min(0).max(3_600_000).optional(),
  /** default: the workload's `rollout.convergeTimeoutMs`, else 60 s */
  convergeTimeoutMs: z.int().min(1000).max(3_600_000).optional(),
  /** how long a consumer's replaced replica may take to finish in-flight work, commit and release */
  drainTimeoutMs: z.int().min(100).max(3_600_000).default(60_000),
  /** gate rows whose unknowns this request accepts */
  accept: z.array(z.enum(ACCEPTABLE_UNKNOWNS)).max(ACCEPTABLE_UNKNOWNS.length).optional(),
});
export type RolloutInput = z.input<typeof RolloutInputSchema>;

export interface RolloutStep {
  role: 'canary' | 'batch';
  replaced: { index: number; runtimeId: string; from: string; to: string | null; fromRevision: string }[];
  outcome: 'pending' | 'good' | 'regression' | 'failed' | 'rolled-back';
  reasons: string[];
}

export interface RolloutStatus {
  kind: 'rollout';
  workload: string;
  phase: string;
  outcome: 'running' | 'completed' | 'refused' | 'compensated' | 'cancelled' | 'failed';
  fromRevision: string | null;
  toRevision: string;
  replicas: number;
  gates: GateReport | null;
  evidenceGap: string | null;
  baseline: EvidenceSnapshot | null;
  after: EvidenceSnapshot | null;
  comparison: EvidenceComparison | null;
  steps: RolloutStep[];
  soakEndsAt: string | null;
  compensation: {
    reason: string; restored: string | null; rolledBack: string[]; replanned: boolean;
    /** old replicas a failed step's make-before-break had not stopped yet, stopped by the roll-back */
    stoppedReplaced?: string[];
  } | null;
  error: string | null;
}

export const rolloutStatusQuery = defineQuery<RolloutStatus>('status');
export { abortSignal } from './operation';

const DEFAULT_SOAK_MS = 5_000;
const refused = (message: string) => ApplicationFailure.create({ type: 'invalid-input', nonRetryable: true, message: `rollout: ${message}` });

export async function rollout(rawInput: unknown): Promise<RolloutStatus> {
  return reportingOutcome(() => runRollout(rawInput));
}

/** The revision most of `replicas` run (the baseline's, what a roll-back restores as current). */
function commonRevision(replicas: readonly Assignment[], current: string): string | null {
  const counts: Record<string, number> = {};
  for (const a of replicas) counts[revisionOfReplica(a, current)] = (counts[revisionOfReplica(a, current)] ?? 0) + 1;
  const ranked = Object.entries(counts).sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1));
  return ranked[0]?.[0] ?? null;
}

async function runRollout(rawInput: unknown): Promise<RolloutStatus> {
  const request = parseInput(RolloutInputSchema, rawInput, 'rollout');
  const { workflowId, runId } = workflowInfo();
  const [loaded, placement] = await Promise.all([
    shortCalls.loadWorkload.executeWithOptions({ summary: `load workload ${request.workload}` }, [request.workload]),
    shortCalls.loadPlacement.executeWithOptions({ summary: `load placement of ${request.workload}` }, [request.workload]),
  ]);
  if (!loaded || loaded.retired) throw ApplicationFailure.create({ type: 'not-found', nonRetryable: true, message: `rollout: no active workload ${request.workload}` });
  const workload = loaded as Workload;
  // The request's settings, else the workload's rollout policy, else the defaults.
  const policy = workload.kind === 'stream' ? undefined : workload.rollout;
  const input = {
    ...request, batchSize: request.batchSize ?? policy?.batchSize, soakMs: request.soakMs ?? policy?.soakMs ?? DEFAULT_SOAK_MS,
    convergeTimeoutMs: request.convergeTimeoutMs ?? policy?.convergeTimeoutMs ?? DEFAULT_CONVERGE_TIMEOUT_MS,
  };
  if (!workload.runs) throw refused(`${input.workload} is a ${workload.kind}: only services and consumers are rolled out (a stream job's layout changes through rescale and replan)`);
  const target = workload.runs;
  const current = placement?.assignments ?? [];
  const steps = planRolloutSteps(current, target, input.batchSize);
  const pending = current.filter((a) => revisionOfReplica(a, target) !== target);
  const fromRevision = commonRevision(pending, target);
  const replicas = current.length;

  const op = trackOperation('rollout', input.workload, `rollout ${input.workload} → ${target}`);
  const status: RolloutStatus = {
    kind: 'rollout', workload: input.workload, phase: op.phase, outcome: 'running', fromRevision, toRevision: target, replicas,
    gates: null, evidenceGap: null, baseline: null, after: null, comparison: null, soakEndsAt: null, compensation: null, error: null,
    steps: steps.map((step) => ({
      role: step.role, outcome: 'pending', reasons: [],
      replaced: step.taskIds.map((taskId) => {
        const a = current.find((c) => c.taskId === taskId)!;
        return { index: a.index, runtimeId: a.runtimeId, from: taskId, to: null, fromRevision: revisionOfReplica(a, target) };
      }),
    })),
  };
  setHandler(rolloutStatusQuery, () => status);
  const aborts = handleAborts();
  const enter = (phase: string) => {
    op.enter(phase);
    status.phase = phase;
  };
  const ledger = (outcome: LedgerOutcome, reason: string, extra: Record<string, unknown> = {}) => aborts.exit(() =>
    shortCalls.appendLedger.executeWithOptions({ summary: `ledger: rollout ${input.workload} ${outcome}` }, [{
      kind: 'rollout', workload: input.workload, fromReplicas: replicas, toReplicas: replicas, reason, outcome, planId: null, workflowId, runId,
      inputs: { request: input.reason, fromRevision, toRevision: target, gates: status.gates?.rows ?? null, ...extra },
      evidence: status.comparison ? { baseline: status.baseline, after: status.after, comparison: status.comparison } : null,
    }]));
  const end = (outcome: 'completed' | 'refused' | 'cancelled', reason: string, ledgerOutcome: LedgerOutcome = outcome): Promise<RolloutStatus> => aborts.exit(async () => {
    status.outcome = outcome;
    if (outcome !== 'completed') status.error = reason;
    enter(outcome === 'completed' ? 'done' : outcome);
    await ledger(ledgerOutcome, reason);
    return status;
  });

  if (input.revision !== undefined && input.revision !== target) {
    return end('refused', `the workload's revision moved to ${target} since ${input.revision} was asked for; nothing changed`, 'stale-plan');
  }
  if (steps.length === 0) return end('completed', `every replica runs ${target}: nothing to roll out`, 'not-needed');

  /** every replacement written so far, in order: what a roll-back undoes */
  const replaced: Replacement[] = [];
  /**
   * The replacements of the step under way, written but not yet through their make-before-break: a
   * step whose new replica never became ready leaves their old replicas running, held by no placement
   */
  let unstopped: Replacement[] = [];
  const consumer = workload.kind === 'consumer';

  /**
   * Rolls every replaced replica back to the revision it ran (the same step, in reverse), then makes
   * the baseline's revision the workload's current one. Where that fails, the replan at the old
   * revision is the compensation. Runs in a scope no cancellation cuts.
   */
  const rollBack = (reason: string): Promise<RolloutStatus> => aborts.exit(async () => {
    enter('rolling-back');
    const compensation: NonNullable<RolloutStatus['compensation']> = { reason, restored: null, rolledBack: [], replanned: false };
    status.compensation = compensation;
    for (const step of status.steps) if (step.outcome !== 'pending') step.outcome = step.outcome === 'good' ? 'rolled-back' : step.outcome;
    try {
      const now = await shortCalls.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
      const back = Object.fromEntries(replaced.filter((r) => now?.assignments.some((a) => a.taskId === r.to.taskId)).map((r) => [r.to.taskId, r.from.revision ?? fromRevision!]));
      if (now && Object.keys(back).length) {
        const { fence } = await replaceInSteps(now, back, `roll ${Object.keys(back).length} replica(s) back`);
        compensation.rolledBack = Object.keys(back);
        // The old replicas the failed step left running are stopped here, not left to their agents'
        // next heartbeat: the roll-back ends with the replicas its placement holds, no more (a
        // compensated rollout left a fourth container of three in rollout.test; patch rollout-stops-replaced).
        if (unstopped.length && askPatch(ROLLOUT_STOPS_REPLACED)) {
          const tasks = unstopped.map((r) => ({ runtimeId: r.from.runtimeId, taskId: r.from.taskId }));
          await drainActivity().executeWithOptions({ summary: `stop ${tasks.map((t) => t.taskId).join(', ')}: replaced by the failed step, held by no placement` }, [{ tasks, placementFence: fence }]);
          compensation.stoppedReplaced = tasks.map((t) => t.taskId);
        }
      }
      if (fromRevision) compensation.restored = (await store.restoreRevision.executeWithOptions({ summary: `${input.workload} runs ${fromRevision} again` }, [{ workload: input.workload, revision: fromRevision }])).runs ?? null;
    } catch (error) {
      compensation.replanned = true;
      try {
        if (fromRevision && compensation.restored === null) {
          compensation.restored = (await store.restoreRevision.executeWithOptions({ summary: `${input.workload} runs ${fromRevision} again` }, [{ workload: input.workload, revision: fromRevision }])).runs ?? null;
        }
        await compensate(input.workload, replicas, `${reason}; the roll-back failed: ${failureMessage(error)}`, input.convergeTimeoutMs);
      } catch (replanError) {
        status.outcome = 'failed';
        status.error = `compensation failed: ${failureMessage(replanError)}`;
        enter('failed');
        await ledger('failed', `${reason}; ${status.error}`);
        throw replanError;
      }
    }
    status.outcome = 'compensated';
    status.error = reason;
    enter('compensated');
    await ledger('compensated', reason, { rolledBack: compensation.rolledBack, replanned: compensation.replanned });
    return status;
  });

  /** One fenced replacement of the replicas `revisions` names (task id → revision), converged. */
  async function replaceInSteps(
    now: NonNullable<typeof placement>, revisions: Record<string, string>, what: string, onCommitted?: (replacements: Replacement[]) => void,
  ): Promise<{ replacements: Replacement[]; fence: number }> {
    const { assignments, replacements } = replaceReplicas(now.assignments, revisions, { workload: input.workload, fence: now.fence, generation: now.generation });
    const plan = await store.preparePlan.executeWithOptions({ summary: `plan: ${what}` }, [{
      workload: input.workload, replicas: assignments.length, decided: { assignments, onFence: now.fence, warnings: [] },
    }]);
    const applied = await applyPlacement(plan, {
      convergeTimeoutMs: input.convergeTimeoutMs, onPhase: enter, onCommitted: () => onCommitted?.(replacements),
      // Consumers drain first, as a scale-in: a replaced replica commits and releases before its partitions move.
      ...(consumer ? { drainFirst: { drainTimeoutMs: drainDeadlineMs(input.drainTimeoutMs, workload) } } : {}),
    });
    return { replacements, fence: applied.fence };
  }

  // Before the first write nothing changed: an abort ends it `cancelled`, a gate `refused`.
  try {
    enter('baseline');
    status.baseline = await aborts.guard(() => agentCalls.captureEvidence.executeWithOptions({ summary: `baseline: evidence of ${input.workload} (${fromRevision})` }, [{ workload: input.workload }]));
  } catch (error) {
    if (aborts.isAbort(error)) return end('cancelled', aborts.reason!);
    throw error;
  }

  for (const [index, step] of status.steps.entries()) {
    const which = `${step.role} step (${index + 1} of ${status.steps.length})`;
    const changed = () => replaced.length > 0;
    let stepFailure: string | null = null;
    try {
      await aborts.guard(async () => {
        // The scale-out's gates, for this step's runtimes: the baseline healthy, the contract known, the recipients reachable.
        enter('gates');
        const recipients = [...new Set(step.replaced.map((r) => r.runtimeId))];
        const facts = await agentCalls.gatherGateFacts.executeWithOptions({ summary: `gates: probe ${runtimesOf(step.replaced)} (${which})` }, [{ workload: input.workload, recipientRuntimeIds: recipients, capacity: 'count' }]);
        status.gates = evaluateScaleOutGates({
          workload, currentReplicas: replicas, targetReplicas: replicas, capacity: capacityFrom(facts), probes: facts.probes,
          recipientRuntimeIds: recipients, broker: facts.broker, baseline: baselineHealth(status.baseline!, replicas),
          ...(index === 0 ? { baselineTasks: status.baseline!.tasks } : {}),
          expectedRatePerSec: expectedRateAt(workload.kind, status.baseline!, replicas, replicas), accepted: input.accept,
        });
        if (!status.gates.passed) {
          status.evidenceGap = formatEvidenceGap(status.gates);
          throw refused(`gates failed before the ${which}: ${status.evidenceGap}`);
        }
        const now = await shortCalls.loadPlacement.executeWithOptions({ summary: `load placement of ${input.workload}` }, [input.workload]);
        if (!now) throw refused(`${input.workload} has no placement any more`);
        const revisions = Object.fromEntries(step.replaced.map((r) => [r.from, target]));
        await replaceInSteps(now, revisions, `${which}: replace ${step.replaced.map((r) => r.from).join(', ')} with ${target}`, (replacements) => {
          replaced.push(...replacements);
          // a consumer's replaced replicas were drained before the write; a service's are stopped once the new ones are ready
          unstopped = consumer ? [] : replacements;
          for (const r of step.replaced) r.to = replacements.find((x) => x.from.taskId === r.from)?.to.taskId ?? null;
        });
        unstopped = [];
        const windowStart = Date.now();
        if (input.soakMs > 0) {
          status.soakEndsAt = new Date(Date.now() + input.soakMs).toISOString();
          enter('soaking');
          await sleep(input.soakMs, { summary: `soak ${formatDuration(input.soakMs)} (${which})` });
        }
        enter('comparing');
        status.after = await agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload} (${which})` }, [{ workload: input.workload, sinceMs: windowStart }]);
      });
    } catch (error) {
      const abort = aborts.isAbort(error);
      const gateFailed = !abort && status.evidenceGap !== null && status.gates !== null && !status.gates.passed;
      if (!changed()) {
        if (abort) return end('cancelled', aborts.reason!);
        if (gateFailed) return end('refused', `gates failed before the ${which}: ${status.evidenceGap}`);
        status.outcome = 'failed';
        status.error = failureMessage(error);
        enter('failed');
        await ledger('failed', status.error);
        throw error;
      }
      step.outcome = 'failed';
      stepFailure = abort ? aborts.reason! : gateFailed ? `gates failed before the ${which}: ${status.evidenceGap}` : `the ${which} failed: ${failureMessage(error)}`;
      step.reasons = [stepFailure];
    }
    if (stepFailure !== null) {
      // What the failed step left, judged like any other: a replica that never became ready is the tasks row.
      const judged = await judgeAfterFailure(index);
      return rollBack(judged.length ? `${stepFailure}; comparison: ${judged.join('; ')}` : stepFailure);
    }

    status.comparison = compareAgainstBaseline(status.after!);
    step.reasons = status.comparison.reasons;
    step.outcome = status.comparison.verdict === 'regression' ? 'regression' : 'good';
    if (status.comparison.verdict === 'regression') return rollBack(`regression at the ${which}: ${status.comparison.reasons.join('; ')}`);
    await ledger('running', `${which} good: ${step.replaced.map((r) => `${r.from} → ${r.to}`).join(', ')}`, { step: { index, role: step.role, replaced: step.replaced } });
  }
  return end('completed', input.reason);

  function compareAgainstBaseline(after: EvidenceSnapshot): EvidenceComparison {
    return compareEvidence(status.baseline!, after, {
      expectedTasks: replicas, kind: workload.kind, latency: workload.kind === 'service' ? DEFAULT_LATENCY_TOLERANCE : undefined,
      backlog: DEFAULT_BACKLOG_TOLERANCE, rss: DEFAULT_RSS_TOLERANCE,
    });
  }

  /** The failing rows of what a failed step left (none when it cannot be measured: the failure itself is the reason). */
  async function judgeAfterFailure(index: number): Promise<string[]> {
    try {
      status.after = await aborts.exit(() => agentCalls.captureEvidence.executeWithOptions({ summary: `after: evidence of ${input.workload} (step ${index + 1} failed)` }, [{ workload: input.workload }]));
      status.comparison = compareAgainstBaseline(status.after);
      return status.comparison.verdict === 'regression' ? status.comparison.reasons : [];
    } catch {
      return [];
    }
  }
}
