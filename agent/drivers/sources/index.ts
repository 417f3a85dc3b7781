// Which source port a spec reads (a table, or a Kafka topic on this agent's brokers), and the
// connectivity probe of that source from this runtime: one answer for the consumer driver and the
// stream source.
import type { Pool } from 'pg';
import type { KafkaSource, ProbeAnswer, ProbeResult } from '../../../protocol';
import { DriverError, type DriverContext } from '../driver';
import { probeTable } from '../table-probe';
import { kafkaSource } from './kafka-source';
import type { SourcePort } from './source';
import { tableSource } from './table-source';
import { messageOf } from '../../../lib/errors';

export type { PartitionRecord, SourcePort, SourceRecord } from './source';

/** What a spec says about its source: a table or a topic, and the partition count it declares. */
export interface SourceSpec {
  source: string | KafkaSource;
  partitions: number;
}

/**
 * The source port of a spec. `owner` names the Kafka readers' transport groups (the task), `who`
 * the reader in errors ("consumer c-1", "stream subtask 0").
 */
export function openSource(spec: SourceSpec, options: { ctx: DriverContext; pool: Pool; owner: string; who: string; onError: (error: unknown) => void }): SourcePort {
  if (typeof spec.source === 'string') return tableSource(options.pool, spec.source);
  const brokers = options.ctx.kafkaBrokers;
  if (!brokers) {
    throw new DriverError('placement-unavailable', `${options.who} reads kafka topic ${spec.source.kafka.topic}, but runtime ${options.ctx.runtimeId} has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)`);
  }
  return kafkaSource({ brokers, topic: spec.source.kafka.topic, partitions: spec.partitions, owner: options.owner, onError: options.onError });
}

/** Can this runtime read the spec's source: its table, or its topic with the partition count the spec declares? */
export async function probeSource(ctx: DriverContext, spec: SourceSpec): Promise<ProbeResult> {
  if (typeof spec.source === 'string') return probeTable(ctx, spec.source, 'source');
  const topic = spec.source.kafka.topic;
  if (!ctx.kafkaBrokers) return { ok: false, detail: `runtime ${ctx.runtimeId} has no Kafka brokers (SCALEGATE_KAFKA_BROKERS) for topic ${topic}` };
  const source = kafkaSource({ brokers: ctx.kafkaBrokers, topic, partitions: spec.partitions, owner: `probe-${ctx.runtimeId}` });
  try {
    await source.prepare();
    return { ok: true, detail: `kafka topic ${topic} is readable from ${ctx.kafkaBrokers} with ${spec.partitions} partitions` };
  } catch (error) {
    return { ok: false, detail: `kafka topic ${topic} on ${ctx.kafkaBrokers}: ${messageOf(error)}` };
  } finally {
    await source.close();
  }
}

/** Probes a spec's source and its sink table at once; a spec that did not parse answers its reason for both. */
export async function probeSourceAndSink(ctx: DriverContext, spec: (SourceSpec & { sink: string }) | { invalid: string }): Promise<ProbeAnswer> {
  if ('invalid' in spec) {
    const refused = { ok: false, detail: spec.invalid };
    return { source: refused, destination: refused };
  }
  const [source, destination] = await Promise.all([probeSource(ctx, spec), probeTable(ctx, spec.sink, 'destination')]);
  return { source, destination };
}
