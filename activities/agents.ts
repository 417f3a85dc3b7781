// HTTP client for the runtime agents' task API (docs/agent-protocol.md), with the agent token.
import { ApplicationFailure } from '@temporalio/activity';
import type { TaskStart } from '../agent/drivers/driver';
import type { WorkloadKind } from '../domain/schemas';

/** The body of PUT /v1/tasks/:taskId: the agent's TaskStart without the id (it is in the path). */
export type AgentTaskStart = Omit<TaskStart, 'taskId'>;

export interface AgentTaskStatus {
  taskId: string;
  workload: string;
  incarnation: string;
  state: 'starting' | 'ready' | 'draining' | 'stopped' | 'failed';
  ports?: { public: number; internal: number };
  partitions?: number[];
  counts: Record<string, number>;
  latencyMs?: { p50: number; p95: number };
  backlog?: number;
  errors: number;
  detail?: string;
}

/** Agent answers that retrying cannot fix become non-retryable failures with the agent's code. */
const NON_RETRYABLE = new Set(['placement-unavailable', 'invalid-spec', 'stale-generation', 'unsupported-kind', 'validation-failed', 'drain-deadline']);

export function createAgentClient(token: string, timeoutMs = 30_000) {
  async function call<T>(endpoint: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
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
    const parsed = (await response.json().catch(() => ({}))) as T & { error?: string; message?: string };
    if (response.status >= 400 && response.status !== 404) {
      const code = parsed.error ?? `http-${response.status}`;
      const message = `agent ${endpoint} ${method} ${path}: ${code}: ${parsed.message ?? ''}`;
      if (NON_RETRYABLE.has(code)) throw ApplicationFailure.create({ type: code, message, nonRetryable: true });
      throw new Error(message);
    }
    return { status: response.status, body: parsed };
  }

  return {
    startTask: (endpoint: string, taskId: string, start: AgentTaskStart) =>
      call<AgentTaskStatus>(endpoint, 'PUT', `/v1/tasks/${encodeURIComponent(taskId)}`, start).then((r) => r.body),
    stopTask: async (endpoint: string, taskId: string, options: { graceMs?: number; deadlineMs?: number } = {}) => {
      const query = new URLSearchParams();
      if (options.graceMs !== undefined) query.set('graceMs', String(options.graceMs));
      if (options.deadlineMs !== undefined) query.set('deadlineMs', String(options.deadlineMs));
      return (await call<{ state: string; receipt?: Record<string, unknown> }>(endpoint, 'DELETE', `/v1/tasks/${encodeURIComponent(taskId)}?${query}`)).body;
    },
    taskStatus: async (endpoint: string, taskId: string): Promise<AgentTaskStatus | null> => {
      const r = await call<AgentTaskStatus>(endpoint, 'GET', `/v1/tasks/${encodeURIComponent(taskId)}`);
      return r.status === 404 ? null : r.body;
    },
    listTasks: async (endpoint: string): Promise<AgentTaskStatus[]> =>
      (await call<{ tasks: AgentTaskStatus[] }>(endpoint, 'GET', '/v1/tasks')).body.tasks,
    probe: async (endpoint: string, kind: WorkloadKind, spec: unknown) =>
      (await call<{ source: { ok: boolean; detail: string }; destination: { ok: boolean; detail: string } }>(endpoint, 'POST', '/v1/probe', { kind, spec })).body,
  };
}
export type AgentClient = ReturnType<typeof createAgentClient>;
