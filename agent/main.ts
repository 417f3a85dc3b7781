// Runtime agent entry point: one process per node. Serves the task API, registers, heartbeats.
import { PORT_RECORDS_FILE } from './ports';
import { agentEndpoint, parseAgentConfig } from './config';
import { buildDrivers } from './drivers';
import { TaskHost } from './host';
import { CREDENTIAL_FILE, LeaseKeeper } from './lease';
import { buildAgentServer } from './server';
import { FENCE_RECORDS_FILE, RECEIPT_RECORDS_FILE, TASK_RECORDS_FILE, tightenStateDir, untilStateDirWritable } from './state-files';

/** One JSON line per event; a field that cannot be serialised never loses the line. */
function makeLog(runtime: string) {
  return (event: string, fields: Record<string, unknown> = {}) => {
    const at = new Date().toISOString();
    let line: string;
    try {
      line = JSON.stringify({ at, runtime, event, ...fields });
    } catch (error) {
      line = JSON.stringify({ at, runtime, event, unloggable: error instanceof Error ? error.message : String(error) });
    }
    console.log(line);
  };
}

function describeFault(fault: unknown): Record<string, unknown> {
  if (fault instanceof Error) return { error: fault.message, name: fault.name, stack: fault.stack };
  return { error: String(fault) };
}

async function main() {
  const config = parseAgentConfig();
  const log = makeLog(config.id);
  // The state folder holds the runtime's credential, the task records, port pairs, fences and
  // receipts: private to this user, re-checked at every start (waited for while it refuses).
  await untilStateDirWritable(
    () => tightenStateDir(config.stateDir, [CREDENTIAL_FILE, TASK_RECORDS_FILE, FENCE_RECORDS_FILE, RECEIPT_RECORDS_FILE, PORT_RECORDS_FILE]),
    log,
  );

  // Last resort. Every known fault of a task is handled where it happens (the task is failed with
  // the reason); should one slip through anyway, the agent logs it and keeps serving, because
  // exiting would take every task of this node down with it (DESIGN.md §3, static stability).
  // Whoever reads the agent's output (a supervisor, npm start, a pipe) may go away before the agent
  // does: its output then has nowhere to go, and a write's EPIPE must neither stop the agent nor
  // become an uncaught exception whose own log line fails again (a loop that burned a core).
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  process.on('uncaughtException', (error, origin) => log('uncaught-exception', { origin, ...describeFault(error) }));
  process.on('unhandledRejection', (reason) => log('unhandled-rejection', describeFault(reason)));

  const host = new TaskHost(buildDrivers(config, log), { stateDir: config.stateDir, log, runtimeId: config.id });
  const endpoint = agentEndpoint(config);
  const lease = new LeaseKeeper(config, endpoint, {
    reports: () => host.list(),
    // Only what a heartbeat answer names is stopped; every other task runs on.
    revoke: async (taskIds, reason) => {
      if (taskIds.length) log('revoking tasks', { taskIds, reason });
      await host.revoke(taskIds, reason);
    },
    log,
  });
  const server = buildAgentServer({ id: config.id, credential: () => lease.currentCredential, host, fence: () => lease.currentFence, labels: config.labels });

  // The agent's own shutdown (SIGTERM, or Ctrl-C under `npm start`) is the one path besides the
  // control plane's drains, plans and revocations that stops tasks: the agent is being taken down
  // on purpose. A SIGKILLed agent stops nothing: its processes run on, and the next start adopts them.
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('stopping', { signal });
    lease.stop();
    try {
      await server.close();
      await host.close();
    } catch (error) {
      log('stop-failed', describeFault(error));
    }
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));

  // Its API accepts only this runtime's credential, and answers 503 until the agent has registered.
  await server.listen({ host: config.host, port: config.port });
  log('listening', { endpoint, labels: config.labels, stateDir: config.stateDir });
  // The tasks of the previous incarnation first, whether or not the control plane can be reached
  // (static stability): process tasks adopt the processes left running, consumers start again.
  // Nothing can race this: the API answers 503 until the registration that follows.
  await host.restore();
  if (stopping) return;
  // Registration and heartbeats run in the background from here, retrying with backoff for as
  // long as it takes; no failure of theirs stops a task.
  lease.start();
}

main().catch((error) => {
  console.error(`scalegate agent failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
