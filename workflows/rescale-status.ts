// What a rescaleOperator is asked and what it reports: its input and its status (the `status`
// query GET /v1/operations/rescale:<job> reads).
import { defineQuery } from '@temporalio/workflow';
import { z } from 'zod';
import { WorkloadName } from '../protocol/names';
import type { StreamReplanOutcome } from './stop-the-world-replan';

export const RescaleInputSchema = z.strictObject({
  job: WorkloadName,
  operator: z.string().min(1).max(63),
  parallelism: z.int().min(1).max(32768),
  reason: z.string().min(1).max(500).default('requested'),
  /** how long each step of the window may take (the pause, barrier C, the new subtasks ready) */
  stepTimeoutMs: z.int().min(1000).max(600_000).default(60_000),
});
export type RescaleInput = z.input<typeof RescaleInputSchema>;
/** The input as validated, its defaults applied. */
export type RescaleRequest = z.output<typeof RescaleInputSchema>;

/** `cancelled`: an abort or a Temporal cancellation before anything changed (the clock resumed). */
export type RescaleOutcome = 'running' | 'completed' | 'replanned' | 'compensated' | 'cancelled' | 'refused' | 'failed';

export interface RescaleStatus {
  kind: 'rescaleOperator';
  job: string;
  operator: string;
  from: number | null;
  to: number;
  phase: string;
  outcome: RescaleOutcome;
  /** hot: cut over at a barrier; false: the stop-the-world replan, and why */
  hot: boolean | null;
  reason: string | null;
  /** the cutover barrier: the last checkpoint of the old layout */
  checkpoint: number | null;
  added: string[];
  retired: string[];
  /** the retired subtasks' counters at their end: records taken in, and after barrier C (the held window: 0) */
  retiredCounts: Record<string, Record<string, number>>;
  compensation: {
    reason: string;
    /** what the replan did: its restore point, parallelism and generation */
    outcome: { restoredFrom: number | null; parallelism: StreamReplanOutcome['parallelism'] | null; generation: number | null } | null;
    /** set when a replan of the job was already running and this rescale waited for it instead */
    joined: string | null;
    /** the operator's parallelism the replan applied (null: not known); the rescale is `completed`/`replanned` only if it is `to` */
    applied?: number | null;
  } | null;
  error: string | null;
}

export const rescaleStatusQuery = defineQuery<RescaleStatus>('status');
