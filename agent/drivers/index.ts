// The drivers an agent hosts, one per workload kind.
import type { WorkloadKind } from '../../domain/schemas';
import type { AgentConfig } from '../config';
import type { DriverContext, TaskDriver } from './driver';

export function buildDrivers(config: AgentConfig, log: DriverContext['log']): Partial<Record<WorkloadKind, TaskDriver>> {
  const context: DriverContext = { runtimeId: config.id, stateDir: config.stateDir, databaseUrl: config.databaseUrl, log };
  void context;
  return {};
}
