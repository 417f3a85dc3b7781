// `npm start` (scripts/start.ts → embedded/stack.ts) says "ready" only once it is: at the moment
// the line appears, the API answers /readyz, the orchestrator worker polls its task queue and
// every agent is READY. It runs against the shared Temporal server and PostgreSQL (TEMPORAL_ADDRESS
// and DATABASE_URL set, as a user with their own servers would), with a task queue of its own and
// no prebuilt workflow bundle, so its worker bundles the workflows at start as under `npm start`.
// Its Kafka broker is its own (where Java 17 is here), so that its stop is seen to end that JVM too.
import { Connection } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { kafkaUnavailable } from '../../embedded/kafka';
import { freePort, portIsFree } from '../../embedded/processes';
import { readStackFile } from '../../embedded/stack-file';
import { testEnv } from '../support/env';
import { EMBEDDED_AGENTS as AGENTS, startNpmStart, type NpmStart } from '../support/npm-start';
import { waitFor } from '../support/wait-for';
import { kafkaClient } from '../../lib/kafka';

/** The pids of the JVMs running a Kafka broker out of `home` (its data folder is <home>/kafka), from the process table. */
function stackBrokers(home: string): number[] {
  return fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.includes('kafka.Kafka') && argv.some((arg) => arg.startsWith(home));
    } catch {
      return false; // gone meanwhile
    }
  }).map(Number);
}

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
  started = await startNpmStart({ name: 'start', env: { SCALEGATE_WORKERS: '2', ...kafkaEnv }, onLine: (line) => {
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

  // SIGTERM stops all of it: exit 0, the API's, the agents' and the broker's ports free again, no
  // broker JVM left, the pointer gone. Sent twice, as an impatient Ctrl-C does: the second must not
  // kill the stack halfway through its stop.
  const printed = started.lines;
  started.process.kill('SIGTERM');
  await waitFor('the first SIGTERM taken', () => printed.includes('[scalegate] stopping (SIGTERM)'), { timeoutMs: 30_000, intervalMs: 20 });
  expect(await started.stop()).toBe(0);
  expect(started.lines.some((line) => line.startsWith('[scalegate] SIGTERM again: still stopping'))).toBe(true);
  expect(readStackFile(started.home)).toBeNull();
  for (const port of [apiPort, ...agentPorts, kafkaPort]) expect([port, await portIsFree(port)]).toEqual([port, true]);
  expect(stackBrokers(started.home)).toEqual([]);
}, 240_000);
