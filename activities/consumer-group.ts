// A service's own Kafka consumer group as evidence (domain/consumer-group.ts): read from the broker
// by the activities that await convergence, confirm a drain and capture evidence.
import { groupConvergence, type GroupFacts, type GroupVerdict } from '../domain/consumer-group';
import type { ServiceKafka, Workload } from '../protocol';
import type { ActivityDeps } from './ports';

/** The group a workload declares: a service with spec.kafka; null for anything else. */
export function declaredGroup(workload: Workload): ServiceKafka | null {
  return workload.kind === 'service' ? workload.spec.kafka ?? null : null;
}

export function consumerGroupReads(deps: ActivityDeps) {
  /** The broker's view of the group, or why it could not be read. */
  async function read(declared: ServiceKafka): Promise<GroupFacts | { error: string }> {
    if (!deps.kafka) return { error: 'the control plane has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)' };
    return deps.kafka.consumerGroup(declared.group, declared.topic).catch((error: Error) => ({ error: `broker-unavailable: ${error.message}` }));
  }

  return {
    read,
    /**
     * Whether the workload's group converged on its placement (one member per placed replica, every
     * partition assigned, none of `removedTasks` a member); null when it declares no group.
     */
    async verdict(workload: Workload, removedTasks: readonly string[] = []): Promise<GroupVerdict | null> {
      const declared = declaredGroup(workload);
      if (!declared) return null;
      const [facts, placement] = await Promise.all([read(declared), deps.stores.registry.getPlacement(workload.name)]);
      if ('error' in facts) return { converged: false, detail: `consumer group ${declared.group} on topic ${declared.topic}: ${facts.error}` };
      return groupConvergence(facts, placement?.assignments.length ?? 0, removedTasks);
    },
  };
}
