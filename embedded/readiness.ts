// When `npm start` may say "ready": each part is asked, none is assumed from a delay.
//   API     GET /readyz answers 200 (Temporal and PostgreSQL reachable)
//   worker  Temporal's DescribeTaskQueue lists a workflow poller and an activity poller of this
//           very worker process (the SDK's identity is `<pid>@<host>`) on the task queue
//   agents  each is READY in GET /v1/state, registered by its current process: an agent's own API
//           answers 503 until it has registered or resumed, 401 to a call without credential after
import type { Connection } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';

/** temporal.api.enums.v1.TaskQueueType */
const TASK_QUEUE_TYPE = { workflow: 1, activity: 2 } as const;

export interface ReadinessTargets {
  apiUrl: string;
  viewerToken: string;
  temporal: Connection;
  namespace: string;
  taskQueue: string;
  /** each worker's current process id (it changes when the supervisor restarts it) */
  workerPids(): (number | undefined)[];
  agents: readonly { id: string; url: string }[];
}

const answers = async (url: string, headers: Record<string, string> = {}) => {
  try {
    return await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
  } catch {
    return null; // not listening yet
  }
};

/** Every worker polls the task queue for workflow and for activity tasks. */
async function workersPoll(targets: ReadinessTargets): Promise<boolean> {
  const pids = targets.workerPids();
  if (pids.length === 0 || pids.some((pid) => pid === undefined)) return false;
  const polled = await Promise.all(Object.values(TASK_QUEUE_TYPE).map(async (taskQueueType) => {
    const described = await targets.temporal.workflowService.describeTaskQueue({
      namespace: targets.namespace, taskQueue: { name: targets.taskQueue }, taskQueueType,
    }).catch(() => null);
    return pids.every((pid) => (described?.pollers ?? []).some((poller) => poller.identity?.startsWith(`${pid}@`)));
  }));
  return polled.every(Boolean);
}

/** What is not ready yet, in words ([] once everything is). */
export async function notReady(targets: ReadinessTargets): Promise<string[]> {
  const [api, worker, state, registered] = await Promise.all([
    answers(`${targets.apiUrl}/readyz`),
    workersPoll(targets),
    answers(`${targets.apiUrl}/v1/state`, { authorization: `Bearer ${targets.viewerToken}` })
      .then(async (r) => (r?.ok ? ((await r.json()) as { runtimes: { id: string; status: string }[] }) : null)),
    Promise.all(targets.agents.map(async (a) => {
      const health = await answers(`${a.url}/v1/health`);
      return health !== null && health.status !== 503;
    })),
  ]);
  const missing: string[] = [];
  if (!api?.ok) missing.push('the API (/readyz)');
  if (!worker) missing.push(`the worker (polling task queue ${targets.taskQueue})`);
  targets.agents.forEach((agent, i) => {
    const status = state?.runtimes.find((r) => r.id === agent.id)?.status;
    if (!registered[i] || !status) missing.push(`${agent.id} (not registered)`);
    else if (status !== 'READY') missing.push(`${agent.id} (${status})`);
  });
  return missing;
}

/** Polls notReady until it is empty; says what it waits for whenever that changes; throws at the deadline. */
export async function waitUntilReady(targets: ReadinessTargets, options: { timeoutMs: number; log(line: string): void }): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let said = '';
  for (;;) {
    const missing = await notReady(targets);
    if (missing.length === 0) return;
    const waiting = `waiting for ${missing.join(', ')}`;
    if (waiting !== said) options.log(waiting);
    said = waiting;
    if (Date.now() > deadline) throw new Error(`not ready within ${options.timeoutMs / 1000} s: ${missing.join(', ')}`);
    await sleep(250);
  }
}
