import type { Pool } from 'pg';
import type { Planner } from '../store/planner';
import type { LedgerStore } from '../store/ledger';
import type { OperationStartStore } from '../store/operation-starts';
import type { PlanStore } from '../store/plans';
import type { RegistryStore } from '../store/registry';
import type { RuntimeStore } from '../store/runtimes';
import type { StreamJobStore } from '../store/stream-jobs';
import type { KafkaMetadata } from '../lib/kafka';
import type { ApiConfig } from './config';
import type { Metrics } from './metrics';
import type { TemporalGateway } from './temporal';

/** Everything a route may use; built once in api/main.ts and handed to the route modules. */
export interface ApiDeps {
  config: ApiConfig;
  db: Pool;
  runtimes: RuntimeStore;
  registry: RegistryStore;
  ledger: LedgerStore;
  plans: PlanStore;
  /** what each Idempotency-Key started */
  operationStarts: OperationStartStore;
  /** stream jobs' checkpoints and generations (GET /v1/jobs/:job) */
  streamJobs: StreamJobStore;
  /** the one planning path (the same the workflows plan through) */
  planner: Planner;
  temporal: TemporalGateway;
  metrics: Metrics;
  /** the Kafka brokers' metadata (SCALEGATE_KAFKA_BROKERS); absent when the control plane has none */
  kafka?: KafkaMetadata;
}
