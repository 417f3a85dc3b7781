// HTTP client for the runtime agents' task API (docs/agent-protocol.md). Requests and answers are
// the protocol's schemas; an agent's error code is non-retryable exactly when the protocol says so.
import { ApplicationFailure } from '@temporalio/activity';
import type { z } from 'zod';
import {
  isRetryable,
  ProbeAnswerSchema,
  StopAnswerSchema,
  TaskListSchema,
  TaskStatusSchema,
  type DrainOptions,
  type ProbeAnswer,
  type StopAnswer,
  type TaskStartBody,
  type TaskStatus,
  type WorkloadKind,
} from '../protocol';

export function createAgentClient(token: string, timeoutMs = 30_000) {
  async function call<T>(endpoint: string, method: string, path: string, answer: z.ZodType<T>, body?: unknown): Promise<T | null> {
    let response: Response;
    try {
      response = await fetch(`${endpoint}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new Error(`agent ${endpoint} unreachable: ${(error as Error).message}`); // retryable
    }
    const parsed = (await response.json().catch(() => ({}))) as { error?: string; message?: string };
    if (response.status === 404 && parsed.error === 'not-found') return null;
    if (response.status >= 400) {
      const code = parsed.error ?? `http-${response.status}`;
      const message = `agent ${endpoint} ${method} ${path}: ${code}: ${parsed.message ?? ''}`;
      if (!isRetryable(code)) throw ApplicationFailure.create({ type: code, message, nonRetryable: true });
      throw new Error(message);
    }
    const checked = answer.safeParse(parsed);
    if (!checked.success) throw new Error(`agent ${endpoint} ${method} ${path}: answer does not match the protocol: ${checked.error.message}`);
    return checked.data;
  }
  const task = (taskId: string) => `/v1/tasks/${encodeURIComponent(taskId)}`;
  const required = <T>(value: T | null, what: string): T => {
    if (value === null) throw new Error(`agent answered 404 for ${what}`);
    return value;
  };

  return {
    startTask: async (endpoint: string, taskId: string, start: TaskStartBody): Promise<TaskStatus> =>
      required(await call(endpoint, 'PUT', task(taskId), TaskStatusSchema, start), `start ${taskId}`),
    stopTask: async (endpoint: string, taskId: string, options: DrainOptions = {}): Promise<StopAnswer> => {
      const query = new URLSearchParams();
      if (options.graceMs !== undefined) query.set('graceMs', String(options.graceMs));
      if (options.drainTimeoutMs !== undefined) query.set('drainTimeoutMs', String(options.drainTimeoutMs));
      if (options.placementFence !== undefined) query.set('placementFence', String(options.placementFence));
      return required(await call(endpoint, 'DELETE', `${task(taskId)}?${query}`, StopAnswerSchema), `stop ${taskId}`);
    },
    /** null when the agent does not host the task */
    taskStatus: (endpoint: string, taskId: string): Promise<TaskStatus | null> => call(endpoint, 'GET', task(taskId), TaskStatusSchema),
    listTasks: async (endpoint: string): Promise<TaskStatus[]> => required(await call(endpoint, 'GET', '/v1/tasks', TaskListSchema), 'task list').tasks,
    probe: async (endpoint: string, kind: WorkloadKind, spec: unknown): Promise<ProbeAnswer> =>
      required(await call(endpoint, 'POST', '/v1/probe', ProbeAnswerSchema, { kind, spec }), 'probe'),
  };
}
export type AgentClient = ReturnType<typeof createAgentClient>;
