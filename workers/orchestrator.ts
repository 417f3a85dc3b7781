// Builds the orchestrator worker (task queue "scalegate"), registers scalegate's search attributes
// on whatever Temporal server it is pointed at, and routes the SDK's logs into scoped, redacted
// JSON lines. Shared by the entry point and the tests.
import type { OperatorService } from '@temporalio/client';
import { SEARCH_ATTRIBUTE_KEYS } from '../protocol/search-attributes';
import { DefaultLogger, NativeConnection, Runtime, Worker, WorkerOptions, type LogLevel as SdkLogLevel } from '@temporalio/worker';
import type { Pool } from 'pg';
import { createPostgresActivities } from '../activities/deps';
import { WORKFLOWS_PATH } from './workflow-bundle';
import { createLogger, workloadOfWorkflowId, type Logger, type LogLevel, type Redactor } from '../lib/log';
import { setTimeout as sleep } from 'node:timers/promises';

export async function createOrchestratorWorker(options: {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Pool;
  /** SCALEGATE_KAFKA_BROKERS, for the gates of workloads that read a Kafka topic */
  kafkaBrokers?: string;
  /** SCALEGATE_KUBECONFIG, for Kubernetes workloads */
  kubeconfig?: string;
  /** a prebuilt bundle (tests build it once per run); otherwise the workflows are bundled here */
  workflowBundle?: WorkerOptions['workflowBundle'];
}): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createPostgresActivities({ db: options.db, kafkaBrokers: options.kafkaBrokers, kubeconfig: options.kubeconfig }),
  });
}

// ---------------------------------------------------------------------------------------------
// Search attributes

/** The proto's IndexedValueType numbers (temporal.api.enums.v1), by the SDK's type names. */
const INDEXED_VALUE_TYPE: Record<string, number> = { TEXT: 1, KEYWORD: 2, INT: 3, DOUBLE: 4, BOOL: 5, DATETIME: 6, KEYWORD_LIST: 7 };
const TYPE_NAME: Record<number, string> = Object.fromEntries(Object.entries(INDEXED_VALUE_TYPE).map(([name, n]) => [n, name]));
/** gRPC status codes the registration tells apart */
const GRPC = { ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, UNIMPLEMENTED: 12, UNAUTHENTICATED: 16 } as const;

/** Raised when the search attributes cannot be registered; its message says what to do. */
export class SearchAttributeSetupError extends Error {
  readonly missing: readonly string[];
  constructor(message: string, missing: readonly string[]) {
    super(message);
    this.name = 'SearchAttributeSetupError';
    this.missing = missing;
  }
}

/** The command an administrator can run instead, for the names still missing. */
export function searchAttributeCommand(namespace: string, names: readonly string[] = SEARCH_ATTRIBUTE_KEYS.map((k) => k.name)): string {
  const byName = Object.fromEntries(SEARCH_ATTRIBUTE_KEYS.map((k) => [k.name, k.type]));
  const flags = names.map((name) => `--name ${name} --type ${titleCase(byName[name] ?? 'KEYWORD')}`).join(' ');
  return `temporal operator search-attribute create --namespace ${namespace} ${flags}`;
}
/** KEYWORD → Keyword, KEYWORD_LIST → KeywordList (the CLI's spelling) */
const titleCase = (type: string) => type.toLowerCase().split('_').map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join('');

type SearchAttributeOperator = Pick<OperatorService, 'listSearchAttributes' | 'addSearchAttributes'>;

/**
 * Makes sure ScalegateWorkload, ScalegateOperation and ScalegatePhase exist in `namespace` with
 * their types, on any server: the ones already there (from an earlier start, another worker, the
 * dev server's flags, an administrator) are left alone; the missing ones are added, and the call
 * then waits until the server lists them (some visibility stores add them asynchronously).
 * Throws SearchAttributeSetupError when one exists with another type, or when this identity may
 * not add them (its message gives the command an administrator can run).
 */
export async function ensureSearchAttributes(
  operator: SearchAttributeOperator,
  namespace: string,
  options: { timeoutMs?: number; log?: Logger } = {},
): Promise<{ added: string[] }> {
  const wanted = SEARCH_ATTRIBUTE_KEYS.map((key) => ({ name: key.name, type: key.type as string, code: INDEXED_VALUE_TYPE[key.type] }));
  const listed = async () => {
    try {
      return (await operator.listSearchAttributes({ namespace })).customAttributes ?? {};
    } catch (error) {
      throw describeRegistrationFailure(error, namespace, wanted.map((w) => w.name), 'list');
    }
  };
  const existing = await listed();
  const wrongType = wanted.filter((w) => existing[w.name] !== undefined && Number(existing[w.name]) !== w.code);
  if (wrongType.length) {
    throw new SearchAttributeSetupError(
      `search attribute(s) ${wrongType.map((w) => `${w.name} exists as ${TYPE_NAME[Number(existing[w.name])] ?? existing[w.name]}, scalegate needs ${w.type}`).join('; ')} in namespace ${namespace}; remove or rename it, then start the worker again`,
      wrongType.map((w) => w.name),
    );
  }
  const missing = wanted.filter((w) => existing[w.name] === undefined);
  if (missing.length === 0) return { added: [] };

  try {
    await operator.addSearchAttributes({ namespace, searchAttributes: Object.fromEntries(missing.map((w) => [w.name, w.code])) });
  } catch (error) {
    // Another worker (or an administrator) added them first: fine, the wait below confirms it.
    if ((error as { code?: number }).code !== GRPC.ALREADY_EXISTS) {
      throw describeRegistrationFailure(error, namespace, missing.map((w) => w.name), 'add');
    }
  }
  options.log?.info('search attributes registered', { namespace, added: missing.map((w) => w.name) });

  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    const now = await listed();
    const still = missing.filter((w) => now[w.name] === undefined);
    if (still.length === 0) return { added: missing.map((w) => w.name) };
    if (Date.now() > deadline) {
      throw new SearchAttributeSetupError(
        `search attribute(s) ${still.map((w) => w.name).join(', ')} were added to namespace ${namespace} but are still not listed; check the server's visibility store`,
        still.map((w) => w.name),
      );
    }
    await sleep(500);
  }
}

function describeRegistrationFailure(error: unknown, namespace: string, names: string[], what: 'list' | 'add'): Error {
  const code = (error as { code?: number }).code;
  const detail = (error as { details?: string }).details ?? (error instanceof Error ? error.message : String(error));
  if (code === GRPC.PERMISSION_DENIED || code === GRPC.UNAUTHENTICATED || code === GRPC.UNIMPLEMENTED) {
    return new SearchAttributeSetupError(
      `cannot ${what} search attributes in namespace ${namespace} (${detail}): this identity lacks the permission` +
        ` (or the server does not offer the operator API, e.g. Temporal Cloud). Ask an administrator to run:\n  ` +
        `${searchAttributeCommand(namespace, names)}\n(or create them in the Cloud UI), then start the worker again`,
      names,
    );
  }
  return new SearchAttributeSetupError(`cannot ${what} search attributes in namespace ${namespace}: ${detail}`, names);
}

// ---------------------------------------------------------------------------------------------
// Logs

const SDK_LEVEL: Record<LogLevel | 'silent', SdkLogLevel> = { debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR', silent: 'ERROR' };
const OUR_LEVEL: Record<string, LogLevel> = { TRACE: 'debug', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };

/**
 * Routes every log line of the Temporal SDK in this process (worker, workflows' `log`, activities'
 * `log`, and the native core) into JSON lines scoped by workload and workflow, through `redact`.
 * Call once, before the first connection.
 */
export function installWorkerLogging(level: LogLevel | 'silent', redact: Redactor): Logger {
  const log = createLogger({ level, redact, scope: { process: 'worker' } });
  const sdkLogger = new DefaultLogger(SDK_LEVEL[level], (entry) => {
    if (level === 'silent') return;
    // taskToken: a capability to complete the activity, and noise: never printed
    const { workflowId, runId, workflowRunId: _run, workflowType, activityType, activityId, taskQueue, namespace, sdkComponent, taskToken: _token, ...rest } =
      (entry.meta ?? {}) as Record<string, unknown>;
    const workflow = typeof workflowId === 'string' ? workflowId : undefined;
    const fields: Record<string, unknown> = {
      ...(workloadOfWorkflowId(workflow) ? { workload: workloadOfWorkflowId(workflow) } : {}),
      ...(workflow ? { workflow, runId } : {}),
      ...(workflowType ? { workflowType } : {}),
      ...(activityType ? { activity: activityType, activityId } : {}),
      ...(sdkComponent ? { component: sdkComponent } : {}),
      ...(taskQueue ? { taskQueue } : {}),
      ...(namespace ? { namespace } : {}),
      ...rest,
    };
    log[OUR_LEVEL[entry.level] ?? 'info'](entry.message, fields);
  });
  Runtime.install({ logger: sdkLogger, telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' }, forward: {} } } });
  return log;
}
