// The drivers an agent hosts, one per workload kind.
import type { WorkloadKind } from '../../protocol';
import type { AgentConfig } from '../config';
import { PortAllocator } from '../ports';
import type { DriverContext, TaskDriver } from './driver';
import { createConsumerDriver } from './consumer';
import { createProcessDriver } from './process';
import { createStreamDriver } from './stream';

export function buildDrivers(config: AgentConfig, log: DriverContext['log']): Partial<Record<WorkloadKind, TaskDriver>> {
  // Stream data listeners bind where the agent's HTTP server does and are reached at its endpoint's host.
  const dataHost = config.endpoint ? new URL(config.endpoint).hostname : config.host;
  const context: DriverContext = { runtimeId: config.id, stateDir: config.stateDir, databaseUrl: config.databaseUrl, kafkaBrokers: config.kafkaBrokers, dataBindHost: config.host, dataHost, errorWindowMs: config.errorWindowMs, log,
    restartPolicy: {
      baseMs: config.restartBackoffMs, maxMs: config.restartBackoffMaxMs, healthyAfterMs: config.restartHealthyAfterMs,
      crashLoopRestarts: config.crashLoopRestarts, crashLoopWindowMs: config.crashLoopWindowMs,
    },
  };
  const ports = new PortAllocator({
    stateDir: config.stateDir,
    rangeStart: config.portRangeStart,
    rangeEnd: config.portRangeEnd,
    quarantineMs: config.portQuarantineMs,
  });
  return { service: createProcessDriver(context, ports), consumer: createConsumerDriver(context, { drainSkipsCommit: config.testBreak === 'drain-skips-commit' }), stream: createStreamDriver(context) };
}
