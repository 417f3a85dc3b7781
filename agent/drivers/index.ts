// The drivers an agent hosts, one per workload kind.
import type { WorkloadKind } from '../../protocol';
import { advertisedHost, type AgentConfig } from '../config';
import { PortAllocator } from '../ports';
import type { DriverContext, TaskDriver } from './driver';
import { AgentServiceSpecSchema } from '../../protocol';
import { createConsumerDriver } from './consumer';
import { createContainerDriver } from './container';
import { createEngine } from './engine';
import { createProcessDriver } from './process';
import { createStreamDriver } from './stream';

/**
 * A service runs as a process, or as a container when its spec names an image: one driver for the
 * host, which sends each start to the one that runs it (drains go to the handle either returned).
 */
function routeServices(processes: TaskDriver, containers: TaskDriver): TaskDriver {
  const runsContainer = (spec: unknown): boolean => AgentServiceSpecSchema.safeParse(spec).data?.image !== undefined;
  return {
    kind: 'service',
    start: (task) => (runsContainer(task.spec) ? containers : processes).start(task),
    probe: (spec) => (runsContainer(spec) ? containers : processes).probe!(spec),
    sweep: (isHosted) => containers.sweep!(isHosted),
    close: async () => {
      await Promise.all([processes.close?.(), containers.close?.()]);
    },
  };
}

export function buildDrivers(config: AgentConfig, log: DriverContext['log']): Partial<Record<WorkloadKind, TaskDriver>> {
  // Stream data listeners and task ports bind where the agent's HTTP server does (the node's
  // address) and are reached at the address it advertises (else its endpoint's host).
  const dataHost = config.advertise ?? (config.endpoint ? new URL(config.endpoint).hostname.replace(/^\[(.*)\]$/, '$1') : advertisedHost(config));
  const context: DriverContext = { runtimeId: config.id, stateDir: config.stateDir, databaseUrl: config.databaseUrl, kafkaBrokers: config.kafkaBrokers, taskBindHost: config.host, dataBindHost: config.host, dataHost, errorWindowMs: config.errorWindowMs, log,
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
    bindHost: config.host,
  });
  const engine = config.dockerSocket ? createEngine(config.dockerSocket) : null;
  const service = routeServices(createProcessDriver(context, ports), createContainerDriver(context, engine, ports, { bindHost: config.host }));
  return { service, consumer: createConsumerDriver(context, { drainSkipsCommit: config.testBreak === 'drain-skips-commit', ownerFenceUnchecked: config.testBreak === 'owner-fence-unchecked' }), stream: createStreamDriver(context) };
}
