import { proxyActivities } from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities } from '../activities';
import { parseInput, profiles, trackOperation } from './operation';

const { storePing } = proxyActivities<Activities>({ ...profiles.storeCall, summary: 'read the store: runtimes and workloads' });

export const PingInputSchema = z.object({ note: z.string().max(200).optional() }).strict();

/** Health check through the whole path: workflow → activity → PostgreSQL. */
export async function ping(input: unknown = {}): Promise<{ runtimes: number; ready: number; workloads: number; note?: string }> {
  const { note } = parseInput(PingInputSchema, input ?? {}, 'ping');
  const operation = trackOperation('ping', null);
  operation.enter('reading-store');
  const result = await storePing();
  operation.enter('done');
  return { ...result, ...(note ? { note } : {}) };
}
