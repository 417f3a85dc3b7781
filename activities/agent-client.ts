// HTTP client for the runtime agents' task API (docs/agent-protocol.md). Every call presents the
// credential of the runtime it calls (DESIGN.md §3 "Credentials"), never a shared token. Requests
// and answers are the protocol's schemas; an agent's error code is non-retryable exactly when the
// protocol says so, except a refused credential: it may have rotated since it was read, and a
// retried activity reads it again.
import http from 'node:http';
import { ApplicationFailure } from '@temporalio/activity';
import type { z } from 'zod';
import {
  isRetryable,
  CheckpointClockAnswerSchema,
  CutoverAnswerSchema,
  ProbeAnswerSchema,
  StopAnswerSchema,
  type CheckpointClockAnswer,
  type CheckpointClockCommand,
  type CutoverAnswer,
  type CutoverCommand,
  TaskListSchema,
  TaskStatusSchema,
  type DrainOptions,
  type ProbeAnswer,
  type Requirement,
  type StopAnswer,
  type TaskStartBody,
  type TaskStatus,
  type WorkloadKind,
} from '../protocol';

/**
 * A call the agent never answered: the connection was refused or reset, or the call timed out.
 * Retryable, and the only failure that can make a runtime `unreachable` (activities/tasks.ts
 * `agentCalls`): an agent that answered, even with a 5xx, is there.
 */
export class AgentUnreachableError extends Error {
  constructor(readonly endpoint: string, cause: Error) {
    super(`agent ${endpoint} unreachable: ${cause.message}`, { cause });
    this.name = 'AgentUnreachableError';
  }
}

/** One agent as the control plane calls it: where, and the credential of its runtime. */
export interface AgentTarget {
  endpoint: string;
  credential: string;
}

/** The most of an agent's answer read: far above any task list, and a bound on a misbehaving agent. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * One HTTP exchange with an agent: its status and body, or an error when it did not answer in
 * `timeoutMs` (the whole exchange, not one idle period), its connection failed, or its answer was
 * larger than MAX_ANSWER_BYTES. node:http over kept-alive connections rather than fetch: a scale-out
 * makes six to eight agent calls, and fetch took four times the CPU of this for each (its WHATWG
 * streams, abort signal and Response).
 */
function exchange(url: string, options: { method: string; headers: Record<string, string>; body?: string; timeoutMs: number; agent: http.Agent }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      clearTimeout(timer);
      reject(error);
    };
    const request = http.request(url, { method: options.method, headers: options.headers, agent: options.agent }, (response) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      response.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_ANSWER_BYTES) request.destroy(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('end', () => {
        clearTimeout(timer);
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
      response.on('error', fail);
    });
    const timer = setTimeout(() => request.destroy(new Error(`no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    // a destroyed request or a failed connection, before or during the answer
    request.on('error', fail);
    request.end(options.body);
  });
}

/**
 * `idleSocketMs`: how long a kept-alive connection may sit unused before the client closes it (as
 * fetch's pool did, 4 s). Left open, an agent shutting down would wait for it: a server's close()
 * ends a kept-alive connection only at its own keep-alive timeout (Fastify's: 72 s) when a request
 * was in flight as it began.
 */
export function createAgentClient(timeoutMs = 30_000, idleSocketMs = 4_000) {
  // The agent's socket timeout destroys a free (idle) socket; a request in flight is bounded by its own timer.
  const agent = new http.Agent({ keepAlive: true, timeout: idleSocketMs });
  async function call<T>(target: AgentTarget, method: string, path: string, answer: z.ZodType<T>, body?: unknown, callTimeoutMs = timeoutMs): Promise<T | null> {
    const { endpoint } = target;
    let response: { status: number; text: string };
    try {
      response = await exchange(`${endpoint}${path}`, {
        method,
        headers: { authorization: `Bearer ${target.credential}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        timeoutMs: callTimeoutMs,
        agent,
      });
    } catch (error) {
      throw new AgentUnreachableError(endpoint, error as Error); // retryable
    }
    const parsed = parseAnswer(response.text);
    if (response.status === 404 && parsed.error === 'not-found') return null;
    if (response.status >= 400) {
      const code = parsed.error ?? `http-${response.status}`;
      const message = `agent ${endpoint} ${method} ${path}: ${code}: ${parsed.message ?? ''}`;
      if (response.status === 401) throw new Error(message); // retryable: the next attempt reads the runtime's credential again
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
    startTask: async (agent: AgentTarget, taskId: string, start: TaskStartBody): Promise<TaskStatus> =>
      required(await call(agent, 'PUT', task(taskId), TaskStatusSchema, start), `start ${taskId}`),
    drainTask: async (agent: AgentTarget, taskId: string, options: DrainOptions = {}): Promise<StopAnswer> => {
      const query = new URLSearchParams();
      if (options.graceMs !== undefined) query.set('graceMs', String(options.graceMs));
      if (options.drainTimeoutMs !== undefined) query.set('drainTimeoutMs', String(options.drainTimeoutMs));
      if (options.placementFence !== undefined) query.set('placementFence', String(options.placementFence));
      // A drain answers once the task is gone: wait for its deadline (or grace), not the usual call timeout.
      const waitMs = Math.max(timeoutMs, (options.drainTimeoutMs ?? options.graceMs ?? 0) + 10_000);
      return required(await call(agent, 'DELETE', `${task(taskId)}?${query}`, StopAnswerSchema, undefined, waitMs), `stop ${taskId}`);
    },
    /** null when the agent does not host the task */
    /** `boundMs`: a shorter bound than the client's, for a poll that has a deadline of its own */
    taskStatus: (agent: AgentTarget, taskId: string, boundMs?: number): Promise<TaskStatus | null> =>
      call(agent, 'GET', task(taskId), TaskStatusSchema, undefined, Math.min(timeoutMs, boundMs ?? timeoutMs)),
    listTasks: async (agent: AgentTarget): Promise<TaskStatus[]> => required(await call(agent, 'GET', '/v1/tasks', TaskListSchema), 'task list').tasks,
    checkpointClock: async (agent: AgentTarget, taskId: string, command: CheckpointClockCommand): Promise<CheckpointClockAnswer> =>
      required(await call(agent, 'POST', `${task(taskId)}/checkpoint-clock`, CheckpointClockAnswerSchema, command), `checkpoint clock of ${taskId}`),
    armCutover: async (agent: AgentTarget, taskId: string, command: CutoverCommand): Promise<CutoverAnswer> =>
      required(await call(agent, 'POST', `${task(taskId)}/cutover`, CutoverAnswerSchema, command), `cutover of ${taskId}`),
    probe: async (agent: AgentTarget, kind: WorkloadKind, spec: unknown, requires?: Requirement[]): Promise<ProbeAnswer> =>
      required(await call(agent, 'POST', '/v1/probe', ProbeAnswerSchema, { kind, spec, ...(requires?.length ? { requires } : {}) }), 'probe'),
  };
}
export type AgentClient = ReturnType<typeof createAgentClient>;

/** An answer's JSON body; an empty or unreadable one as no fields (its status then speaks). */
function parseAnswer(text: string): { error?: string; message?: string } {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? value : {};
  } catch {
    return {};
  }
}
