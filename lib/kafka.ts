// One way to reach a Kafka broker, for the control plane (partition counts, lag) and the agents
// (Kafka sources): brokers from SCALEGATE_KAFKA_BROKERS ("host:port,host:port"), KafkaJS quiet
// (its own log lines are not ours to print) and with short, bounded retries: a broker outage must
// surface as an error the caller handles (retry, refuse with broker-unavailable), never a hang.
import { Kafka, logLevel, type Admin, type KafkaConfig } from 'kafkajs';

export const KAFKA_BROKERS_ENV = 'SCALEGATE_KAFKA_BROKERS';

/** "a:9092, b:9092" → ["a:9092", "b:9092"]; an empty or missing value is no broker. */
export function parseBrokers(text: string | undefined): string[] {
  return (text ?? '').split(',').map((b) => b.trim()).filter(Boolean);
}

/** What the control plane reads from Kafka: facts for the gates, never records. */
export interface KafkaMetadata {
  /** the partition count of a topic (0: no such topic) */
  partitionCount(topic: string): Promise<number>;
}

/** A topic's partition count as the broker tells it; 0 when there is no such topic (an answer, not an outage). */
export async function topicPartitionCount(admin: Admin, topic: string): Promise<number> {
  try {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    return metadata.topics[0]?.partitions.length ?? 0;
  } catch (error) {
    // KafkaJS may wrap it once its retries ran out
    const failure = error as { type?: string; originalError?: { type?: string } };
    if ((failure.type ?? failure.originalError?.type) === 'UNKNOWN_TOPIC_OR_PARTITION') return 0;
    throw error;
  }
}

/** Kafka metadata read from the broker on each call (one short-lived admin connection). */
export function kafkaMetadata(brokers: string): KafkaMetadata {
  const kafka = kafkaClient(brokers, 'scalegate-control-plane');
  return {
    async partitionCount(topic) {
      const admin = kafka.admin();
      await admin.connect();
      try {
        return await topicPartitionCount(admin, topic);
      } finally {
        await admin.disconnect().catch(() => {});
      }
    },
  };
}

export function kafkaClient(brokers: string | readonly string[], clientId = 'scalegate', overrides: Partial<KafkaConfig> = {}): Kafka {
  const list = typeof brokers === 'string' ? parseBrokers(brokers) : [...brokers];
  if (list.length === 0) throw new Error(`no Kafka broker configured (${KAFKA_BROKERS_ENV})`);
  return new Kafka({
    clientId,
    brokers: list,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    requestTimeout: 10_000,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2_000 },
    ...overrides,
  });
}
