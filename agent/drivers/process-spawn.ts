// How a task's OS process is started (DESIGN.md §5): in the task's folder, with a minimal
// environment (nothing of the agent's secrets) plus its port pair and identity, its output appended
// to the task's log, and in its own process group so that signals reach every grandchild it spawns.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { PortPair, ServiceSpec } from '../../protocol';
import { PRIVATE_FILE_MODE } from '../state-files';
import type { DriverContext } from './driver';
import { taskFolder, taskLogPath } from './process-records';

/** What a task may see of the agent's environment (DESIGN.md §5): nothing else, no database URL, no token. */
export const BASE_ENVIRONMENT = ['PATH', 'HOME', 'LANG', 'TZ'] as const;

/**
 * A process task's whole environment: the minimal base taken from the agent's; for a service in its
 * own Kafka consumer group, the agent's brokers (the spec's env may name others), its topic and
 * group; then the spec's `env`; then its port pair and its own identity (task id and incarnation,
 * which only the driver knows), which the spec cannot override.
 */
export function taskEnvironment(
  spec: Pick<ServiceSpec, 'env' | 'kafka'>,
  ports: PortPair,
  identity: { taskId: string; incarnation: string },
  options: { agentEnvironment?: NodeJS.ProcessEnv; kafkaBrokers?: string; bindHost?: string } = {},
): Record<string, string> {
  const agentEnvironment = options.agentEnvironment ?? process.env;
  const base: Record<string, string> = {};
  for (const name of BASE_ENVIRONMENT) {
    const value = agentEnvironment[name];
    if (value !== undefined) base[name] = value;
  }
  const kafka: Record<string, string> = spec.kafka
    ? { ...(options.kafkaBrokers ? { SCALEGATE_KAFKA_BROKERS: options.kafkaBrokers } : {}), SCALEGATE_KAFKA_TOPIC: spec.kafka.topic, SCALEGATE_KAFKA_GROUP: spec.kafka.group }
    : {};
  return {
    ...base,
    ...kafka,
    ...spec.env,
    PORT: String(ports.public),
    INTERNAL_PORT: String(ports.internal),
    // the node's address (DESIGN.md §7): a task listens there, not on loopback, to be reached from other hosts
    ...(options.bindHost ? { BIND_HOST: options.bindHost } : {}),
    SCALEGATE_TASK_ID: identity.taskId,
    SCALEGATE_INCARNATION: identity.incarnation,
  };
}

/**
 * Spawns one run of the task's command, detached (its own process group), its output appended to
 * the task's log after a line naming the incarnation. Throws when the log cannot be opened or
 * spawn refuses the arguments at once (e.g. a NUL byte); a command that cannot start reports 'error'.
 */
export function spawnTaskProcess(ctx: DriverContext, run: { taskId: string; incarnation: string; spec: ServiceSpec; ports: PortPair }): ChildProcess {
  const [command, ...args] = run.spec.command as [string, ...string[]];
  const logFd = fs.openSync(taskLogPath(ctx.stateDir, run.taskId), 'a', PRIVATE_FILE_MODE);
  try {
    fs.writeSync(logFd, `--- ${new Date().toISOString()} incarnation ${run.incarnation}: ${JSON.stringify(run.spec.command)}\n`);
    // spawn throws at once for arguments it refuses (e.g. a NUL byte); that is a failed start too.
    return spawn(command, args, {
      cwd: taskFolder(ctx.stateDir, run.taskId),
      env: taskEnvironment(run.spec, run.ports, { taskId: run.taskId, incarnation: run.incarnation }, { kafkaBrokers: ctx.kafkaBrokers, bindHost: ctx.taskBindHost }),
      stdio: ['ignore', logFd, logFd],
      // Its own process group, so drain and close can signal every descendant at once.
      detached: true,
    });
  } finally {
    // The child holds its own copy of the descriptor.
    fs.closeSync(logFd);
  }
}
