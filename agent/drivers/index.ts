// The drivers an agent hosts, one per workload kind.
import type { WorkloadKind } from '../../protocol';
import type { AgentConfig } from '../config';
import { PortAllocator } from '../ports';
import type { DriverContext, TaskDriver } from './driver';
import { createConsumerDriver } from './consumer';
import { createProcessDriver } from './process';

export function buildDrivers(config: AgentConfig, log: DriverContext['log']): Partial<Record<WorkloadKind, TaskDriver>> {
  const context: DriverContext = { runtimeId: config.id, stateDir: config.stateDir, databaseUrl: config.databaseUrl, log };
  const ports = new PortAllocator({
    stateDir: config.stateDir,
    rangeStart: config.portRangeStart,
    rangeEnd: config.portRangeEnd,
    quarantineMs: config.portQuarantineMs,
  });
  return { service: createProcessDriver(context, ports), consumer: createConsumerDriver(context) };
}
