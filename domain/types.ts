// Plain JSON shapes shared by the store, the workflows and the API. Workflow state must stay plain
// JSON (no Map, Set or class instances), so these are all records and arrays.
import type { Assignment, Labels, RuntimeStatus, Workload } from './schemas';

export interface Runtime {
  id: string;
  endpoint: string;
  labels: Labels;
  slots: number;
  status: RuntimeStatus;
  /** ISO-8601 instant */
  leaseExpiresAt: string;
  fence: number;
}

export interface Placement {
  workload: string;
  /** monotonic; every write is compare-and-set on it */
  fence: number;
  /** generation of the task set; a stop-the-world replan starts a new one */
  generation: number;
  assignments: Assignment[];
}

export interface Unplaced {
  workload: string;
  reason: 'placement-unavailable';
  /** how many replicas could not be placed */
  missing: number;
}

export type { Assignment, Workload };
