// The stream driver (DESIGN.md §5 "stream"): hosts a job's subtasks on this agent. Each subtask is
// a StreamSubtask (subtask.ts); they share one small connection pool for snapshots and triggers.
import type { Pool } from 'pg';
import { createPool } from '../../../lib/pg';
import { describeIssues, StreamSpecSchema, type StreamSpec } from '../../../protocol';
import { subtaskAt, subtaskIndices } from '../../../domain/stream';
import { DriverError, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart } from '../driver';
import { openSource, probeSourceAndSink } from '../sources';
import { AggregateSubtask, SinkSubtask } from './aligned-subtask';
import { SourceSubtask } from './source-subtask';
import { DEFAULT_STREAM_TUNING, type StreamSubtask, type StreamTuning, type SubtaskDeps } from './subtask';

const POOL_SIZE = 8;
/** The stream driver's connections in pg_stat_activity: `scalegate-stream:<runtime id>`. */
export const STREAM_APPLICATION_NAME = 'scalegate-stream';

function parseStart(start: TaskStart): StreamSpec {
  const parsed = StreamSpecSchema.safeParse(start.spec);
  if (!parsed.success) throw new DriverError('invalid-spec', `stream spec: ${describeIssues(parsed.error)}`);
  if (!subtaskIndices(parsed.data).includes(start.index)) {
    throw new DriverError('invalid-spec', `subtask ${start.index} is not one of the job's subtasks (${subtaskIndices(parsed.data).join(', ')})`);
  }
  return parsed.data;
}

export function createStreamDriver(ctx: DriverContext, tuning: Partial<StreamTuning> = {}): TaskDriver {
  const subtasks = new Set<StreamSubtask>();
  let pool: Pool | null = null;
  const sharedPool = (): Pool => {
    if (!ctx.databaseUrl) throw new DriverError('placement-unavailable', `runtime ${ctx.runtimeId} has no database URL; the stream driver needs PostgreSQL`);
    pool ??= createPool(ctx.databaseUrl, { max: POOL_SIZE, connectTimeoutMs: 5_000, idleInTransactionTimeoutMs: 30_000, applicationName: `${STREAM_APPLICATION_NAME}:${ctx.runtimeId}` });
    return pool;
  };

  return {
    kind: 'stream',

    async start(start: TaskStart): Promise<TaskHandle> {
      const spec = parseStart(start);
      const deps: SubtaskDeps = {
        ctx, pool: sharedPool(), tuning: { ...DEFAULT_STREAM_TUNING, ...tuning },
        openSource: (onError) => openSource(spec, { ctx, pool: sharedPool(), owner: `${start.workload}-${start.taskId}`, who: `stream subtask ${start.taskId}`, onError }),
      };
      const Kind = { source: SourceSubtask, 'keyed-aggregate': AggregateSubtask, sink: SinkSubtask }[subtaskAt(spec, start.index).kind];
      const subtask = new Kind(deps, start, spec);
      subtask.begin();
      subtasks.add(subtask);
      ctx.log('stream.started', { taskId: subtask.taskId, incarnation: subtask.incarnation, index: start.index, generation: start.generation });
      return subtask;
    },

    async probe(spec: unknown) {
      const parsed = StreamSpecSchema.safeParse(spec);
      return probeSourceAndSink(ctx, parsed.success ? parsed.data : { invalid: `invalid stream spec: ${describeIssues(parsed.error)}` });
    },

    async close(): Promise<void> {
      await Promise.all([...subtasks].map((s) => s.drain().catch(() => null)));
      subtasks.clear();
      const closing = pool;
      pool = null;
      await closing?.end().catch(() => {});
    },
  };
}
