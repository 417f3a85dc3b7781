// `npm start` (scripts/start.ts → embedded/stack.ts) says "ready" only once it is: at the moment
// the line appears, the API answers /readyz, the orchestrator worker polls its task queue and
// every agent is READY. It runs against the shared Temporal server and PostgreSQL (TEMPORAL_ADDRESS
// and DATABASE_URL set, as a user with their own servers would), with a task queue of its own; its
// workers load the workflow bundle npm start keeps for this source tree (the run's shared servers
// bundled it into that cache: embedded/workflow-bundle-cache.ts), as a second npm start does.
// Its Kafka broker is its own (where Java 17 is here), so that its stop is seen to end that JVM too,
// and so are its Docker engine and image registry (where Docker is here): a container service
// defined as the banner says runs on an agent, and the stop leaves no engine process, container,
// bridge interface or port behind.
import { Connection } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { LABEL, WORKLOAD_NETWORK } from '../../agent/drivers/container';
import { readStat, type ProcStat } from '../../agent/drivers/proc';
import { createEngine } from '../../agent/drivers/engine';
import { containerSupportMissing } from '../../embedded/container-engine';
import { kafkaUnavailable } from '../../embedded/kafka';
import { freePort, portIsFree } from '../../embedded/processes';
import { readStackFile } from '../../embedded/stack-file';
import { bridgeExists, bridgeOf } from '../support/bridges';
import { testEnv } from '../../harness/env';
import { EMBEDDED_AGENTS as AGENTS, startNpmStart, type NpmStart } from '../support/npm-start';
import { waitFor } from '../../harness/wait-for';
import { kafkaClient } from '../../lib/kafka';

/** Every process with its arguments and /proc stat (agent/drivers/proc.ts), from the process table. */
function processTable(): { pid: number; argv: string[]; stat: ProcStat }[] {
  return fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).flatMap((entry) => {
    const stat = readStat(Number(entry));
    try {
      return stat ? [{ pid: stat.pid, argv: fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0'), stat }] : [];
    } catch {
      return []; // gone meanwhile
    }
  });
}
/** The processes whose arguments name `home` (the stack's agents, the broker's JVM, dockerd, containerd, its shims, docker-registry). */
const processesOf = (home: string) => processTable().filter((p) => p.argv.some((arg) => arg.includes(home)));
/** The stack's own process in process group `group` (npm's): the innermost one running scripts/start.ts. */
function stackProcess(group: number): number {
  const running = processTable().filter((p) => p.stat.pgrp === group && p.argv.some((arg) => arg.endsWith('scripts/start.ts')));
  const innermost = running.filter((p) => !running.some((q) => q.stat.ppid === p.pid));
  expect(innermost).toHaveLength(1);
  return innermost[0]!.pid;
}
/** The pids of the JVMs running a Kafka broker out of `home` (its data folder is <home>/kafka). */
const stackBrokers = (home: string): number[] => processesOf(home).filter((p) => p.argv.includes('kafka.Kafka')).map((p) => p.pid);

/** temporal.api.enums.v1.TaskQueueType */
const TASK_QUEUE_TYPE = { workflow: 1, activity: 2 } as const;

let connection: Connection;
let started: NpmStart | null = null;

beforeAll(async () => {
  connection = await Connection.connect({ address: testEnv().temporalAddress });
});
afterAll(async () => {
  await started?.cleanUp();
  await connection?.close();
});

test('prints the banner, then "ready" once the API, the worker (polling) and every agent (READY) are', async () => {
  // What held when "ready" appeared: asked at once, before anything else is read.
  let atReady: Promise<{ workflowPollers: number; activityPollers: number; readyz: number; runtimes: Record<string, string> }> | null = null;
  const pollers = async (taskQueueType: number) =>
    ((await connection.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: started!.taskQueue }, taskQueueType })).pollers ?? []).length;
  const observe = async () => {
    const { apiUrl, tokens } = started!;
    const [workflowPollers, activityPollers, readyz, state] = await Promise.all([
      pollers(TASK_QUEUE_TYPE.workflow),
      pollers(TASK_QUEUE_TYPE.activity),
      fetch(`${apiUrl}/readyz`).then((r) => r.status),
      fetch(`${apiUrl}/v1/state`, { headers: { authorization: `Bearer ${tokens.viewer}` } }).then((r) => r.json() as Promise<{ runtimes: { id: string; status: string }[] }>),
    ]);
    const runtimes = Object.fromEntries(state.runtimes.map((r) => [r.id, r.status]));
    return { workflowPollers, activityPollers, readyz, runtimes };
  };
  // Two workers (SCALEGATE_WORKERS): the control plane scaled out; ready waits for both. A broker
  // of its own on a free port (not the shared one), when one can run here.
  const kafkaOff = kafkaUnavailable();
  const kafkaPort = await freePort();
  const kafkaEnv = { SCALEGATE_KAFKA: 'on', SCALEGATE_KAFKA_BROKERS: '', SCALEGATE_KAFKA_PORT: String(kafkaPort) };
  // An engine and a registry of its own (not the run's: no DOCKER_HOST), the registry on a free port, when Docker is here.
  const containersOff = containerSupportMissing();
  const registryPort = await freePort();
  const containersEnv = { SCALEGATE_CONTAINERS: 'on', DOCKER_HOST: '', SCALEGATE_REGISTRY_PORT: String(registryPort) };
  // npm in a process group of its own, as from a terminal, so that its stop below is a Ctrl-C's: the signal reaches every process of the group.
  started = await startNpmStart({ name: 'start', env: { SCALEGATE_WORKERS: '2', ...kafkaEnv, ...containersEnv }, onLine: (line) => {
    if (atReady === null && line.startsWith('[scalegate] ready')) atReady = observe();
  } });
  await started.ready;
  const { lines, apiUrl, apiPort, agentPorts, taskQueue } = started;

  const seen = await atReady!;
  expect(seen).toMatchObject({ readyz: 200, runtimes: Object.fromEntries(AGENTS.map((id) => [id, 'READY'])) });
  expect(seen.workflowPollers).toBeGreaterThanOrEqual(2);
  expect(seen.activityPollers).toBeGreaterThanOrEqual(2);

  // The banner with the URLs comes before "ready", and so does what the start waited for.
  const readyAt = lines.findIndex((l) => l.startsWith('[scalegate] ready'));
  const bannerAt = lines.indexOf('scalegate is running');
  expect(bannerAt).toBeGreaterThanOrEqual(0);
  expect(bannerAt).toBeLessThan(readyAt);
  expect(lines.slice(bannerAt, readyAt).join('\n')).toContain(`API            ${apiUrl}`);
  expect(lines.slice(bannerAt, readyAt).join('\n')).toContain(`task queue ${taskQueue}`);
  expect(lines.slice(0, bannerAt).some((l) => l.startsWith('[scalegate] waiting for'))).toBe(true);
  expect(lines[readyAt]).toBe(`[scalegate] ready: the API, 2 workers (polling task queue ${taskQueue}) and ${AGENTS.join(', ')} (READY)`);

  // The CLI's pointer to this stack (no secret in it), and the banner's way to the Temporal CLI.
  const kafkaBrokers = kafkaOff ? null : `127.0.0.1:${kafkaPort}`;
  expect(readStackFile(started.home)).toEqual({ apiUrl, uiUrl: expect.stringMatching(/^http/), temporalAddress: testEnv().temporalAddress, namespace: 'default', taskQueue, kafkaBrokers });
  expect(lines.slice(bannerAt, readyAt).join('\n')).toContain('npx scalegate temporal workflow list');
  // Its ports are not the defaults: a plain `temporal` and the README's commands are told this stack's.
  expect(lines.slice(bannerAt, readyAt)).toContain(`                 plain temporal: TEMPORAL_ADDRESS=${testEnv().temporalAddress} temporal workflow list`);
  expect(lines.slice(bannerAt, readyAt).find((l) => l.startsWith('  shell '))).toMatch(new RegExp(`^  shell +export SCALEGATE_API_URL=${apiUrl} SCALEGATE_HOME=${started.home} PG='postgres://[^']+'$`));

  // The Kafka line: its broker (one JVM, answering for its cluster) or why there is none.
  const kafkaLine = lines.slice(bannerAt, readyAt).find((l) => l.startsWith('  kafka: '));
  const brokers = stackBrokers(started.home);
  if (kafkaBrokers) {
    expect(kafkaLine).toBe(`  kafka: ${kafkaBrokers}   (broker data in ${path.join(started.home, 'kafka')})`);
    expect(brokers).toHaveLength(1);
    const admin = kafkaClient(kafkaBrokers).admin();
    await admin.connect();
    expect((await admin.describeCluster()).brokers).toEqual([expect.objectContaining({ nodeId: 1, port: kafkaPort })]);
    await admin.disconnect();
  } else {
    expect(kafkaLine).toBe(`  kafka: off (${kafkaOff})`);
    expect(brokers).toEqual([]);
  }

  // The containers line: its engine and registry, the image it built and how to run it; a
  // container service PUT as the banner says runs on an agent and answers. Or why there are none.
  const banner = lines.slice(bannerAt, readyAt);
  const containersLine = banner.find((l) => l.startsWith('  containers: '));
  const containerDir = path.join(started.home, 'containers');
  const taken: number[] = [];
  let bridge: string | null = null;
  if (containersOff) {
    expect(containersLine).toBe(`  containers: off (${containersOff})`);
  } else {
    const socket = path.join(containerDir, 'engine', 'd.sock');
    expect(containersLine).toBe(`  containers: engine unix://${socket}   registry 127.0.0.1:${registryPort}   (data in ${containerDir})`);
    const image = /^ {2}image +(\S+) .*pinned: (\S+)\)$/.exec(banner.find((l) => l.startsWith('  image ')) ?? '');
    expect(image?.[1]).toBe(`127.0.0.1:${registryPort}/scalegate/web:v1`);
    const printedBody = /^ +-d '(.*)'$/.exec(banner.find((l) => l.trimStart().startsWith("-d '")) ?? '')?.[1];
    const body = JSON.parse(printedBody ?? 'null') as { spec: { image: string } };
    expect(body.spec.image).toBe(image![1]);
    const put = await fetch(`${apiUrl}/v1/workloads/web`, {
      method: 'PUT', headers: { authorization: `Bearer ${started.tokens.operator}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    expect([put.status, ((await put.json()) as { spec: { image: string } }).spec.image]).toEqual([201, image![2]]);
    const engine = createEngine(socket);
    const container = await waitFor('the container service ready on an agent', async () => {
      const state = (await (await fetch(`${apiUrl}/v1/state`, { headers: { authorization: `Bearer ${started!.tokens.viewer}` } })).json()) as { workloads: { name: string; ready: number }[] };
      if (state.workloads.find((w) => w.name === 'web')?.ready !== 1) return null;
      const [running] = await engine.list({ [LABEL.workload]: 'web' });
      return running;
    }, { timeoutMs: 60_000, intervalMs: 200 });
    expect(AGENTS).toContain(container.Labels[LABEL.runtime]);
    expect((await engine.inspect(container.Id))?.Config.Image).toBe(image![2]);
    const published = container.Ports?.find((p) => p.PrivatePort === 8080)?.PublicPort;
    expect(await (await fetch(`http://127.0.0.1:${published}/index.html`)).text()).toBe('v1\n');
    taken.push(registryPort, published!);
    // The workload network's bridge interface (br- and the network's id), gone once the stack stops.
    bridge = bridgeOf(`unix://${socket}`, WORKLOAD_NETWORK);
    expect(bridgeExists(bridge)).toBe(true);
    expect(processesOf(started.home).some((p) => path.basename(p.argv[0]) === 'dockerd')).toBe(true);
  }

  // SIGTERM to the process group (a terminal's Ctrl-C signals the group) stops all of it: exit 0, the API's, the agents', the broker's, the registry's and the
  // container's ports free again, no process naming the state folder left (no broker JVM, no
  // dockerd, containerd, shim or registry), no bridge interface, the pointer gone. Sent twice, as an impatient Ctrl-C does: the second must not
  // kill the stack halfway through its stop. And the stack is too busy to take the signal at once
  // (stopped for half a second, as a loaded machine may keep it): nothing between npm and the stack
  // may take that for a hung process and SIGKILL it (tsx's CLI did within 60 ms, leaving the
  // Docker engine of its own process group running).
  const printed = started.lines;
  const stack = stackProcess(started.process.child.pid!);
  process.kill(stack, 'SIGSTOP');
  process.kill(-started.process.child.pid!, 'SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 500)); // the scenario itself: half a second unanswered
  const survivedThePause = (() => {
    try {
      process.kill(stack, 'SIGCONT');
      return true;
    } catch {
      return false; // ESRCH: killed while it could not answer
    }
  })();
  expect(survivedThePause).toBe(true);
  await waitFor('the first SIGTERM taken', () => printed.includes('[scalegate] stopping (SIGTERM)'), { timeoutMs: 30_000, intervalMs: 20 });
  expect(await started.stop()).toBe(0);
  expect(started.lines.some((line) => line.startsWith('[scalegate] SIGTERM again: still stopping'))).toBe(true);
  expect(readStackFile(started.home)).toBeNull();
  for (const port of [apiPort, ...agentPorts, kafkaPort, ...taken]) expect([port, await portIsFree(port)]).toEqual([port, true]);
  expect(processesOf(started.home)).toEqual([]);
  if (bridge) expect(bridgeExists(bridge)).toBe(false);
}, 240_000);

test('a start whose workflow bundle cannot be kept stops what it started: exit 1, naming why, nothing of it left running', async () => {
  // A real fault: the cache folder is a file, so the bundle built beside the servers' start cannot
  // be written. Its own PostgreSQL (DATABASE_URL unset) is what must not outlive the failed start.
  const notAFolder = path.join(testEnv().tmpDir, 'cache-is-a-file');
  fs.writeFileSync(notAFolder, '');
  const failed = await startNpmStart({ name: 'startfails', env: { SCALEGATE_CACHE_DIR: notAFolder, DATABASE_URL: '', SCALEGATE_PG_PORT: String(await freePort()), SCALEGATE_KAFKA: 'off', SCALEGATE_CONTAINERS: 'off' } });
  try {
    await expect(failed.ready).rejects.toThrow(/exited with 1/);
    expect(failed.lines.join('\n')).toMatch(/failed to start: .*ENOTDIR[\s\S]*\[scalegate\] stopped/);
    expect(processesOf(failed.home)).toEqual([]);
  } finally {
    await failed.cleanUp();
  }
});
