// scaleOut and scaleIn of a Kubernetes workload (DESIGN.md §5 "Kubernetes workloads", issue 37):
// the same workflows, the same status, ledger and exits, through the runtime port's Kubernetes
// activities (activities/kubernetes.ts) instead of placements and agents.
//   scaleOut: baseline (the pods) → gates (the contract as for any workload; capacity from the
//     Ready nodes matching the node selector) → the `scale` write with the expected resourceVersion
//     (a conflict reads again and decides again) → converge (every pod Ready) → soak → compare
//     (readiness, restarts) → ledger. A failure or a regression after the write scales back.
//   scaleIn: tier rules → baseline → the PodDisruptionBudget gate → victims (idle first, then least
//     loaded, never by age) → mark them (lowest pod-deletion-cost, drain request) → wait for each
//     acknowledgement → lower the replicas, so the ReplicaSet controller deletes exactly them →
//     converge → compare → ledger. A victim that does not acknowledge by the deadline ends it
//     `compensated`: every mark removed, nothing deleted (unless the request forces it, which the
//     ledger records).
import { ApplicationFailure, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { baselineHealth, type EvidenceSnapshot } from '../domain/evidence';
import { evaluateScaleOutGates, formatEvidenceGap, GATE, type GateReport } from '../domain/gates';
import { chooseKubernetesVictims, compareKubernetesPods, disruptionBudgetGate, kubernetesCapacityGate, podSnapshot } from '../domain/kubernetes';
import { baselineMetricProblems, compareMetrics } from '../domain/pod-metrics';
import { failureMessage, formatDuration, profiles } from './operation';
import { awaitApproval } from './scale-approval';
import type { ScaleOperation, ScaleStatus } from './scale-operation';
import { describeObject, type KubernetesRead, type KubernetesStatus } from './kubernetes-runtime';
import { askPatch, KUBERNETES_MANUAL_APPROVAL, KUBERNETES_METRICS_JUDGED } from './patches';

const cluster = proxyActivities<Activities>(profiles.agentCall);
const store = proxyActivities<Activities>(profiles.storeCall);
const waits = proxyActivities<Activities>(profiles.longCall);

export interface KubernetesScaleInput {
  workload: string;
  replicas: number;
  reason: string;
  convergeTimeoutMs: number;
  soakMs?: number;
  drainTimeoutMs?: number;
  force?: boolean;
  approval?: 'auto' | 'manual';
  approvalTimeoutMs?: number;
  accept?: string[];
  override?: { reason: string };
}

export async function kubernetesScale(kind: 'scaleOut' | 'scaleIn', input: KubernetesScaleInput, op: ScaleOperation, read: KubernetesRead): Promise<ScaleStatus> {
  const { status, enter, aborts, from, refuse, cancel } = op;
  const { workflowId } = workflowInfo();
  const k8s: KubernetesStatus = {
    object: describeObject(read.ref), resourceVersion: read.object.resourceVersion, conflicts: 0,
    victims: [], reasons: {}, marked: [], acknowledged: [], missing: [], forced: [], unmarked: [], deleted: [],
  };
  status.kubernetes = k8s;
  const summary = (what: string) => `${what} (${k8s.object})`;
  const live = (pods: KubernetesRead['pods']) => pods.filter((p) => !p.terminating);
  const snapshot = (pods: KubernetesRead['pods']): EvidenceSnapshot => podSnapshot(live(pods), Date.now());

  // Runs before KUBERNETES_MANUAL_APPROVAL refused a manual approval at once (asked only on that path).
  if (input.approval === 'manual' && (kind !== 'scaleOut' || !askPatch(KUBERNETES_MANUAL_APPROVAL))) {
    status.evidenceGap = 'manual approval is not offered for Kubernetes workloads yet: scale with approval "auto"';
    return refuse(status.evidenceGap);
  }

  /** The scale write on the resourceVersion read; a conflict reads again and, if the size it decided from still holds, writes again. */
  const writeScale = async (replicas: number, expectFrom: number): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const written = await cluster.kubernetesScale.executeWithOptions({ summary: summary(`scale ${input.workload} to ${replicas} at resourceVersion ${k8s.resourceVersion}`) }, [
          { workload: input.workload, replicas, resourceVersion: k8s.resourceVersion },
        ]);
        k8s.resourceVersion = written.resourceVersion;
        return;
      } catch (error) {
        if (!isScaleConflict(error) || attempt >= 4) throw error;
        k8s.conflicts += 1;
        const again = await cluster.kubernetesObject.executeWithOptions({ summary: summary('read again after a conflict') }, [{ workload: input.workload }]);
        k8s.resourceVersion = again.object.resourceVersion;
        // Our own write took effect and only its answer was lost (the activity retried on the old
        // resourceVersion): the object already asks for the size decided.
        if (again.object.replicas === replicas) return;
        if (again.object.replicas !== expectFrom) {
          throw ApplicationFailure.create({
            type: 'object-moved', nonRetryable: true,
            message: `${k8s.object} moved while this operation decided: it now asks ${again.object.replicas} replica(s), not ${expectFrom}`,
          });
        }
      }
    }
  };
  const unmark = async (pods: string[]) => {
    if (!pods.length) return;
    k8s.unmarked = await cluster.kubernetesUnmarkVictims.executeWithOptions({ summary: summary(`remove the marks of ${pods.length} pod(s)`) }, [{ workload: input.workload, pods }]);
  };
  /** After a change: back to `replicas` (the size before), converged, then `compensated` with its ledger row. */
  const scaleBack = (reason: string, replicas: number) => op.compensate(async () => {
    status.compensation = { reason, replicas, outcome: null };
    const now = await cluster.kubernetesObject.executeWithOptions({ summary: summary('read before scaling back') }, [{ workload: input.workload }]);
    k8s.resourceVersion = now.object.resourceVersion;
    if (now.object.replicas !== replicas) await writeScale(replicas, now.object.replicas);
    await waits.kubernetesAwaitConverged.executeWithOptions({ summary: summary(`converge back to ${replicas}`) }, [{ workload: input.workload, replicas, timeoutMs: input.convergeTimeoutMs }]);
  }, {
    compensated: () => [reason, { compensationReplicas: replicas, kubernetes: k8s }],
    failed: (error) => [`${reason}; ${error}`, { kubernetes: k8s }],
  });
  const complete = async (note: string) => {
    await store.setDesiredReplicas.executeWithOptions({ summary: `desired replicas of ${input.workload}: ${input.replicas}` }, [{ workload: input.workload, replicas: input.replicas }]);
    return op.complete(`${input.reason}${note}`, { kubernetes: k8s, ...(k8s.forced.length ? { forced: k8s.forced } : {}) });
  };

  status.baseline = snapshot(read.pods);
  if (kind === 'scaleOut') {
    enter('gates');
    const facts = await cluster.kubernetesGateFacts.executeWithOptions({ summary: summary('gates: read the nodes') }, [{ workload: input.workload }]);
    const health = baselineHealth(status.baseline, from);
    const contractRows = evaluateScaleOutGates({
      workload: op.workload, currentReplicas: from, targetReplicas: input.replicas, capacity: { runtimesWithRoom: 0, freeSlots: 0 }, probes: [], recipientRuntimeIds: [],
      baseline: health, baselineTasks: status.baseline.tasks, accepted: input.accept as never,
    }).rows;
    const capacity = kubernetesCapacityGate({ nodes: facts.nodes, nodeSelector: read.object.nodeSelector, requests: read.object.requests, current: from, target: input.replicas });
    const rows = contractRows.map((row) => {
      if (row.gate === GATE.capacity) return capacity;
      if (row.gate === GATE.connectivity) return { gate: row.gate, passed: true, detail: 'the cluster places the pods: no agent probes them' };
      return row;
    });
    status.gates = { passed: rows.every((r) => r.passed), rows } satisfies GateReport;
    if (!status.gates.passed) {
      status.evidenceGap = formatEvidenceGap(status.gates);
      return refuse(status.evidenceGap);
    }
    if (input.approval === 'manual') {
      // The gates passed: the change waits for an operator (POST /v1/operations/:id/approve or
      // /reject, the same Updates as any scale-out), and the size it asks is written only then.
      const details = `scale ${input.workload} (${k8s.object}) ${from} → ${input.replicas}: **awaiting approval** (approve: POST /v1/operations/${workflowId}/approve)`;
      await awaitApproval(op, details, input.approvalTimeoutMs ?? 24 * 3_600_000);
    }
    // The contract's metrics, read from the pods just before the write: a baseline that cannot be
    // read (a pod not answering, a metric not served) refuses the change, since nothing after it
    // could be judged. (Asked only for a workload naming metrics: no earlier run read any.)
    const declared = op.workload.contract.metrics ?? [];
    const endpoint = read.ref.metrics;
    const judgesMetrics = declared.length > 0 && endpoint !== undefined && askPatch(KUBERNETES_METRICS_JUDGED);
    const readMetrics = (when: string) => waits.kubernetesPodMetrics.executeWithOptions({
      summary: summary(`${when}: ${declared.map((m) => m.name).join(', ')} from the pods over ${formatDuration(endpoint?.windowMs ?? 0)}`),
    }, [{ workload: input.workload }]);
    if (judgesMetrics) {
      let baseline;
      try {
        // in the abort guard: an abort or a Temporal cancellation while it reads ends the operation `cancelled`, with its row
        baseline = await aborts.guard(() => readMetrics('baseline'));
      } catch (error) {
        if (aborts.isAbort(error)) return cancel(aborts.reason!);
        throw error;
      }
      k8s.metrics = { baseline, after: null };
      const problems = baselineMetricProblems(declared, baseline);
      if (problems.length) {
        status.evidenceGap = `the metrics the contract names could not be read before the change: ${problems.join('; ')}`;
        return refuse(status.evidenceGap);
      }
    }
    if (aborts.reason) return cancel(aborts.reason);
    let written = false;
    try {
      await aborts.guard(async () => {
        enter('applying');
        await writeScale(input.replicas, from);
        written = true;
        enter('converging');
        await waits.kubernetesAwaitConverged.executeWithOptions({ summary: summary(`converge: ${input.replicas} pod(s) Ready`) }, [
          { workload: input.workload, replicas: input.replicas, timeoutMs: input.convergeTimeoutMs },
        ]);
        const soakMs = input.soakMs ?? 0;
        if (soakMs > 0) {
          enter('soaking');
          await sleep(soakMs, { summary: `soak ${formatDuration(soakMs)}` });
        }
      });
    } catch (error) {
      const abort = aborts.isAbort(error);
      if (!written) {
        if (abort) return cancel(aborts.reason!);
        status.evidenceGap = failureMessage(error);
        return refuse(status.evidenceGap);
      }
      return scaleBack(abort ? aborts.reason! : `failed after the scale write: ${failureMessage(error)}`, from);
    }
    enter('comparing');
    const after = await cluster.kubernetesObject.executeWithOptions({ summary: summary('after: the pods') }, [{ workload: input.workload }]);
    status.after = snapshot(after.pods);
    // (histories recorded before kubernetesObject read the group have none: not judged, as then)
    let metricRows = null;
    if (k8s.metrics) {
      try {
        k8s.metrics.after = await readMetrics('after');
      } catch (error) {
        // cut by an abort, or not read (not read is not judged good): either way the change is taken back
        return scaleBack(aborts.isAbort(error) ? aborts.reason! : `the metrics the contract names could not be read after the change: ${failureMessage(error)}`, from);
      }
      metricRows = compareMetrics(declared, k8s.metrics.baseline, k8s.metrics.after);
    }
    status.comparison = compareKubernetesPods(status.baseline, status.after, input.replicas, after.group ?? null, metricRows);
    if (status.comparison.verdict === 'regression') return scaleBack(`regression after scale-out: ${status.comparison.reasons.join('; ')}`, from);
    return complete('');
  }

  // scaleIn
  await op.holdTierRules(input.override);
  enter('gates');
  const facts = await cluster.kubernetesGateFacts.executeWithOptions({ summary: summary('gates: read the PodDisruptionBudgets') }, [{ workload: input.workload }]);
  const budget = disruptionBudgetGate({ budgets: facts.budgets, current: from, target: input.replicas });
  status.gates = { passed: budget.passed, rows: [budget] };
  if (!budget.passed) {
    status.evidenceGap = formatEvidenceGap(status.gates);
    return refuse(status.evidenceGap);
  }
  enter('choosing-victims');
  const choice = chooseKubernetesVictims({ pods: live(read.pods), remove: from - input.replicas, kind: read.ref.kind });
  Object.assign(k8s, { victims: choice.victims, reasons: choice.reasons });
  status.scaleIn = { victims: [], reasons: choice.reasons, moves: [], stoppedAbove: null, receipts: [], confirmation: null };
  if (choice.victims.length < from - input.replicas) {
    status.evidenceGap = `${from - input.replicas} pod(s) to remove, ${choice.victims.length} found`;
    return refuse(status.evidenceGap);
  }
  if (aborts.reason) return cancel(aborts.reason);
  /** Before the replicas are lowered: every mark off, the object at its size, `compensated` (a failure to unmark is rethrown as it is). */
  const takeMarksOff = (reason: string) => op.compensate(async () => {
    status.compensation = { reason, replicas: from, outcome: null };
    await unmark(choice.victims);
  }, { compensated: () => [reason, { compensationReplicas: from, kubernetes: k8s }], failed: () => null });

  try {
    await aborts.guard(async () => {
      enter('marking');
      k8s.marked = choice.victims;
      k8s.marked = await cluster.kubernetesMarkVictims.executeWithOptions({ summary: summary(`mark ${choice.victims.join(', ')}`) }, [
        { workload: input.workload, pods: choice.victims, operation: workflowId },
      ]);
      enter('draining');
      const drainTimeoutMs = input.drainTimeoutMs ?? 60_000;
      const drained = await waits.kubernetesAwaitDrained.executeWithOptions({ summary: `await the drain acknowledgements (${formatDuration(drainTimeoutMs)})` }, [
        { workload: input.workload, pods: choice.victims, timeoutMs: drainTimeoutMs },
      ]);
      k8s.acknowledged = drained.acknowledged;
      k8s.missing = drained.missing;
      k8s.awaited = drained.why ?? null;
    });
  } catch (error) {
    const abort = aborts.isAbort(error);
    // The marks were a change: an abort or a failure from here takes them off (compensated), nothing deleted.
    return takeMarksOff(abort ? aborts.reason! : `the drain failed: ${failureMessage(error)}`);
  }
  if (k8s.missing.length && !input.force) {
    // Nothing was deleted: the marks come off, and the object keeps its size.
    return takeMarksOff(`no drain acknowledgement by the deadline from ${k8s.missing.join(', ')}${k8s.awaited ? ` (${k8s.awaited})` : ''}: marks removed, nothing deleted (a request with "force": true lowers the replicas anyway)`);
  }
  if (k8s.missing.length) k8s.forced = k8s.missing;

  let afterPods: KubernetesRead['pods'];
  try {
    afterPods = await aborts.guard(async () => {
      enter('applying');
      await writeScale(input.replicas, from);
      enter('converging');
      return waits.kubernetesAwaitConverged.executeWithOptions({ summary: summary(`converge: ${input.replicas} pod(s), the victims gone`) }, [
        { workload: input.workload, replicas: input.replicas, gone: choice.victims, timeoutMs: input.convergeTimeoutMs },
      ]);
    });
  } catch (error) {
    const abort = aborts.isAbort(error);
    const reason = abort ? aborts.reason! : `scale-in failed after the marks: ${failureMessage(error)}`;
    return aborts.exit(async () => {
      await unmark(choice.victims);
      return scaleBack(reason, from);
    });
  }
  enter('comparing');
  const before = new Set(live(read.pods).map((p) => p.name));
  const remaining = new Set(afterPods.map((p) => p.name));
  k8s.deleted = [...before].filter((name) => !remaining.has(name)).sort();
  status.scaleIn.victims = choice.victims.map((name) => ({ runtimeId: read.pods.find((p) => p.name === name)?.node ?? '', index: 0, taskId: name }));
  status.after = snapshot(afterPods);
  status.comparison = compareKubernetesPods(status.baseline, status.after, input.replicas);
  const others = k8s.deleted.filter((name) => !choice.victims.includes(name));
  if (others.length) {
    status.comparison.verdict = 'regression';
    status.comparison.reasons.push(`the cluster deleted pods that were not victims: ${others.join(', ')}`);
  }
  if (status.comparison.verdict === 'regression') {
    return scaleBack(`regression after scale-in: ${status.comparison.reasons.join('; ')}`, from);
  }
  return complete(k8s.forced.length ? `; forced past ${k8s.forced.length} unacknowledged drain(s): ${k8s.forced.join(', ')}` : '');
}

function isScaleConflict(error: unknown): boolean {
  let current: unknown = error;
  while (current instanceof Error) {
    if (current instanceof ApplicationFailure && current.type === 'scale-conflict') return true;
    current = current.cause;
  }
  return false;
}
