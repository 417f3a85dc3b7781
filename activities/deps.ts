// The real ports: the PostgreSQL stores on one pool and the HTTP agent client. The worker builds
// its activities from these; tests and benches that want the real thing do too.
import type { Pool } from 'pg';
import { createLedgerStore } from '../store/ledger';
import { createPlanStore } from '../store/plans';
import { createRegistryStore } from '../store/registry';
import { createRuntimeStore } from '../store/runtimes';
import { createTierStore } from '../store/tiers';
import { createSinkAuditStore } from '../store/sink-audit';
import { createStreamJobStore } from '../store/stream-jobs';
import { kafkaMetadata } from '../lib/kafka';
import { kubernetesClients } from '../lib/kubernetes';
import { kubernetesRuntime } from '../runtimes/kubernetes';
import { createAgentClient } from './agent-client';
import { createActivities } from './index';
import type { ActivityDeps } from './ports';

/** The control plane calls each agent with that runtime's own credential (DESIGN.md §3), never a shared token. */
export interface ActivityDepsOptions {
  db: Pool;
  now?: () => number;
  /** SCALEGATE_KAFKA_BROKERS: Kafka metadata for the gates of workloads that read a topic */
  kafkaBrokers?: string;
  /** SCALEGATE_KUBECONFIG: the clusters Kubernetes workloads name (else the pod's service account, where there is one) */
  kubeconfig?: string;
}

export function createActivityDeps(options: ActivityDepsOptions): ActivityDeps {
  const { db } = options;
  return {
    stores: {
      runtimes: createRuntimeStore(db),
      registry: createRegistryStore(db),
      ledger: createLedgerStore(db),
      plans: createPlanStore(db),
      sinkAudit: createSinkAuditStore(db),
      tiers: createTierStore(db),
      streamJobs: createStreamJobStore(db),
    },
    agents: createAgentClient(),
    now: options.now ?? Date.now,
    ...(options.kafkaBrokers ? { kafka: kafkaMetadata(options.kafkaBrokers) } : {}),
    ...(options.kubeconfig || process.env.KUBERNETES_SERVICE_HOST ? { kubernetes: kubernetesRuntime(kubernetesClients(options.kubeconfig)) } : {}),
  };
}

/** The activities over the real stores and agent client. */
export function createPostgresActivities(options: ActivityDepsOptions) {
  return createActivities(createActivityDeps(options));
}
