// The Docker Engine API (v1.41: Debian's dockerd 20.10, and podman 4.3's compatible socket) over its
// unix socket, through undici (the Node.js project's HTTP client; a keep-alive Pool per socket):
// the dozen calls the container driver makes, typed, each bounded in time. Chosen on evidence
// (bench/engine-client.ts): undici beside dockerode and node:http; see docs/architecture.md. Where podman answers
// otherwise than dockerd, the call takes both (test/component/podman-driver.test.ts): a network
// that exists already is its 500, not a 409, and its stats' system_cpu_usage is the host's busy
// CPU time (cgroup v1 cpuacct.usage), not all CPU time, so CPU use is measured against `read`.
import { errors, Pool } from 'undici';

export const ENGINE_API_VERSION = 'v1.41';
const CALL_TIMEOUT_MS = 30_000;
/** A pull may take longer than a call: layers come over the network. */
const PULL_TIMEOUT_MS = 300_000;

/** An answer of the engine outside 2xx, with its status and the engine's message. */
export class EngineError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

export interface ContainerSummary {
  Id: string;
  Names: string[];
  Labels: Record<string, string>;
  State: string;
  /** the published ports (PublicPort is absent for a port not published) */
  Ports?: { IP?: string; PrivatePort: number; PublicPort?: number; Type: string }[];
}

export interface ContainerInspect {
  Id: string;
  Image: string;
  Config: { Labels: Record<string, string>; Image: string };
  State: { Status: string; Running: boolean; ExitCode: number; StartedAt: string; FinishedAt: string; OOMKilled: boolean; Error: string };
  HostConfig: { Memory: number; NanoCpus: number };
  RestartCount: number;
}

export interface ContainerStats {
  /** when the engine took the sample (RFC 3339, nanoseconds); both engines give it */
  read: string;
  cpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage?: number; online_cpus?: number };
  memory_stats: { usage?: number; limit?: number };
}

export interface ContainerCreate {
  name: string;
  image: string;
  command?: string[];
  env: Record<string, string>;
  labels: Record<string, string>;
  /** container port (e.g. "8080/tcp") → host address and port it is published on */
  publish: Record<string, { hostIp: string; hostPort: number }>;
  memoryBytes?: number;
  nanoCpus?: number;
  network: string;
}

export interface Engine {
  readonly socketPath: string;
  ping(): Promise<void>;
  /** the image's id when the engine holds `ref`, else null */
  imageId(ref: string): Promise<string | null>;
  /** pulls `ref` (a repository@digest or repository:tag); throws EngineError with the registry's word when it cannot */
  pull(ref: string): Promise<void>;
  /**
   * creates a bridge network unless it exists, asking for inter-container communication off;
   * answers its id (the earliest network of the name, should agents have created twins at once:
   * the twins are removed), whether this call created it, and the engine's warnings (podman: the
   * ICC option is not a recognized option)
   */
  ensureNetwork(name: string): Promise<{ id: string; created: boolean; warnings: string[] }>;
  /** removes the networks ensureNetwork created (with their bridge interfaces) */
  removeNetworks(): Promise<void>;
  create(spec: ContainerCreate): Promise<string>;
  start(id: string): Promise<void>;
  /** the engine's stop: SIGTERM, then SIGKILL after `graceSeconds` */
  stop(id: string, graceSeconds: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** null when no such container exists */
  inspect(id: string): Promise<ContainerInspect | null>;
  /** every container (running or not) that carries all of `labels` */
  list(labels: Record<string, string>): Promise<ContainerSummary[]>;
  stats(id: string): Promise<ContainerStats | null>;
}

interface Answer {
  status: number;
  body: string;
}

/**
 * One call on the engine's socket. Bounded in time by undici's own timers: its answer must begin
 * within `timeoutMs`, and its body may not stall for longer (a pull streams progress all along).
 */
async function request(client: Pool, socketPath: string, method: string, path: string, body: unknown, timeoutMs: number): Promise<Answer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  try {
    const answer = await client.request({
      method: method as 'GET', path: `/${ENGINE_API_VERSION}${path}`, body: payload, headersTimeout: timeoutMs, bodyTimeout: timeoutMs,
      headers: payload === undefined ? {} : { 'content-type': 'application/json' },
    });
    return { status: answer.statusCode, body: await answer.body.text() };
  } catch (error) {
    if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
      throw new Error(`the engine at ${socketPath} did not answer ${method} ${path} within ${timeoutMs} ms`);
    }
    throw error;
  }
}

/** The engine's own message of an error answer ({"message": ...}), else the raw body. */
function engineMessageOf(answer: Answer): string {
  try {
    const parsed = JSON.parse(answer.body) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: the body as it is
  }
  return answer.body.trim().slice(0, 500) || `HTTP ${answer.status}`;
}

/**
 * Orders two creation times as the engine writes them (RFC 3339, nanoseconds with trailing zeros
 * dropped, so as text ".5Z" sorts after ".123456789Z").
 */
export function compareCreated(a: string, b: string): number {
  const nanos = (created: string): [number, number] => {
    const fraction = /\.(\d+)/.exec(created)?.[1] ?? '';
    return [Date.parse(created.replace(/\.\d+/, '')), Number(fraction.padEnd(9, '0').slice(0, 9))];
  };
  const [secondsA, fractionA] = nanos(a);
  const [secondsB, fractionB] = nanos(b);
  return secondsA - secondsB || fractionA - fractionB;
}

export function createEngine(socketPath: string): Engine {
  // A pool of keep-alive connections: a long call (a stop that waits out the grace, a stats sample)
  // never holds up the others, as one connection would. Idle sockets are unref'd by undici: an
  // engine client never holds a process open.
  const client = new Pool('http://localhost', { socketPath });
  const call = async (method: string, path: string, body?: unknown, options: { allow?: number[]; timeoutMs?: number } = {}): Promise<Answer> => {
    const answer = await request(client, socketPath, method, path, body, options.timeoutMs ?? CALL_TIMEOUT_MS);
    if ((answer.status < 200 || answer.status >= 300) && !(options.allow ?? []).includes(answer.status)) {
      throw new EngineError(answer.status, `${method} ${path.split('?')[0]}: ${engineMessageOf(answer)}`);
    }
    return answer;
  };
  const json = <T>(answer: Answer): T => JSON.parse(answer.body) as T;

  return {
    socketPath,
    async ping() {
      await call('GET', '/_ping');
    },
    async imageId(ref) {
      const answer = await call('GET', `/images/${encodeURIComponent(ref)}/json`, undefined, { allow: [404] });
      return answer.status === 404 ? null : json<{ Id: string }>(answer).Id;
    },
    async pull(ref) {
      const answer = await call('POST', `/images/create?fromImage=${encodeURIComponent(ref)}`, undefined, { timeoutMs: PULL_TIMEOUT_MS });
      // A failure after the answer began comes as a progress line {"error": ...}.
      for (const line of answer.body.split('\n')) {
        if (!line.trim()) continue;
        let parsed: { error?: unknown };
        try {
          parsed = JSON.parse(line) as { error?: unknown };
        } catch {
          continue;
        }
        if (typeof parsed.error === 'string') throw new EngineError(answer.status, `pull ${ref}: ${parsed.error}`);
      }
    },
    async ensureNetwork(name) {
      const filters = encodeURIComponent(JSON.stringify({ name: [name] }));
      // Every network of that name, the earliest first (the name filter matches substrings). A
      // list never fails on a name that matches two networks, as GET /networks/<name> does.
      const named = async () => json<{ Id: string; Name: string; Created: string }[]>(await call('GET', `/networks?filters=${filters}`))
        .filter((network) => network.Name === name)
        .sort((a, b) => compareCreated(a.Created, b.Created) || a.Id.localeCompare(b.Id));
      let networks = await named();
      let created: { id: string; warnings: string[] } | null = null;
      if (networks.length === 0) {
        try {
          const body = json<{ Id: string; Warning?: string }>(await call('POST', '/networks/create', {
            Name: name, Driver: 'bridge', CheckDuplicate: true,
            Options: { 'com.docker.network.bridge.enable_icc': 'false' },
            Labels: { 'io.scalegate.network': 'workloads' },
          }));
          created = { id: body.Id, warnings: body.Warning ? [body.Warning] : [] };
        } catch (error) {
          // Another agent on this engine created it meanwhile: dockerd answers 409, podman 500
          // ("network already exists"). Whatever the status, the network being there now is success.
          if (!(error instanceof EngineError)) throw error;
          networks = await named();
          if (networks.length === 0) throw error;
        }
        if (created) networks = await named();
      }
      // The engine's duplicate check is not atomic: agents that create it at once may each get a
      // network of that name, and the name is then ambiguous to every later lookup by name. Every
      // agent keeps the earliest and starts its containers on it by id; whoever sees a twin
      // removes it (one an engine will not remove, being in use, stays harmless: nothing asks by name).
      const [kept, ...twins] = networks;
      if (!kept) throw new EngineError(404, `network ${name}: the engine lists none after creating it`);
      for (const twin of twins) await call('DELETE', `/networks/${twin.Id}`, undefined, { allow: [403, 404, 409, 500] });
      return created?.id === kept.Id ? { id: kept.Id, created: true, warnings: created.warnings } : { id: kept.Id, created: false, warnings: [] };
    },
    async removeNetworks() {
      const filters = encodeURIComponent(JSON.stringify({ label: ['io.scalegate.network=workloads'] }));
      const networks = json<{ Id: string }[]>(await call('GET', `/networks?filters=${filters}`));
      for (const network of networks) await call('DELETE', `/networks/${network.Id}`, undefined, { allow: [404] });
    },
    async create(spec) {
      const exposed: Record<string, object> = {};
      const bindings: Record<string, { HostIp: string; HostPort: string }[]> = {};
      for (const [containerPort, host] of Object.entries(spec.publish)) {
        exposed[containerPort] = {};
        bindings[containerPort] = [{ HostIp: host.hostIp, HostPort: String(host.hostPort) }];
      }
      const answer = await call('POST', `/containers/create?name=${encodeURIComponent(spec.name)}`, {
        Image: spec.image,
        ...(spec.command ? { Cmd: spec.command } : {}),
        Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
        Labels: spec.labels,
        ExposedPorts: exposed,
        HostConfig: {
          PortBindings: bindings,
          NetworkMode: spec.network,
          ...(spec.memoryBytes ? { Memory: spec.memoryBytes, MemorySwap: spec.memoryBytes } : {}),
          ...(spec.nanoCpus ? { NanoCpus: spec.nanoCpus } : {}),
          // the agent supervises restarts (DESIGN.md §3 "Supervision"), not the engine
          RestartPolicy: { Name: 'no' },
        },
      });
      return json<{ Id: string }>(answer).Id;
    },
    async start(id) {
      await call('POST', `/containers/${encodeURIComponent(id)}/start`, undefined, { allow: [304] });
    },
    async stop(id, graceSeconds) {
      await call('POST', `/containers/${encodeURIComponent(id)}/stop?t=${Math.max(0, Math.ceil(graceSeconds))}`, undefined, {
        allow: [304, 404], timeoutMs: CALL_TIMEOUT_MS + graceSeconds * 1000,
      });
    },
    async remove(id) {
      await call('DELETE', `/containers/${encodeURIComponent(id)}?force=true&v=true`, undefined, { allow: [404] });
    },
    async inspect(id) {
      const answer = await call('GET', `/containers/${encodeURIComponent(id)}/json`, undefined, { allow: [404] });
      return answer.status === 404 ? null : json<ContainerInspect>(answer);
    },
    async list(labels) {
      const filters = JSON.stringify({ label: Object.entries(labels).map(([key, value]) => `${key}=${value}`) });
      return json<ContainerSummary[]>(await call('GET', `/containers/json?all=true&filters=${encodeURIComponent(filters)}`));
    },
    async stats(id) {
      const answer = await call('GET', `/containers/${encodeURIComponent(id)}/stats?stream=false`, undefined, { allow: [404, 409] });
      return answer.status === 200 ? json<ContainerStats>(answer) : null;
    },
  };
}
