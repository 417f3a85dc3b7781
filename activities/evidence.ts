// Evidence activities: what the gates judge from, snapshots before and after a change (with the
// consumer sink audit), and the proof after a scale-in that the removed own nothing.
import { ApplicationFailure } from '@temporalio/activity';
import { throughputSamplesOf, type EvidenceSnapshot } from '../domain/evidence';
import { capacityOf, roomOf, type BrokerPartitions, type GateFacts, type RuntimeProbe } from '../domain/gates';
import { eligibleRuntimes } from '../domain/placement';
import { sourceTableOf, sourceTopicOf, THROUGHPUT_INTERVAL_MS, type Workload } from '../protocol';
import { isUndefinedTable } from '../store/db';
import { consumerGroupReads, declaredGroup } from './consumer-group';
import { heartbeat, lookups, type ActivityDeps, type TaskRef } from './ports';

export function evidenceActivities(deps: ActivityDeps) {
  const { runtimes, registry, sinkAudit } = deps.stores;
  const { agents, now } = deps;
  const { agentOf, requireWorkload } = lookups(deps);
  const groups = consumerGroupReads(deps);

  /** The eligible runtimes' room for `workload` now, counted or a row each. */
  async function roomNow(workload: Workload, counted: boolean): Promise<Pick<GateFacts, 'capacity' | 'eligible'>> {
    // The others' replicas counted by the database, and the workload's own: not every placement read.
    const [all, usedByOthers, own] = await Promise.all([runtimes.fleet(), registry.usedSlots({ except: workload.name }), registry.getPlacement(workload.name)]);
    const eligible = roomOf(eligibleRuntimes(all, workload, now()), usedByOthers, own?.assignments ?? []);
    return counted ? { capacity: capacityOf(eligible) } : { eligible };
  }

  return {
    /**
     * What the scale-out gates judge from: probes of the recipients, the broker's partitions, and
     * the room on the eligible runtimes. `capacity`: 'count', the room as its counts; 'known', none
     * (the workflow has its plan's count, so the fleet is not read again); absent (workflow code from
     * before, still running), a row per eligible runtime.
     */
    async gatherGateFacts(input: { workload: string; recipientRuntimeIds: string[]; capacity?: 'count' | 'known' }): Promise<GateFacts> {
      const workload = await requireWorkload(input.workload);
      const room = input.capacity === 'known' ? {} : await roomNow(workload, input.capacity === 'count');
      // Every recipient is probed at once, and the broker read beside them: the gates wait for the
      // slowest fact, not for their sum (issue 23, round trips).
      heartbeat({ probing: input.recipientRuntimeIds });
      const probing = Promise.all(input.recipientRuntimeIds.map(async (runtimeId): Promise<RuntimeProbe> => {
        try {
          return { runtimeId, ...(await agents.probe(await agentOf(runtimeId), workload.kind, workload.spec, workload.requires)) };
        } catch (error) {
          const failed = { ok: false, detail: `probe failed: ${(error as Error).message}` };
          return { runtimeId, source: failed, destination: failed };
        }
      }));
      const topic = workload.kind === 'consumer' || workload.kind === 'stream' ? sourceTopicOf(workload.spec) : declaredGroup(workload)?.topic ?? null;
      const reading: Promise<BrokerPartitions | undefined> = topic === null ? Promise.resolve(undefined)
        : deps.kafka ? deps.kafka.partitionCount(topic).then((partitions) => ({ topic, partitions }), (error: Error) => ({ topic, error: error.message }))
          : Promise.resolve({ topic, error: 'the control plane has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)' });
      const [probes, broker] = await Promise.all([probing, reading]);
      return broker === undefined ? { ...room, probes } : { ...room, probes, broker };
    },

    /** A snapshot of every task of the workload (from its agents) and, for consumers and stream jobs, the sink audit. */
    /**
     * `sinceMs` (the after window's start, by this clock): only latency samples taken since are the
     * window's (each agent reports its samples' ages, so no agent clock is trusted).
     */
    async captureEvidence(input: { workload: string; sinceMs?: number }): Promise<EvidenceSnapshot> {
      const workload = await requireWorkload(input.workload);
      const placement = await registry.getPlacement(input.workload);
      const tasks: EvidenceSnapshot['tasks'] = [];
      let rate = 0;
      const p50s: number[] = [];
      const p95s: number[] = [];
      const latencySamples: number[] = [];
      let sampled = false;
      const throughputPerTask: (readonly [number, number])[][] = [];
      const windowMs = input.sinceMs === undefined ? Infinity : now() - input.sinceMs;
      const lost = await runtimes.lostAmong((placement?.assignments ?? []).map((a) => a.runtimeId));
      for (const a of placement?.assignments ?? []) {
        // An agent that does not answer, or that does not host the task, measured nothing: its zeros are no figures.
        // One on a LOST runtime is not asked: recovery decided it is gone, and a cut-off host answers no call before its timeout.
        let unmeasured: string | undefined = lost.has(a.runtimeId) ? 'not measured: its runtime is LOST' : undefined;
        const status = unmeasured !== undefined ? null : await agents.taskStatus(await agentOf(a.runtimeId), a.taskId).then((answer) => {
          if (answer === null) unmeasured = 'absent from its agent';
          return answer;
        }, (error: Error) => {
          unmeasured = `not measured: its agent did not answer (${error.message})`;
          return null;
        });
        if (status?.throughputSamples) throughputPerTask.push(status.throughputSamples);
        if (status?.latencySamples) {
          sampled = true;
          for (const [ageMs, ms] of status.latencySamples) if (ageMs <= windowMs) latencySamples.push(ms);
        }
        tasks.push({
          ...(unmeasured !== undefined ? { unmeasured } : {}),
          taskId: a.taskId, runtimeId: a.runtimeId, incarnation: status?.incarnation ?? null, state: status?.state ?? 'absent',
          // a stream subtask's work is the records it took in
          processed: status?.counts.processed ?? status?.counts.recordsIn ?? 0, errors: status?.errors ?? 0, recentErrors: status?.recentErrors ?? status?.errors ?? 0, backlog: status?.backlog ?? 0,
          ownedPartitions: status?.partitions?.length ?? 0, inFlight: status?.counts.inFlight ?? 0, ratePerSec: status?.counts.ratePerSec ?? 0,
          ...(status?.counts.cpuPercent !== undefined ? { cpuPercent: status.counts.cpuPercent } : {}),
          ...(status?.counts.rssBytes !== undefined ? { rssBytes: status.counts.rssBytes } : {}),
          ...(status?.counts.restarts !== undefined ? { restarts: status.counts.restarts } : {}),
          ...(status?.crashLooping ? { crashLooping: true } : {}),
        });
        rate += status?.counts.ratePerSec ?? 0;
        if (status?.latencyMs) {
          p50s.push(status.latencyMs.p50);
          p95s.push(status.latencyMs.p95);
        }
      }
      const snapshot: EvidenceSnapshot = {
        atMs: now(), tasks, ready: tasks.filter((t) => t.state === 'ready').length,
        processed: tasks.reduce((n, t) => n + t.processed, 0), ratePerSec: rate,
        latencyP50Ms: p50s.length ? Math.max(...p50s) : null, latencyP95Ms: p95s.length ? Math.max(...p95s) : null,
        backlog: tasks.reduce((n, t) => n + t.backlog, 0), errors: tasks.reduce((n, t) => n + t.errors, 0),
        recentErrors: tasks.reduce((n, t) => n + (t.recentErrors ?? t.errors), 0),
        cpuPercentPerTask: largest(tasks.map((t) => t.cpuPercent)), rssBytesPerTask: largest(tasks.map((t) => t.rssBytes)),
        ...(sampled ? { latencySamplesMs: latencySamples } : {}),
        ...(throughputPerTask.length ? { throughputSamples: throughputSamplesOf(throughputPerTask, windowMs, THROUGHPUT_INTERVAL_MS) } : {}),
      };
      // A table source is audited against its sink here; a Kafka source's records live on the broker, whose lag is its backlog.
      const sourceTable = workload.kind === 'consumer' ? sourceTableOf(workload.spec) : null;
      // A consumer that never ran (its first placement still pending) has no tables yet: nothing to audit.
      const consumerAudit = workload.kind === 'consumer' && sourceTable !== null
        ? await sinkAudit.exactlyOnce({ source: sourceTable, sink: workload.spec.sink, workload: workload.name }).catch((error: unknown) => {
          if (isUndefinedTable(error)) return null;
          throw error;
        })
        : null;
      if (consumerAudit) {
        const { sourceCount, sinkCount, missing, duplicates, extra, orderViolations } = consumerAudit;
        snapshot.sink = { sourceCount, sinkCount, missing, duplicates, extra, orderViolations };
        if (consumerAudit.receipts) {
          snapshot.receipts = { partitions: consumerAudit.receipts, declared: workload.kind === 'consumer' ? workload.spec.partitions ?? null : null, placedTasks: (placement?.assignments ?? []).map((a) => a.taskId) };
        }
      }
      const declared = declaredGroup(workload);
      if (declared) {
        // A user's consumer group: its backlog is the group's lag on the broker, and its membership is evidence.
        const facts = await groups.read(declared);
        if ('error' in facts) {
          snapshot.group = { group: declared.group, topic: declared.topic, error: facts.error };
        } else {
          snapshot.backlog = facts.lag;
          snapshot.group = { group: facts.group, topic: facts.topic, state: facts.state, members: facts.members.length, partitions: facts.partitions, unassigned: facts.unassigned, lag: facts.lag };
        }
      }
      if (workload.kind === 'stream') {
        // Per-key counts: a lost or doubled record shows as the sink's total against the source records the checkpoint covers.
        const audit = await sinkAudit.streamCheckpoint({ job: workload.name, source: sourceTableOf(workload.spec), sink: workload.spec.sink });
        const surplus = audit.sinkTotal - audit.coveredSourceRows;
        snapshot.sink = {
          sourceCount: audit.coveredSourceRows, sinkCount: audit.sinkTotal, missing: Math.max(0, -surplus),
          duplicates: Math.max(0, surplus), extra: audit.rowsAboveCheckpoint, orderViolations: 0,
        };
        snapshot.checkpointAudit = { coveredSourceRows: audit.coveredSourceRows, sinkTotal: audit.sinkTotal, rowsAboveCheckpoint: audit.rowsAboveCheckpoint, checkpoint: audit.checkpoint?.id ?? null };
      }
      return snapshot;
    },

    /**
     * Proof after a scale-in that the removed replicas own nothing: no assignment of the workload on
     * their runtimes (store), none of their tasks on their agents, and (consumers) no partition whose
     * owner is one of them. Fails non-retryably, naming what is still owned.
     */
    async confirmRemoved(input: { workload: string; removed: TaskRef[] }) {
      const workload = await requireWorkload(input.workload);
      const placement = await registry.getPlacement(input.workload);
      const removedRuntimes = new Set(input.removed.map((t) => t.runtimeId));
      const removedTasks = new Set(input.removed.map((t) => t.taskId));
      const problems: string[] = [];
      for (const a of placement?.assignments ?? []) {
        if (removedRuntimes.has(a.runtimeId) || removedTasks.has(a.taskId)) problems.push(`placement still assigns ${a.taskId} to ${a.runtimeId}`);
      }
      for (const runtimeId of removedRuntimes) {
        const runtime = await runtimes.get(runtimeId);
        if (!runtime || runtime.status === 'LOST') continue;
        const tasks = await agents.listTasks(await agentOf(runtime.id));
        for (const t of tasks) if (t.workload === input.workload && t.state !== 'stopped') problems.push(`${runtimeId} still runs ${t.taskId} (${t.state})`);
      }
      const owned = workload.kind === 'consumer' ? await sinkAudit.partitionsOwnedBy(input.workload, [...removedTasks]) : [];
      for (const o of owned) problems.push(`partition ${o.partition} still owned by ${o.ownerTask}`);
      // A user's consumer group: the drained members left it, and the survivors hold every partition.
      const group = await groups.verdict(workload, [...removedTasks]);
      if (group && !group.converged) problems.push(group.detail);
      if (problems.length) {
        throw ApplicationFailure.create({ type: 'still-owned', message: `removed replicas still own work: ${problems.join('; ')}`, nonRetryable: true });
      }
      return { runtimes: [...removedRuntimes], tasks: [...removedTasks], assignmentsLeft: 0, ownedPartitions: owned.length, ...(group ? { group: group.detail } : {}) };
    },
  };
}

/** The largest of the figures some tasks report; null when none does. */
function largest(figures: (number | undefined)[]): number | null {
  const known = figures.filter((figure): figure is number => figure !== undefined);
  return known.length ? Math.max(...known) : null;
}
