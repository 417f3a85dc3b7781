// The container driver (DESIGN.md §5 "container"): a service replica as a container of the Docker
// engine beside the agent, with the process driver's contract. The image is pinned by digest (the
// API resolved any tag when the workload was defined) and ensured on this engine before anything
// is created: a node that cannot pull refuses the start (503 image-unavailable) with nothing
// started. Limits are the engine's; the task's port pair is published on the runtime's bind
// address; every workload container sits on one bridge network with inter-container traffic off.
// Containers carry labels (runtime, workload, task id, incarnation, spec fingerprint), by which a
// restarted agent adopts its own and removes the ones no hosted task names. The containers outlive
// the agent (static stability): only a drain, a replacement or a stray sweep removes one.
import { randomUUID } from 'node:crypto';
import { AgentServiceSpecSchema, ContainerLimitsSchema, describeIssues, imageDigestOf, type ServiceSpec } from '../../protocol';
import { doublingDelays } from '../../lib/backoff';
import { DEFAULT_RESTART_POLICY, isCrashLooping, scheduleRestart, type SupervisionRecord, freshSupervision, describeExit } from '../../domain/supervision';
import { portKeyFor, type PortAllocator } from '../ports';
import { DriverError, serviceHasNoEndpoints, type DriverContext, type TaskDriver, type TaskHandle, type TaskStart, type TaskStatus } from './driver';
import { EngineError, type ContainerInspect, type Engine } from './engine';
import { probeHostOf, probeHttp, probeTcp, type ProbeOutcome } from './process-probes';
import { specFingerprint } from './process-records';
import type { DrainOptions, DrainReceipt } from '../../protocol';
import type { z } from 'zod';
import { messageOf } from '../../lib/errors';
import { setTimeout as sleep } from 'node:timers/promises';

/** The bridge network every workload container joins (created on demand, inter-container communication off). */
export const WORKLOAD_NETWORK = 'scalegate-workloads';
/** Where a container listens: PORT and INTERNAL_PORT inside it, published on the runtime's pair. */
export const CONTAINER_PORTS = { public: 8080, internal: 8081 } as const;
export const LABEL = {
  runtime: 'io.scalegate.runtime',
  workload: 'io.scalegate.workload',
  task: 'io.scalegate.task',
  incarnation: 'io.scalegate.incarnation',
  generation: 'io.scalegate.generation',
  spec: 'io.scalegate.spec',
} as const;
/** How often a running container's state is read (an exit is seen within it). */
const WATCH_MS = 1_000;

/** a pause that does not keep the process alive */
const delay = (ms: number) => sleep(ms, undefined, { ref: false });

/** The engine's create parameters of a limits spec: NanoCpus and bytes. */
export function engineLimits(limits: z.infer<typeof ContainerLimitsSchema> | undefined): { nanoCpus?: number; memoryBytes?: number } {
  return {
    ...(limits?.cpus !== undefined ? { nanoCpus: Math.round(limits.cpus * 1e9) } : {}),
    ...(limits?.memoryMiB !== undefined ? { memoryBytes: limits.memoryMiB * 1024 * 1024 } : {}),
  };
}

/** A container name unique on an engine that several agents share. */
export const containerNameFor = (runtimeId: string, taskId: string): string => `scalegate-${runtimeId}-${taskId}`.replace(/[^A-Za-z0-9_.-]/g, '_');

/** Creates and starts a fresh container for a task on its pair; answers its id and incarnation. */
type Launch = () => Promise<{ containerId: string; incarnation: string }>;

class ContainerTask implements TaskHandle {
  private state: TaskStatus['state'] = 'starting';
  private detail: string | undefined;
  private stopping = false;
  private cpuSample: { total: number; atMs: number } | null = null;
  private usage: { cpuPercent?: number; memoryBytes?: number } = {};
  /** supervision (DESIGN.md §3, domain/supervision.ts): restarts with backoff, as the process driver's */
  private supervision: SupervisionRecord = freshSupervision();
  private readyAtMs: number | undefined;
  private nextRestartAtMs: number | undefined;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: DriverContext,
    private readonly engine: Engine,
    private readonly ports: PortAllocator,
    readonly start: TaskStart,
    private readonly spec: ServiceSpec,
    readonly pair: { public: number; internal: number },
    private containerId: string,
    private currentIncarnation: string,
    readonly adopted: boolean,
    private readonly launch: Launch,
  ) {}

  get taskId(): string {
    return this.start.taskId;
  }

  get incarnation(): string {
    return this.currentIncarnation;
  }

  get isLive(): boolean {
    return this.state === 'starting' || this.state === 'ready' || this.state === 'restarting';
  }

  private get policy() {
    return this.ctx.restartPolicy ?? DEFAULT_RESTART_POLICY;
  }

  /** Readiness, then a watch of the container's state and usage until it ends or is stopped. */
  run(): void {
    void this.supervise().catch((error: unknown) => this.ended(`watching container ${this.containerId}: ${messageOf(error)}`, { code: null, signal: null }));
  }

  private async supervise(): Promise<void> {
    const began = Date.now();
    const nextDelay = doublingDelays(20, 250);
    while (this.state === 'starting' && !this.stopping) {
      if (await this.exited()) return;
      const readiness = this.spec.readiness;
      let outcome: ProbeOutcome;
      if (readiness === undefined) outcome = { ready: Date.now() - began >= 200, detail: 'no readiness probe: ready once running for 200 ms' };
      else if ('http' in readiness) outcome = await probeHttp(this.pair.public, readiness.http, probeHostOf(this.ctx));
      else outcome = await probeTcp(this.pair.public, probeHostOf(this.ctx));
      if (this.stopping) return;
      if (outcome.broken) return this.fail(outcome.detail);
      if (outcome.ready) {
        this.state = 'ready';
        this.readyAtMs = Date.now();
        this.detail = undefined;
        this.ctx.log('task-ready', { taskId: this.taskId, incarnation: this.incarnation, container: this.containerId });
        break;
      }
      this.detail = outcome.detail;
      await delay(nextDelay());
    }
    while (this.state === 'ready' && !this.stopping) {
      if (await this.exited()) return;
      await this.sampleUsage();
      await delay(WATCH_MS);
    }
  }

  /** True (and a restart scheduled, with the engine's reason) when the container is no longer running. */
  private async exited(): Promise<boolean> {
    const inspected = await this.engine.inspect(this.containerId);
    if (this.stopping) return true;
    if (inspected?.State.Running) return false;
    if (inspected) this.ended(exitDetail(inspected), { code: inspected.State.ExitCode, signal: inspected.State.OOMKilled ? 'SIGKILL' : null });
    else this.ended(`container ${this.containerId} was removed outside scalegate`, { code: null, signal: null });
    return true;
  }

  /** An end nobody asked for: the task is `restarting`, and a fresh container starts after the backoff. */
  private ended(detail: string, exit: { code: number | null; signal: string | null }): void {
    if (this.stopping || !this.isLive) return;
    const nowMs = Date.now();
    const readyForMs = this.readyAtMs === undefined ? null : nowMs - this.readyAtMs;
    const next = scheduleRestart(this.supervision, this.policy, { ...exit, at: new Date(nowMs).toISOString() }, readyForMs, nowMs);
    this.supervision = next.record;
    this.state = 'restarting';
    this.readyAtMs = undefined;
    this.nextRestartAtMs = next.restartAtMs;
    this.detail = `${detail}; restart ${next.record.restarts} in ${next.delayMs} ms`;
    this.ctx.log('task-restart-scheduled', { taskId: this.taskId, container: this.containerId, exit: describeExit(exit), restarts: next.record.restarts, delayMs: next.delayMs });
    this.restartTimer = setTimeout(() => void this.relaunch(), next.delayMs);
    this.restartTimer.unref();
  }

  /** The restart: the ended container goes, a fresh one of the same task starts on the same pair. */
  private async relaunch(): Promise<void> {
    this.restartTimer = undefined;
    if (this.stopping || this.state !== 'restarting') return;
    this.nextRestartAtMs = undefined;
    try {
      await this.engine.remove(this.containerId);
      const launched = await this.launch();
      if (this.stopping) {
        await this.engine.remove(launched.containerId);
        return;
      }
      this.containerId = launched.containerId;
      this.currentIncarnation = launched.incarnation;
      this.cpuSample = null;
      this.usage = {};
      this.state = 'starting';
      this.detail = `restart ${this.supervision.restarts}: waiting for readiness`;
      this.run();
    } catch (error) {
      this.state = 'ready'; // so ended() takes it as a live task's end
      this.ended(`restart ${this.supervision.restarts} failed: ${messageOf(error)}`, { code: null, signal: null });
    }
  }

  private async sampleUsage(): Promise<void> {
    const stats = await this.engine.stats(this.containerId).catch(() => null);
    if (!stats) return;
    const total = stats.cpu_stats.cpu_usage.total_usage;
    const atMs = sampledAtMs(stats.read);
    if (this.cpuSample && atMs > this.cpuSample.atMs) {
      this.usage.cpuPercent = cpuPercentBetween(this.cpuSample, { total, atMs });
    }
    this.cpuSample = { total, atMs };
    if (stats.memory_stats.usage !== undefined) this.usage.memoryBytes = stats.memory_stats.usage;
  }

  /** A failure no restart mends (a readiness probe that cannot be made). */
  private fail(detail: string): void {
    if (!this.isLive) return;
    this.state = 'failed';
    this.detail = detail;
    this.ctx.log('task-failed', { taskId: this.taskId, incarnation: this.incarnation, container: this.containerId, detail });
  }

  status(): TaskStatus {
    const counts: Record<string, number> = { restarts: this.supervision.restarts };
    if (this.usage.cpuPercent !== undefined) counts.cpuPercent = this.usage.cpuPercent;
    // the container's memory as its engine counts it: the evidence's resident bytes
    if (this.usage.memoryBytes !== undefined) counts.rssBytes = this.usage.memoryBytes;
    if (this.adopted) counts.adopted = 1;
    const nowMs = Date.now();
    const readyForMs = this.state === 'ready' && this.readyAtMs !== undefined ? nowMs - this.readyAtMs : null;
    return {
      taskId: this.taskId, workload: this.start.workload, incarnation: this.incarnation, state: this.state, counts, errors: 0,
      ports: this.pair, generation: this.start.generation,
      detail: this.detail ?? `container ${this.containerId.slice(0, 12)} of ${this.spec.image}`,
      ...(isCrashLooping(this.supervision, this.policy, nowMs, readyForMs) ? { crashLooping: true } : {}),
      ...(this.supervision.lastExit ? { lastExit: this.supervision.lastExit } : {}),
      ...(this.nextRestartAtMs !== undefined ? { nextRestartAt: new Date(this.nextRestartAtMs).toISOString() } : {}),
    };
  }

  /**
   * The agent closes (its SIGTERM): the container runs on for the next agent to adopt, and this
   * agent stops watching it. As after a drain, no watch loop goes on and no restart is launched.
   */
  detach(): void {
    this.stopping = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    this.nextRestartAtMs = undefined;
  }

  /** The engine's stop with the task's grace, then remove; the port pair goes back to the allocator. Never restarted after. */
  async drain(options: DrainOptions): Promise<DrainReceipt> {
    const began = Date.now();
    this.detach(); // nothing watched or restarted from here, then the container stops
    this.state = 'draining';
    const graceMs = options.graceMs ?? this.spec.graceMs;
    const before = await this.engine.inspect(this.containerId);
    await this.engine.stop(this.containerId, graceMs / 1000);
    const after = await this.engine.inspect(this.containerId);
    // SIGKILL after the grace shows as exit code 137 on a container that was running
    const forced = Boolean(before?.State.Running && after && after.State.ExitCode === 137);
    await this.engine.remove(this.containerId);
    await this.ports.release(portKeyFor(this.start), this.pair);
    this.state = 'stopped';
    this.ctx.log('task-stopped', { taskId: this.taskId, incarnation: this.incarnation, container: this.containerId, forced });
    return { taskId: this.taskId, incarnation: this.incarnation, inFlight: 0, forced, durationMs: Date.now() - began };
  }
}

/** When the engine took a stats sample, in ms; now when its `read` says nothing usable (a zero time). */
function sampledAtMs(read: string | undefined): number {
  const at = read === undefined ? Number.NaN : Date.parse(read);
  return Number.isFinite(at) && at > 0 ? at : Date.now();
}

/**
 * A container's CPU use between two stats samples, in percent of one CPU (200 = two CPUs busy):
 * its CPU time (ns) over the wall time between the samples. dockerd's own formula divides by the
 * host's CPU time (system_cpu_usage, all CPUs, idle included) times online_cpus, which comes to the
 * same; podman's system_cpu_usage counts only the host's busy time, so the wall clock serves both.
 */
export function cpuPercentBetween(before: { total: number; atMs: number }, after: { total: number; atMs: number }): number {
  return Math.round(((after.total - before.total) / ((after.atMs - before.atMs) * 1e6)) * 1000) / 10;
}

function exitDetail(inspected: ContainerInspect): string {
  const state = inspected.State;
  const why = state.OOMKilled ? ' (killed: over its memory limit)' : state.Error ? ` (${state.Error})` : '';
  return `container ${inspected.Id.slice(0, 12)} ${state.Status}, exit code ${state.ExitCode}${why}`;
}

export interface ContainerDriverOptions {
  /** the address published ports bind to (the runtime's bind address) */
  bindHost: string;
}

export function createContainerDriver(ctx: DriverContext, engine: Engine | null, ports: PortAllocator, options: ContainerDriverOptions): TaskDriver {
  const tasks = new Map<string, ContainerTask>();
  const ownLabels = { [LABEL.runtime]: ctx.runtimeId };

  async function ensureImage(image: string): Promise<void> {
    if (!engine) throw new DriverError('image-unavailable', `runtime ${ctx.runtimeId} has no container engine (set SCALEGATE_DOCKER_HOST): cannot run ${image}`);
    try {
      if ((await engine.imageId(image)) !== null) return;
      await engine.pull(image);
      if ((await engine.imageId(image)) === null) throw new Error('the engine reports no such image after the pull');
    } catch (error) {
      throw new DriverError('image-unavailable', `runtime ${ctx.runtimeId} cannot pull ${image}: ${messageOf(error)}; nothing was started`);
    }
  }

  /**
   * A fresh container of the task on its pair: created with its labels and limits, then started.
   * Nothing is left half-started: a container that would not start is removed.
   */
  const launcher = (task: TaskStart, spec: ServiceSpec & { image: string }, fingerprint: string, pair: { public: number; internal: number }): Launch => async () => {
    const incarnation = randomUUID();
    const network = await engine!.ensureNetwork(WORKLOAD_NETWORK);
    // podman's warning says it keeps inter-container communication on (docs/security.md)
    if (network.created) ctx.log('workload-network-created', { network: WORKLOAD_NETWORK, warnings: network.warnings });
    const containerId = await engine!.create({
      name: containerNameFor(ctx.runtimeId, task.taskId),
      image: spec.image,
      command: spec.command,
      env: { ...spec.env, PORT: String(CONTAINER_PORTS.public), INTERNAL_PORT: String(CONTAINER_PORTS.internal), SCALEGATE_TASK_ID: task.taskId },
      labels: {
        ...ownLabels, [LABEL.workload]: task.workload, [LABEL.task]: task.taskId, [LABEL.incarnation]: incarnation,
        [LABEL.generation]: String(task.generation), [LABEL.spec]: fingerprint,
      },
      publish: {
        [`${CONTAINER_PORTS.public}/tcp`]: { hostIp: options.bindHost, hostPort: pair.public },
        [`${CONTAINER_PORTS.internal}/tcp`]: { hostIp: options.bindHost, hostPort: pair.internal },
      },
      // by id: should agents have created twins of the name at once, the name is ambiguous until they are removed
      network: network.id,
      ...engineLimits(spec.limits),
    });
    try {
      await engine!.start(containerId);
    } catch (error) {
      await engine!.remove(containerId).catch(() => undefined);
      throw error;
    }
    ctx.log('task-container-started', { taskId: task.taskId, incarnation, container: containerId, image: spec.image });
    return { containerId, incarnation };
  };

  /** The container an earlier agent left for this task: adopted when it runs this generation and spec, else removed. */
  async function takeOver(task: TaskStart, spec: ServiceSpec & { image: string }, fingerprint: string): Promise<ContainerTask | null> {
    const left = await engine!.list({ ...ownLabels, [LABEL.task]: task.taskId });
    let adopted: ContainerTask | null = null;
    for (const summary of left) {
      const labels = summary.Labels;
      const recordedPair = await ports.recorded(portKeyFor(task));
      const reusable = adopted === null && summary.State === 'running' && labels[LABEL.generation] === String(task.generation)
        && labels[LABEL.spec] === fingerprint && recordedPair !== undefined && (await ports.claim(portKeyFor(task), recordedPair));
      if (reusable) {
        const launch = launcher(task, spec, fingerprint, recordedPair);
        adopted = new ContainerTask(ctx, engine!, ports, task, spec, recordedPair, summary.Id, labels[LABEL.incarnation] ?? randomUUID(), true, launch);
        ctx.log('task-container-adopted', { taskId: task.taskId, container: summary.Id });
        continue;
      }
      await engine!.remove(summary.Id);
      ctx.log('task-container-replaced', { taskId: task.taskId, container: summary.Id, state: summary.State });
    }
    return adopted;
  }

  const start = async (task: TaskStart): Promise<TaskHandle> => {
    if (task.kind !== 'service') throw new DriverError('invalid-spec', `the container driver runs service tasks, not ${task.kind}`);
    const parsed = AgentServiceSpecSchema.safeParse(task.spec);
    if (!parsed.success) throw new DriverError('invalid-spec', `service spec for ${task.workload}: ${describeIssues(parsed.error)}`);
    const spec = parsed.data;
    const image = spec.image;
    if (!image || !imageDigestOf(image)) {
      throw new DriverError('invalid-spec', `service ${task.workload}: image ${image ?? '(none)'} is not pinned by digest (define the workload through the API, which resolves tags)`);
    }
    const pinned = { ...spec, image };
    const running = tasks.get(task.taskId);
    if (running?.isLive) return running; // the same start retried

    await ensureImage(image);
    const fingerprint = specFingerprint(spec);
    const adopted = await takeOver(task, pinned, fingerprint);
    if (adopted) {
      tasks.set(task.taskId, adopted);
      adopted.run();
      return adopted;
    }
    const acquisition = await ports.acquire(portKeyFor(task)).catch((error: unknown) => {
      if (error instanceof DriverError) throw error;
      throw new DriverError('placement-unavailable', `no port pair for ${task.workload}/${task.index}: ${messageOf(error)}`);
    });
    const launch = launcher(task, pinned, fingerprint, acquisition.ports);
    try {
      const { containerId, incarnation } = await launch();
      const handle = new ContainerTask(ctx, engine!, ports, task, pinned, acquisition.ports, containerId, incarnation, false, launch);
      tasks.set(task.taskId, handle);
      handle.run();
      return handle;
    } catch (error) {
      await ports.release(portKeyFor(task), acquisition.ports).catch(() => undefined);
      const code = error instanceof EngineError && error.status === 404 ? 'image-unavailable' : 'spawn-failed';
      throw new DriverError(code, `runtime ${ctx.runtimeId} could not start a container of ${image} for ${task.taskId}: ${messageOf(error)}`);
    }
  };

  return {
    kind: 'service',
    start,
    probe: async () => serviceHasNoEndpoints(),
    async sweep(isHosted) {
      if (!engine) return [];
      const removed: string[] = [];
      for (const summary of await engine.list(ownLabels)) {
        const taskId = summary.Labels[LABEL.task];
        if (taskId !== undefined && (isHosted(taskId) || tasks.has(taskId))) continue;
        await engine.remove(summary.Id);
        removed.push(taskId ?? summary.Id);
        ctx.log('task-container-stray-removed', { taskId, container: summary.Id });
      }
      return removed;
    },
    // The containers run on without the agent (static stability); a restarted agent adopts them.
    close: async () => {
      for (const task of tasks.values()) task.detach();
      tasks.clear();
    },
  };
}
