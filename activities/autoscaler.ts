// Autoscaler activities: what the autoscale:<tier> workflow needs from outside its sandbox — the
// current size of the tier's workloads, and its cron change windows expanded into intervals (cron
// evaluation needs a calendar library and the time zone database, which a workflow must not load).
import { ApplicationFailure } from '@temporalio/activity';
import { expandChangeWindows } from '../domain/change-windows';
import { lagBehind } from '../domain/consumer-group';
import { kubernetesOf, sourceTopicOf } from '../protocol';
import { declaredGroup } from './consumer-group';
import type { TierRule } from '../domain/tier-rules';
import type { ChangeInterval } from '../domain/autoscale';
import type { ChangeWindowPolicy } from '../protocol/tiers';
import type { ActivityDeps } from './ports';

export interface TierWorkloadSize {
  workload: string;
  /** false: not defined, or retired (the autoscaler leaves it alone and says so) */
  active: boolean;
  /** assignments in its placement now; a stream job: its keyed aggregate's parallelism */
  replicas: number;
  /**
   * A stream job is sized through rescaleOperator on its keyed aggregate (DESIGN.md §4.6), never
   * drained like replicas; its count is bounded by maxParallelism and the source partitions.
   */
  stream?: { operator: string; maxParallelism: number; bound: number; boundBy: string };
}

/** A workload's Kafka lag as the autoscaler pulls it (policy.observe.kafkaLag). */
export interface KafkaLagReading {
  workload: string;
  topic: string;
  lag: number;
  /** what the lag is measured against: "consumer group g", "committed offsets", "checkpoint 12" */
  against: string;
}

export function autoscalerActivities(deps: ActivityDeps) {
  const refuse = (type: string, message: string) => ApplicationFailure.create({ type, message, nonRetryable: true });
  return {
    /**
     * The Kafka lag of a workload: a service's own consumer group's (from the broker), a consumer's
     * (end offsets − its committed offsets in PostgreSQL) or a stream job's (end offsets − its last
     * completed checkpoint's source offsets). Fails non-retryably for a workload that reads no topic.
     */
    async observeKafkaLag(input: { workload: string }): Promise<KafkaLagReading> {
      const workload = await deps.stores.registry.getWorkload(input.workload);
      if (!workload || workload.retired) throw refuse('not-found', `no active workload ${input.workload} to read the Kafka lag of`);
      const kafka = deps.kafka;
      if (!kafka) throw refuse('broker-unavailable', 'the control plane has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)');
      const group = declaredGroup(workload);
      if (group) {
        const view = await kafka.consumerGroup(group.group, group.topic);
        return { workload: workload.name, topic: group.topic, lag: view.lag, against: `consumer group ${group.group}` };
      }
      const topic = workload.kind === 'service' ? null : sourceTopicOf(workload.spec);
      if (topic === null) throw refuse('not-kafka', `${workload.name} reads no Kafka topic (a consumer's or stream job's source, or a service's spec.kafka)`);
      const ends = await kafka.endOffsets(topic);
      if (workload.kind === 'consumer') {
        return { workload: workload.name, topic, lag: lagBehind(ends, await deps.stores.sinkAudit.committedOffsets(workload.name)), against: 'committed offsets' };
      }
      const checkpoint = await deps.stores.streamJobs.lastCompletedCheckpoint(workload.name);
      const offsets = checkpoint ? await deps.stores.streamJobs.sourceOffsetsAt(workload.name, checkpoint.id) : {};
      const processed = new Map(Object.entries(offsets).map(([partition, offset]) => [Number(partition), offset]));
      return { workload: workload.name, topic, lag: lagBehind(ends, processed), against: checkpoint ? `checkpoint ${checkpoint.id}` : 'no checkpoint yet' };
    },


    /** The size of each workload of a tier: the assignments of its placement. */
    async tierSnapshot(input: { workloads: string[] }): Promise<TierWorkloadSize[]> {
      return Promise.all(input.workloads.map(async (workload) => {
        const definition = await deps.stores.registry.getWorkload(workload);
        if (!definition || definition.retired) return { workload, active: false, replicas: 0 };
        if (definition.kind === 'stream') {
          const aggregate = definition.spec.operators.find((o) => o.kind === 'keyed-aggregate');
          if (aggregate) {
            const { maxParallelism, partitions } = definition.spec;
            const bound = Math.min(maxParallelism, partitions);
            return {
              workload, active: true, replicas: aggregate.parallelism,
              stream: { operator: aggregate.id, maxParallelism, bound, boundBy: bound === partitions ? `its ${partitions} source partitions` : `its maxParallelism ${maxParallelism}` },
            };
          }
        }
        // A Kubernetes workload has no placement: its object's replicas (the desired state where the
        // control plane cannot read the cluster; the operation it starts reads the object again).
        const ref = kubernetesOf(definition);
        if (ref) return { workload, active: true, replicas: deps.kubernetes ? (await deps.kubernetes.readObject(ref)).replicas : Number(definition.replicas) };
        const placement = await deps.stores.registry.getPlacement(workload);
        return { workload, active: true, replicas: placement?.assignments.length ?? 0 };
      }));
    },
    /** The constraints of every tier that holds `workload`, as of now: min replicas and the scale-in windows open now. */
    async tierRules(input: { workload: string }): Promise<TierRule[]> {
      const nowMs = deps.now();
      return (await deps.stores.tiers.policiesOfWorkload(input.workload)).map(({ tier, policy }) => ({
        tier,
        minReplicas: policy.minReplicas,
        openScaleInWindows: expandChangeWindows(policy.changeWindows.filter((w) => w.forbid === 'scale-in'), nowMs, nowMs)
          .filter((i) => i.startMs <= nowMs && nowMs < i.endMs)
          .map((i) => ({ label: i.label, endMs: i.endMs })),
      }));
    },
    /** The change windows' intervals overlapping [fromMs, toMs] (workflow time), for the pure decision. */
    async changeWindowIntervals(input: { windows: ChangeWindowPolicy[]; fromMs: number; toMs: number }): Promise<ChangeInterval[]> {
      return expandChangeWindows(input.windows, input.fromMs, input.toMs);
    },
  };
}
