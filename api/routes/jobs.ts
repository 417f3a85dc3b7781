// Stream job routes (DESIGN.md §6): GET /v1/jobs/:job, what a job runs right now. Operators from the
// workload's spec; subtasks from its placement joined with the task reports of the runtimes'
// heartbeats; checkpoints from the stream tables; the running operation from Temporal.
import { WorkflowNotFoundError } from '@temporalio/client';
import { subtaskAt } from '../../domain/stream';
import { PHASE_KEY, StartedOperationSchema, type Assignment, type StreamSpec, type TaskReport } from '../../protocol';
import { JobParamsSchema, OperatorParamsSchema, RescaleRequestSchema, STREAM_COUNTERS, StreamJobListSchema, StreamJobViewSchema, type StreamJobView } from '../../protocol/stream';
import { replicaCounts } from '../../domain/replicas';
import { rescaleOperator } from '../../workflows/rescale-operator';
import { requireActiveWorkload, startOperation } from '../operations';
import type { ApiDeps } from '../deps';
import { ApiError } from '../../http/errors';
import { defineRoute, ok } from '../../http/route';

/** The operations on a job, in the order one is shown when several run (scale:<job> is a retire or an applied plan; a stream scale runs as replan:<job>). */
export const jobOperationIds = (job: string) => [`rescale:${job}`, `replan:${job}`, `scale:${job}`];

/** How long the view waits on Temporal before it answers "running operation unknown" (null). */
const TEMPORAL_WAIT_MS = 2_000;

type RunningOperation = StreamJobView['runningOperation'];

/** The first running operation on the job; null when none runs or Temporal does not answer in time. */
/**
 * The operation running on the job. For the view (GET) an unreachable Temporal answers null after
 * TEMPORAL_WAIT_MS; for admission (`failClosed`) it is a 503: a rescale is never admitted on a
 * guess that nothing else runs on the job.
 */
async function runningOperationOf(deps: ApiDeps, job: string, options: { failClosed?: boolean } = {}): Promise<RunningOperation> {
  const lookUp = async (): Promise<RunningOperation> => {
    const client = await deps.temporal.client();
    const described = await Promise.all(jobOperationIds(job).map((workflowId) =>
      client.workflow.getHandle(workflowId).describe().catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) return null;
        throw error;
      }),
    ));
    const running = described.find((d) => d?.status.name === 'RUNNING');
    return running ? { workflowId: running.workflowId, kind: running.type, phase: running.typedSearchAttributes.get(PHASE_KEY) ?? null } : null;
  };
  let timer: NodeJS.Timeout | undefined;
  const unknown = () => new ApiError('unavailable', `Temporal did not say within ${TEMPORAL_WAIT_MS} ms whether an operation runs on ${job}; nothing was started, try again`);
  const giveUp = new Promise<null>((resolve, reject) => {
    timer = setTimeout(() => (options.failClosed ? reject(unknown()) : resolve(null)), TEMPORAL_WAIT_MS);
  });
  try {
    return await Promise.race([lookUp().catch(() => {
      if (options.failClosed) throw unknown();
      return null;
    }), giveUp]);
  } finally {
    clearTimeout(timer);
  }
}

const counter = (report: TaskReport | undefined, name: keyof typeof STREAM_COUNTERS): number | null => report?.counts[STREAM_COUNTERS[name]] ?? null;

/** One subtask row: its identity from the spec, its figures from its latest task report. */
function subtaskView(spec: StreamSpec, assignment: Assignment, report: TaskReport | undefined, reportedAt: string | null): StreamJobView['subtasks'][number] {
  let operator = '?';
  let index = -1; // placed under a spec the job no longer has (a replan not yet applied)
  try {
    const identity = subtaskAt(spec, assignment.index);
    operator = identity.operator;
    index = identity.operatorIndex;
  } catch {
    // keep the placeholders
  }
  return {
    operator, index, subtask: assignment.index, runtimeId: assignment.runtimeId, taskId: assignment.taskId,
    incarnation: report?.incarnation ?? null, state: report?.state ?? null,
    recordsIn: counter(report, 'recordsIn'), recordsOut: counter(report, 'recordsOut'), recordsRead: counter(report, 'recordsRead'),
    lastCheckpoint: counter(report, 'lastCheckpoint'), backlog: report?.backlog ?? null, latencyMs: report?.latencyMs ?? null,
    reportedAt: report ? reportedAt : null,
  };
}

export async function streamJobView(deps: ApiDeps, job: string): Promise<StreamJobView> {
  const workload = await deps.registry.getWorkload(job);
  if (!workload) throw new ApiError('not-found', `no workload ${job}`);
  if (workload.kind !== 'stream') throw new ApiError('unsupported-kind', `${job} is a ${workload.kind} workload, not a stream job`, { kind: workload.kind });
  const [placement, runtimes, lastCompletedCheckpoint, checkpointInFlight, runningOperation] = await Promise.all([
    deps.registry.getPlacement(job),
    deps.runtimes.list(),
    deps.streamJobs.lastCompletedCheckpoint(job),
    deps.streamJobs.checkpointInFlight(job),
    runningOperationOf(deps, job),
  ]);
  const reportOf = new Map(runtimes.flatMap((r) => r.tasks.map((t) => [`${r.id}/${t.taskId}`, t] as const)));
  // The counters are the agents' heartbeat reports: as old as each runtime's last heartbeat.
  const heartbeatOf = new Map(runtimes.map((r) => [r.id, r.lastHeartbeatAt]));
  const assignments = [...(placement?.assignments ?? [])].sort((a, b) => a.index - b.index);
  return {
    job,
    generation: placement?.generation ?? null,
    operators: workload.spec.operators.map(({ id, kind, parallelism }) => ({ id, kind, parallelism })),
    subtasks: assignments.map((a) => subtaskView(workload.spec, a, reportOf.get(`${a.runtimeId}/${a.taskId}`), heartbeatOf.get(a.runtimeId) ?? null)),
    lastCompletedCheckpoint,
    checkpointInFlight,
    runningOperation,
  };
}

export function jobRoutes(deps: ApiDeps) {
  return [
    defineRoute({
      method: 'GET', path: '/v1/jobs', access: 'viewer', summary: 'every stream job (not retired), by name: operators, generation, subtasks desired, placed and ready', operationId: 'listJobs',
      response: { schema: StreamJobListSchema, status: { 200: 'the stream jobs (none: an empty list)' } },
      handler: async (_ctx) => {
        const [workloads, placements, runtimes] = await Promise.all([deps.registry.listWorkloads(), deps.registry.listPlacements(), deps.runtimes.list()]);
        const jobs = workloads.filter((w) => w.kind === 'stream' && !w.retired).sort((a, b) => a.name.localeCompare(b.name));
        const counts = replicaCounts(jobs, placements, runtimes, Date.now());
        const generationOf = new Map(placements.map((p) => [p.workload, p.generation]));
        return ok({
          jobs: jobs.map((w) => ({
            job: w.name, generation: generationOf.get(w.name) ?? null,
            operators: w.kind === 'stream' ? w.spec.operators.map(({ id, kind, parallelism }) => ({ id, kind, parallelism })) : [],
            ...counts[w.name],
          })),
        });
      },
    }),
    defineRoute({
      method: 'GET', path: '/v1/jobs/:job', access: 'viewer',
      summary: 'a stream job: operators, subtasks with their counters, last completed checkpoint, running operation', operationId: 'getJob',
      params: JobParamsSchema, response: { schema: StreamJobViewSchema, status: { 200: 'the job as it runs' } }, errors: [404, 422],
      handler: async ({ params }) => ok(await streamJobView(deps, params.job)),
    }),
    defineRoute({
      method: 'POST', path: '/v1/jobs/:job/operators/:op/rescale', access: 'operator', startsOperation: true,
      summary: 'rescale one operator: hot at a checkpoint barrier when eligible (integer factor, keyed aggregate), else the stop-the-world replan; rescale:<job>, 409 while an operation on the job runs',
      operationId: 'rescaleOperator', params: OperatorParamsSchema, body: RescaleRequestSchema,
      response: { schema: StartedOperationSchema, status: { 202: 'rescaleOperator started under rescale:<job>' } }, errors: [404, 409, 422, 503],
      handler: async ({ params, body , request }) => {
        const workload = await requireActiveWorkload(deps, params.job);
        if (workload.kind !== 'stream') throw new ApiError('unsupported-kind', `${params.job} is a ${workload.kind}, not a stream job: scale it with POST /v1/workloads/${params.job}/scale`);
        const operator = workload.spec.operators.find((o) => o.id === params.op);
        if (!operator) throw new ApiError('not-found', `job ${params.job} has no operator ${params.op} (operators: ${workload.spec.operators.map((o) => o.id).join(', ')})`);
        if (body.parallelism > workload.spec.maxParallelism) {
          throw new ApiError('validation-failed', `parallelism ${body.parallelism} is above the job's maxParallelism ${workload.spec.maxParallelism}`, { issues: [{ path: 'body.parallelism', message: 'above maxParallelism' }] });
        }
        if (body.parallelism === operator.parallelism) throw new ApiError('conflict', `${params.op} already runs ${operator.parallelism} subtasks`, { current: operator.parallelism });
        // One operation per job: a replan or a scale running on it refuses the rescale too.
        const running = await runningOperationOf(deps, params.job, { failClosed: true });
        if (running) throw new ApiError('operation-in-progress', `${running.workflowId} is running on ${params.job}`, { workflowId: running.workflowId });
        const started = await startOperation(deps, { request, body,
          workflow: rescaleOperator, workflowId: `rescale:${params.job}`,
          input: { job: params.job, operator: params.op, parallelism: body.parallelism, reason: body.reason ?? 'requested via API' },
          summary: `rescale ${params.job}/${params.op} ${operator.parallelism} → ${body.parallelism}`,
        });
        return ok(started, 202);
      },
    }),
  ];
}
