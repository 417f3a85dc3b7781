// A fleet of simulated runtimes for the benchmarks: each registers with the real API (agent token),
// keeps its own credential, heartbeats at the interval the API answers (agent/lease.ts: after each
// exchange, backing off after a failure) reporting the tasks it hosts, and answers the control
// plane's calls to agents (agent/server.ts: task start, stop, status, list, probe) over real HTTP,
// checked with the protocol's schemas and that runtime's credential. Nothing is started: a task is
// ready as soon as it is started.
//
// One HTTP server serves every runtime, each under its own path prefix (its endpoint is
// http://127.0.0.1:<port>/rt/<id>): the agent client calls `${endpoint}${path}`, so an endpoint
// with a path is all a runtime needs.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { retryDelayMs } from '../../lib/backoff';
import {
  CodedError, DrainQuerySchema, HeartbeatAnswerSchema, ProbeBodySchema, RegisterAnswerSchema, TaskStartBodySchema,
  type ErrorCode, type ProbeAnswer, type StopAnswer, type TaskStartBody, type TaskStatus,
} from '../../protocol';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SimulatedFleetOptions {
  apiUrl: string;
  /** the shared agent token: it only registers */
  agentToken: string;
  /** labels of the runtime with this index (default: zone a/b/c round robin) */
  labelsOf?: (index: number) => Record<string, string>;
  slots?: number;
  /** one call to the API (default 5 s, as agents) */
  requestTimeoutMs?: number;
}

/** What one heartbeat window saw (HeartbeatWindow.end). */
export interface HeartbeatFigures {
  windowMs: number;
  runtimes: number;
  /** heartbeats per second the fleet offers at the interval the API hands out */
  offeredPerSec: number;
  /** heartbeats sent per second (a slow answer delays the next heartbeat, as in agents) */
  sentPerSec: number;
  /** heartbeats answered 200 per second */
  acknowledgedPerSec: number;
  acknowledgedShareOfOffered: number;
  /** answers other than 200, by status and error code */
  refused: Record<string, number>;
  /** no answer (timeout, connection refused) */
  unanswered: number;
  reregistrations: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
  /** the longest time any runtime went without an acknowledged renewal (window edges included) */
  longestRenewalGapMs: number;
  /** runtimes whose gap between renewals exceeded the lease: their lease lapsed */
  lapsedLeases: number;
}

export interface HeartbeatWindow {
  end(): HeartbeatFigures;
}

interface SimulatedTask {
  start: TaskStartBody & { taskId: string };
  incarnation: string;
  ports: { public: number; internal: number } | undefined;
}

interface SimulatedRuntime {
  id: string;
  index: number;
  credential: string | null;
  fence: number;
  intervalMs: number;
  leaseTtlMs: number;
  tasks: Map<string, SimulatedTask>;
  /** newest placement fence seen per workload: older starts and stops are refused (stale-fence) */
  fences: Map<string, number>;
  failures: number;
  timer: NodeJS.Timeout | null;
  lastAckAt: number;
}

export const percentile = (values: number[], p: number): number => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
};

const REGISTRATION_TIMEOUT_MS = 60_000;

const codedAnswer = (code: ErrorCode, message: string) => new CodedError(code, message);

export class SimulatedFleet {
  private readonly runtimes = new Map<string, SimulatedRuntime>();
  private stopped = false;
  private nextPort = 40_000;
  /** registrations that had to be tried again (no answer, or refused) */
  registrationRetries = 0;
  private readonly requestTimeoutMs: number;
  /** the current window's counters (one window at a time) */
  private window: {
    startedAt: number; sent: number; acknowledged: number; unanswered: number; reregistrations: number;
    refused: Record<string, number>; latencies: number[]; longestGapMs: number; lapsed: Set<string>;
  } | null = null;

  private constructor(
    private readonly options: SimulatedFleetOptions,
    private readonly server: http.Server,
    readonly baseUrl: string,
  ) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  }

  /** Starts the one HTTP server every simulated runtime answers on. */
  static async start(options: SimulatedFleetOptions): Promise<SimulatedFleet> {
    let fleet: SimulatedFleet | null = null;
    const server = http.createServer((request, response) => void fleet!.serve(request, response));
    server.keepAliveTimeout = 75_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fleet = new SimulatedFleet(options, server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return fleet;
  }

  get size(): number {
    return this.runtimes.size;
  }

  runtimeIds(): string[] {
    return [...this.runtimes.keys()];
  }

  /** The endpoint runtime `id` registers. */
  endpointOf(id: string): string {
    return `${this.baseUrl}/rt/${id}`;
  }

  /** Every hosted task by workload: how many ready tasks each workload has on the fleet. */
  readyTasksByWorkload(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const runtime of this.runtimes.values()) for (const task of runtime.tasks.values()) counts[task.start.workload] = (counts[task.start.workload] ?? 0) + 1;
    return counts;
  }

  /**
   * Registers runtimes until the fleet has `count` (ids sim-00000, …), `concurrency` at a time,
   * and starts each one's heartbeats at a random point of its first interval (agents do not start
   * in step). A registration that fails is tried again with backoff, as agents do.
   */
  async grow(count: number, concurrency = 8): Promise<void> {
    const pending = Array.from({ length: Math.max(0, count - this.runtimes.size) }, (_, i) => this.runtimes.size + i);
    const work = async () => {
      for (let index = pending.shift(); index !== undefined; index = pending.shift()) {
        const runtime: SimulatedRuntime = {
          id: `sim-${String(index).padStart(5, '0')}`, index, credential: null, fence: 0, intervalMs: 15_000, leaseTtlMs: 45_000,
          tasks: new Map(), fences: new Map(), failures: 0, timer: null, lastAckAt: 0,
        };
        this.runtimes.set(runtime.id, runtime);
        // An agent retries its registration with backoff until it gets through (agent/lease.ts).
        for (let failures = 1; !(await this.register(runtime).then(() => true, () => false)); failures++) {
          this.registrationRetries++;
          if (this.stopped) return;
          await sleep(retryDelayMs(failures, 250, 5_000));
        }
        this.schedule(runtime, Math.floor(Math.random() * runtime.intervalMs));
      }
    };
    await Promise.all(Array.from({ length: concurrency }, work));
  }

  /** Counts heartbeats from now until end(). */
  beginWindow(): HeartbeatWindow {
    const startedAt = Date.now();
    this.window = { startedAt, sent: 0, acknowledged: 0, unanswered: 0, reregistrations: 0, refused: {}, latencies: [], longestGapMs: 0, lapsed: new Set() };
    const window = this.window;
    return {
      end: () => {
        const endedAt = Date.now();
        if (this.window === window) this.window = null;
        const seconds = (endedAt - startedAt) / 1000;
        // The gap still open at the window's end counts too (a runtime that never got an answer).
        let longestGapMs = window.longestGapMs;
        let offered = 0;
        for (const runtime of this.runtimes.values()) {
          const open = endedAt - Math.max(runtime.lastAckAt, startedAt);
          longestGapMs = Math.max(longestGapMs, open);
          if (runtime.lastAckAt > 0 && endedAt - runtime.lastAckAt > runtime.leaseTtlMs) window.lapsed.add(runtime.id);
          offered += 1000 / runtime.intervalMs;
        }
        const round = (value: number, digits = 1) => Number(value.toFixed(digits));
        return {
          windowMs: endedAt - startedAt,
          runtimes: this.runtimes.size,
          offeredPerSec: round(offered),
          sentPerSec: round(window.sent / seconds),
          acknowledgedPerSec: round(window.acknowledged / seconds),
          acknowledgedShareOfOffered: round(window.acknowledged / seconds / offered, 3),
          refused: window.refused,
          unanswered: window.unanswered,
          reregistrations: window.reregistrations,
          latencyMs: {
            p50: round(percentile(window.latencies, 50)), p95: round(percentile(window.latencies, 95)),
            p99: round(percentile(window.latencies, 99)), max: round(percentile(window.latencies, 100)),
          },
          longestRenewalGapMs: longestGapMs,
          lapsedLeases: window.lapsed.size,
        };
      },
    };
  }

  /** Stops every heartbeat and the server (open connections included). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const runtime of this.runtimes.values()) if (runtime.timer) clearTimeout(runtime.timer);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // -------------------------------------------------------------------------------------------
  // the runtimes' side of the protocol: registration and heartbeats

  private async post(urlPath: string, bearer: string, body: unknown, timeoutMs = this.requestTimeoutMs): Promise<{ status: number; json: Record<string, unknown> } | null> {
    try {
      const response = await fetch(`${this.options.apiUrl}${urlPath}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: response.status, json: (await response.json().catch(() => ({}))) as Record<string, unknown> };
    } catch {
      return null;
    }
  }

  /**
   * Registers with the agent token (a new credential, a new fence). Waits longer than a heartbeat
   * for the answer: a registration whose answer is lost leaves a live lease that the agent token
   * may not take over, so the runtime is locked out until that lease runs out.
   */
  private async register(runtime: SimulatedRuntime): Promise<void> {
    const answer = await this.post('/v1/runtimes', this.options.agentToken, {
      id: runtime.id, endpoint: this.endpointOf(runtime.id),
      labels: this.options.labelsOf?.(runtime.index) ?? { zone: ['a', 'b', 'c'][runtime.index % 3] }, slots: this.options.slots ?? 4,
    }, REGISTRATION_TIMEOUT_MS);
    if (answer?.status !== 201) throw new Error(`registration of ${runtime.id}: ${answer ? `${answer.status} ${JSON.stringify(answer.json)}` : 'no answer'}`);
    const registered = RegisterAnswerSchema.parse(answer.json);
    runtime.credential = registered.credential ?? null;
    runtime.fence = registered.fence;
    runtime.intervalMs = registered.heartbeatIntervalMs;
    runtime.leaseTtlMs = registered.leaseTtlMs;
    this.acknowledged(runtime, Date.now());
  }

  private acknowledged(runtime: SimulatedRuntime, at: number): void {
    const window = this.window;
    if (window && runtime.lastAckAt > 0) {
      const gap = at - Math.max(runtime.lastAckAt, window.startedAt);
      window.longestGapMs = Math.max(window.longestGapMs, gap);
      if (at - runtime.lastAckAt > runtime.leaseTtlMs) window.lapsed.add(runtime.id);
    }
    runtime.lastAckAt = at;
  }

  private schedule(runtime: SimulatedRuntime, delayMs: number): void {
    if (this.stopped) return;
    runtime.timer = setTimeout(() => void this.beat(runtime), delayMs);
  }

  /** One heartbeat, handled as agent/lease.ts handles its answer; then the next one is scheduled. */
  private async beat(runtime: SimulatedRuntime): Promise<void> {
    runtime.timer = null;
    const window = this.window;
    const sentAt = Date.now();
    if (window) window.sent++;
    const answer = await this.post(`/v1/runtimes/${runtime.id}/heartbeat`, runtime.credential ?? '', { fence: runtime.fence, tasks: this.reports(runtime) });
    const at = Date.now();
    let ok = false;
    if (answer === null) {
      if (window) window.unanswered++;
    } else if (answer.status === 200) {
      ok = true;
      if (window) {
        window.acknowledged++;
        window.latencies.push(at - sentAt);
      }
      this.acknowledged(runtime, at);
      for (const taskId of HeartbeatAnswerSchema.parse(answer.json).revoked) runtime.tasks.delete(taskId);
    } else {
      if (window) window.refused[`${answer.status} ${String(answer.json.error ?? '')}`.trim()] = (window.refused[`${answer.status} ${String(answer.json.error ?? '')}`.trim()] ?? 0) + 1;
      if (answer.status === 409 || answer.status === 404 || answer.status === 401) {
        // Declared LOST, unknown, or its credential refused: stop what was revoked and register again.
        for (const taskId of HeartbeatAnswerSchema.catch({ revoked: [] }).parse(answer.json).revoked) runtime.tasks.delete(taskId);
        if (window) window.reregistrations++;
        ok = await this.register(runtime).then(() => true, () => false);
      }
    }
    runtime.failures = ok ? 0 : runtime.failures + 1;
    this.schedule(runtime, ok ? runtime.intervalMs : retryDelayMs(runtime.failures, 250, Math.min(5_000, runtime.intervalMs)));
  }

  private status(task: SimulatedTask): TaskStatus {
    const { start } = task;
    return {
      taskId: start.taskId, workload: start.workload, incarnation: task.incarnation, state: 'ready', counts: {}, errors: 0, generation: start.generation,
      ...(task.ports ? { ports: task.ports } : {}), ...(start.partitions ? { partitions: start.partitions } : {}),
    };
  }

  private reports(runtime: SimulatedRuntime) {
    return [...runtime.tasks.values()].map((task) => {
      const { ports: _ports, partitions: _partitions, generation: _generation, ...report } = this.status(task);
      return report;
    });
  }

  // -------------------------------------------------------------------------------------------
  // the control plane's calls to agents

  private async serve(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const answer = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const url = new URL(request.url ?? '/', this.baseUrl);
      const match = /^\/rt\/([^/]+)(\/.*)$/.exec(url.pathname);
      const runtime = match ? this.runtimes.get(match[1]) : undefined;
      if (!match || !runtime) return answer(404, codedAnswer('not-found', `no route ${request.method} ${url.pathname}`).toBody());
      // Only this runtime's own credential (agent/server.ts), compared in constant time.
      if (runtime.credential === null) throw codedAnswer('unavailable', `agent ${runtime.id} has not registered yet; retry`);
      const presented = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1] ?? '';
      const digest = (value: string) => crypto.createHash('sha256').update(value).digest();
      if (!crypto.timingSafeEqual(digest(presented), digest(runtime.credential))) {
        throw codedAnswer('invalid-credential', `the bearer token is not the current credential of runtime ${runtime.id}`);
      }
      const body = text ? (JSON.parse(text) as unknown) : undefined;
      const [status, result] = this.route(runtime, request.method ?? 'GET', match[2], url.searchParams, body);
      return answer(status, result);
    } catch (error) {
      if (error instanceof CodedError) return answer(error.status, error.toBody());
      return answer(400, { error: 'bad-request', message: (error as Error).message });
    }
  }

  private admitFence(runtime: SimulatedRuntime, workload: string, fence: number | undefined): void {
    if (fence === undefined) return;
    const newest = runtime.fences.get(workload);
    if (newest !== undefined && fence < newest) throw codedAnswer('stale-fence', `placement fence ${fence} of ${workload} is older than ${newest}`);
    runtime.fences.set(workload, fence);
  }

  private route(runtime: SimulatedRuntime, method: string, path: string, query: URLSearchParams, body: unknown): [number, unknown] {
    if (method === 'GET' && path === '/v1/health') return [200, { id: runtime.id, fence: runtime.fence, labels: {}, tasks: runtime.tasks.size }];
    if (method === 'GET' && path === '/v1/tasks') return [200, { tasks: [...runtime.tasks.values()].map((t) => this.status(t)) }];
    if (method === 'POST' && path === '/v1/probe') {
      const probe = ProbeBodySchema.parse(body);
      const none = { ok: true, detail: `${probe.kind}: simulated runtime, nothing to reach` };
      const answer: ProbeAnswer = { source: none, destination: none, ...(probe.requires?.length ? { requirements: probe.requires.map((r) => ({ ...none, endpoint: JSON.stringify(r) })) } : {}) };
      return [200, answer];
    }
    const task = /^\/v1\/tasks\/([^/]+)(\/[a-z-]+)?$/.exec(path);
    if (!task) throw codedAnswer('not-found', `no route ${method} ${path}`);
    const taskId = decodeURIComponent(task[1]);
    const hosted = runtime.tasks.get(taskId);
    if (task[2]) throw codedAnswer('not-found', `no task ${taskId} here`); // checkpoint clock, cutover: stream subtasks only
    if (method === 'GET') {
      if (!hosted) throw codedAnswer('not-found', `no task ${taskId} here`);
      return [200, this.status(hosted)];
    }
    if (method === 'PUT') {
      const start = TaskStartBodySchema.parse(body);
      this.admitFence(runtime, start.workload, start.placementFence);
      if (hosted && hosted.start.generation === start.generation) {
        hosted.start = { ...start, taskId };
        return [200, this.status(hosted)];
      }
      const created: SimulatedTask = {
        start: { ...start, taskId }, incarnation: crypto.randomUUID(),
        ports: start.kind === 'service' ? { public: this.nextPort++ % 30_000 + 2_000, internal: this.nextPort++ % 30_000 + 2_000 } : undefined,
      };
      runtime.tasks.set(taskId, created);
      return [201, this.status(created)];
    }
    if (method === 'DELETE') {
      const drain = DrainQuerySchema.parse(Object.fromEntries(query));
      if (hosted) this.admitFence(runtime, hosted.start.workload, drain.placementFence);
      runtime.tasks.delete(taskId);
      const stopped: StopAnswer = hosted
        ? { state: 'stopped', receipt: { taskId, incarnation: hosted.incarnation, inFlight: 0, durationMs: 0 } }
        : { state: 'absent' };
      return [200, stopped];
    }
    throw codedAnswer('not-found', `no route ${method} ${path}`);
  }
}
