// What every activity module is built over: injected ports (stores, the agent client, a clock), so
// a test can hand in fakes without HTTP or a database, and the few helpers they share.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { KafkaMetadata } from '../lib/kafka';
import type { KubernetesRuntimePort } from '../runtimes/kubernetes';
import type { Workload } from '../protocol';
import type { LedgerStore } from '../store/ledger';
import type { PlanStore } from '../store/plans';
import type { RegistryStore } from '../store/registry';
import type { RuntimeStore } from '../store/runtimes';
import type { SinkAuditStore } from '../store/sink-audit';
import type { TierStore } from '../store/tiers';
import type { StreamJobStore } from '../store/stream-jobs';
import type { AgentClient, AgentTarget } from './agent-client';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ActivityStores {
  runtimes: RuntimeStore;
  registry: RegistryStore;
  ledger: LedgerStore;
  plans: PlanStore;
  /** the consumer audits (exactly-once, partition ownership) */
  sinkAudit: SinkAuditStore;
  /** stream jobs' checkpoints and generations */
  streamJobs: StreamJobStore;
  /** tier policies: their constraints hold at every entry point */
  tiers: TierStore;
}

export interface ActivityDeps {
  stores: ActivityStores;
  agents: AgentClient;
  now: () => number;
  /** the Kafka brokers' metadata (SCALEGATE_KAFKA_BROKERS); absent when the control plane has none */
  kafka?: KafkaMetadata;
  /** the Kubernetes runtime port (SCALEGATE_KUBECONFIG or a service account); absent when the control plane has no cluster access */
  kubernetes?: KubernetesRuntimePort;
}

export interface TaskRef {
  runtimeId: string;
  taskId: string;
}

/**
 * A polling activity's pause: the activity's own sleep, which ends with a CancelledFailure as soon
 * as a cancellation reaches it (through a heartbeat), so a wait the workflow cancelled stops polling
 * and its worker can shut down; a plain timer outside an activity (unit use).
 */
export async function pause(ms: number): Promise<void> {
  let context: Context | null = null;
  try {
    context = Context.current();
  } catch {
    // not in an activity context
  }
  await (context ? context.sleep(ms) : sleep(ms));
}

/** Heartbeats when running inside an activity; a no-op when called directly (unit use). */
export function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // not in an activity context
  }
}

/** Whether the running activity's cancellation has reached it (through a heartbeat); false when called directly (unit use). */
export function cancellationRequested(): boolean {
  try {
    return Context.current().cancellationSignal.aborted;
  } catch {
    return false;
  }
}

/** workflow id / run id / activity id of the running activity: a retried write is one row. */
export function idempotencyKey(): string | null {
  try {
    const info = Context.current().info;
    if (!info.workflowExecution) return null;
    return `${info.workflowExecution.workflowId}/${info.workflowExecution.runId}/${info.activityId}`;
  } catch {
    return null;
  }
}

/** Look-ups that fail non-retryably when what a workflow names does not exist. */
export function lookups(deps: ActivityDeps) {
  const requireWorkload = async (name: string): Promise<Workload> => {
    const workload = await deps.stores.registry.getWorkload(name);
    if (!workload) throw ApplicationFailure.create({ type: 'not-found', message: `no workload ${name}`, nonRetryable: true });
    return workload;
  };
  return {
    /** How to call runtime `runtimeId`'s agent: its endpoint and its runtime's credential (read afresh on every call). */
    async agentOf(runtimeId: string): Promise<AgentTarget> {
      const target = await deps.stores.runtimes.agentTarget(runtimeId);
      if (!target) throw ApplicationFailure.create({ type: 'unknown-runtime', message: `runtime ${runtimeId} is not registered`, nonRetryable: true });
      // A runtime registered before credentials existed gets one when its agent registers again.
      if (target.credential === null) throw new Error(`runtime ${runtimeId} has no credential yet; waiting for its agent to register again`);
      return { endpoint: target.endpoint, credential: target.credential };
    },
    requireWorkload,
    async requireStreamJob(name: string): Promise<Extract<Workload, { kind: 'stream' }>> {
      const workload = await requireWorkload(name);
      if (workload.kind !== 'stream') throw ApplicationFailure.create({ type: 'invalid-input', message: `${name} is a ${workload.kind}, not a stream job`, nonRetryable: true });
      return workload;
    },
  };
}

/** The description of a running workflow `workflowId` (from the activity's own Temporal client), or null when none runs under that id. */
export async function runningWorkflow(workflowId: string): Promise<{ startTime: Date } | null> {
  const description = await Context.current().client.workflow.getHandle(workflowId).describe().catch((error: Error) => {
    if (error.name === 'WorkflowNotFoundError') return null;
    throw error;
  });
  return description?.status.name === 'RUNNING' ? description : null;
}
