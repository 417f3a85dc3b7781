import { z } from 'zod';

export const WorkerConfigSchema = z.object({
  DATABASE_URL: z.string().min(1),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  SCALEGATE_TASK_QUEUE: z.string().default('scalegate'),
  /** a prebuilt workflow bundle (tests build one per run); unset: bundle workflows/ at start */
  SCALEGATE_WORKFLOW_BUNDLE: z.string().optional(),
  /** how often the reconcile loop runs a pass (it skips itself when nothing moved) */
  SCALEGATE_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(100).default(15_000),
  /** JSON log lines at this level and above (the SDK's, the workflows' and the activities' too) */
  SCALEGATE_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** Kafka brokers ("host:port,..."): the gates read a Kafka source's partition count from them */
  SCALEGATE_KAFKA_BROKERS: z.string().max(4096).optional(),
  /** a kubeconfig whose contexts are the clusters Kubernetes workloads name (runtime.kubernetes.cluster); unset: the pod's service account, if any */
  SCALEGATE_KUBECONFIG: z.string().min(1).max(4096).optional(),
});
export type WorkerConfig = z.infer<typeof WorkerConfigSchema>;

export function parseWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const parsed = WorkerConfigSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid worker configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
