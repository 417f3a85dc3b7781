// GET /v1/operations: the runs of scalegate's operations, from Temporal's visibility (the source of
// truth for what started, whether or not its client read the answer), newest first.
import { listedStatusOf, OUTCOME_KEY, START_ID_MEMO, WORKLOAD_KEY, type OperationListQuery } from '../protocol';
import { ApiError } from '../http/errors';
import type { ApiDeps } from './deps';
import { reportUrlOf, uiUrlOf } from './operations';

/** The workflow-id prefixes of the operations on one workload (DESIGN.md §4: one operation per target). */
const WORKLOAD_TARGETS = ['scale', 'replan', 'rescale'];

const targetOf = (workflowId: string): string | null => {
  const [prefix, ...rest] = workflowId.split(':');
  return WORKLOAD_TARGETS.includes(prefix) && rest.length ? rest.join(':') : null;
};

/** A visibility query's string literal (the values are schema-checked names; quotes escaped all the same). */
const literal = (value: string): string => `"${value.replace(/["\\]/g, '\\$&')}"`;

/** The visibility query of a list request: this API's task queue, the workload's targets, the kind. */
export function operationListQuery(taskQueue: string, filter: Pick<OperationListQuery, 'workload' | 'kind'>): string {
  const clauses = [`TaskQueue = ${literal(taskQueue)}`];
  if (filter.workload) {
    const ids = WORKLOAD_TARGETS.map((prefix) => `WorkflowId = ${literal(`${prefix}:${filter.workload}`)}`);
    clauses.push(`(${[...ids, `${WORKLOAD_KEY.name} = ${literal(filter.workload)}`].join(' OR ')})`);
  }
  if (filter.kind) clauses.push(`WorkflowType = ${literal(filter.kind)}`);
  return clauses.join(' AND ');
}

export async function listOperations(deps: ApiDeps, query: OperationListQuery) {
  const client = await deps.temporal.client();
  const runs = [];
  for await (const run of client.workflow.list({ query: operationListQuery(deps.config.SCALEGATE_TASK_QUEUE, query), pageSize: Math.min(query.limit, 100) })) {
    const attributes = run.typedSearchAttributes;
    runs.push({
      workflowId: run.workflowId, runId: run.runId, kind: run.type,
      status: listedStatusOf(run.status.name, attributes.get(OUTCOME_KEY)),
      // an operation tags the workload it is about (a start that refused itself may not have): else its target
      workload: attributes.get(WORKLOAD_KEY) ?? targetOf(run.workflowId),
      startedAt: run.startTime.toISOString(), closedAt: run.closeTime?.toISOString() ?? null,
      reportUrl: reportUrlOf(deps, run.workflowId, { runId: run.runId }),
      uiUrl: uiUrlOf(deps, run.workflowId, run.runId),
    });
    if (runs.length >= query.limit) break;
  }
  return runs.sort((a, b) => b.startedAt.localeCompare(a.startedAt));
}

/** The run an API start made, by the start id its Web UI link carries (memo scalegateStartId); 404 when none of the id's runs is it. */
export async function runOfStart(deps: ApiDeps, workflowId: string, startId: string): Promise<string> {
  // The API starts only `<target>:<DNS label>` ids: any other id has no such run (and is never put in a query).
  if (/^[a-z]+:[a-z0-9-]+$/.test(workflowId)) {
    const client = await deps.temporal.client();
    for await (const run of client.workflow.list({ query: `WorkflowId = ${literal(workflowId)}`, pageSize: 100 })) {
      if (run.memo?.[START_ID_MEMO] === startId) return run.runId;
    }
  }
  throw new ApiError('not-found', `no run of operation ${workflowId} was started as ${startId}`);
}
