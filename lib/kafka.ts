// One way to reach a Kafka broker, for the control plane (partition counts, lag) and the agents
// (Kafka sources): brokers from SCALEGATE_KAFKA_BROKERS ("host:port,host:port"), KafkaJS quiet
// (its own log lines are not ours to print) and with short, bounded retries: a broker outage must
// surface as an error the caller handles (retry, refuse with broker-unavailable), never a hang.
import { AssignerProtocol, Kafka, logLevel, type Admin, type KafkaConfig } from 'kafkajs';

export const KAFKA_BROKERS_ENV = 'SCALEGATE_KAFKA_BROKERS';

/** "a:9092, b:9092" → ["a:9092", "b:9092"]; an empty or missing value is no broker. */
export function parseBrokers(text: string | undefined): string[] {
  return (text ?? '').split(',').map((b) => b.trim()).filter(Boolean);
}

/** One member of a consumer group, as the group coordinator describes it. */
export interface GroupMember {
  memberId: string;
  /** what the member calls itself (the fixture consumer: its task id) */
  clientId: string;
  /** the partitions of the topic assigned to it */
  partitions: number[];
}

/** A consumer group on one topic: who is in it, what it owns, how far behind it is. */
export interface ConsumerGroupView {
  group: string;
  topic: string;
  /** the coordinator's state: Stable once a rebalance settled; Empty with no member */
  state: string;
  /** the topic's partition count */
  partitions: number;
  members: GroupMember[];
  /** partitions of the topic no member is assigned */
  unassigned: number[];
  /** records not yet committed by the group, over every partition (end offset − committed; all retained records where it never committed) */
  lag: number;
}

/** What the control plane reads from Kafka: facts for the gates, never records. */
export interface KafkaMetadata {
  /** the partition count of a topic (0: no such topic) */
  partitionCount(topic: string): Promise<number>;
  /** a user's consumer group on a topic (a group nobody joined yet: no members, state Empty or Dead) */
  consumerGroup(group: string, topic: string): Promise<ConsumerGroupView>;
  /** each partition's end offset (the next offset to be written) */
  endOffsets(topic: string): Promise<Map<number, number>>;
}

/** Reads a consumer group's members, their assignment and its lag on `topic`. */
export async function readConsumerGroup(admin: Admin, group: string, topic: string): Promise<ConsumerGroupView> {
  const [described, ends, committed] = await Promise.all([
    admin.describeGroups([group]),
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId: group, topics: [topic] }),
  ]);
  const description = described.groups[0];
  const members = (description?.members ?? []).map((member): GroupMember => {
    // a member between join and sync has no assignment yet
    const assignment = member.memberAssignment.length ? AssignerProtocol.MemberAssignment.decode(member.memberAssignment) : null;
    return { memberId: member.memberId, clientId: member.clientId, partitions: [...(assignment?.assignment[topic] ?? [])].sort((a, b) => a - b) };
  });
  const assigned = new Set(members.flatMap((m) => m.partitions));
  const committedAt = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  let lag = 0;
  for (const end of ends) {
    const offset = committedAt.get(end.partition) ?? -1;
    lag += Math.max(0, Number(end.high) - (offset >= 0 ? offset : Number(end.low)));
  }
  return {
    group, topic, state: description?.state ?? 'Unknown', partitions: ends.length, members,
    unassigned: ends.map((e) => e.partition).filter((p) => !assigned.has(p)).sort((a, b) => a - b), lag,
  };
}

/** A topic's partition count as the broker tells it; 0 when there is no such topic (an answer, not an outage). */
export async function topicPartitionCount(admin: Admin, topic: string): Promise<number> {
  try {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    return metadata.topics[0]?.partitions.length ?? 0;
  } catch (error) {
    if (isUnknownTopic(error)) return 0;
    throw error;
  }
}

/** The broker does not (yet) know the topic or partition (KafkaJS may wrap it once its retries ran out). */
export function isUnknownTopic(error: unknown): boolean {
  const failure = error as { type?: string; originalError?: { type?: string } };
  return (failure.type ?? failure.originalError?.type) === 'UNKNOWN_TOPIC_OR_PARTITION';
}

/** Kafka metadata read from the broker on each call (one short-lived admin connection). */
export function kafkaMetadata(brokers: string): KafkaMetadata {
  const kafka = kafkaClient(brokers, 'scalegate-control-plane');
  const withAdmin = async <T>(read: (admin: Admin) => Promise<T>): Promise<T> => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      return await read(admin);
    } finally {
      await admin.disconnect().catch(() => {});
    }
  };
  return {
    partitionCount: (topic) => withAdmin((admin) => topicPartitionCount(admin, topic)),
    consumerGroup: (group, topic) => withAdmin((admin) => readConsumerGroup(admin, group, topic)),
    endOffsets: (topic) => withAdmin(async (admin) => new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]))),
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

/** The parts of KafkaJS's (unexported) cluster and broker that commit a group's offsets. */
interface KafkaJsCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  findGroupCoordinator(request: { groupId: string }): Promise<{
    offsetCommit(request: { groupId: string; groupGenerationId: number; memberId: string; topics: { topic: string; partitions: { partition: number; offset: string }[] }[] }): Promise<unknown>;
  }>;
}

/** Commits a consumer group's offsets from outside the group. */
export interface GroupOffsetWriter {
  commit(group: string, topic: string, partitions: { partition: number; offset: string }[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * Commits offsets to a group as a client outside it: an OffsetCommit with generation -1 and no
 * member id, the request Kafka's own AdminClient.alterConsumerGroupOffsets sends, which the
 * coordinator takes for a group with no active member. Writers of different partitions never meet.
 * KafkaJS's admin.setOffsets instead joins the group with a consumer to commit: a second writer that
 * met the first one's member failed ("The consumer group must have no running instances"), and
 * each commit waited out a join. KafkaJS (archived at 2.2.4, pinned by the lockfile) sends this
 * request only from a group member, so its client's own cluster, made by the constructor's private
 * factory the admin client uses too, sends it here.
 */
export function groupOffsetWriter(kafka: Kafka): GroupOffsetWriter {
  const factory = Object.getOwnPropertySymbols(kafka).find((symbol) => symbol.description === 'private:Kafka:createCluster');
  if (!factory) throw new Error('this KafkaJS has no cluster factory: the group offset writer needs KafkaJS 2.2');
  let cluster: Promise<KafkaJsCluster> | null = null;
  const connected = (): Promise<KafkaJsCluster> => {
    cluster ??= (async () => {
      const created = (kafka as unknown as Record<symbol, (options: object) => KafkaJsCluster>)[factory]({ allowAutoTopicCreation: false });
      await created.connect();
      return created;
    })().catch((error: unknown) => {
      cluster = null; // the next commit connects again
      throw error;
    });
    return cluster;
  };
  return {
    async commit(group, topic, partitions) {
      const coordinator = await (await connected()).findGroupCoordinator({ groupId: group });
      // the response's partition errors are thrown by KafkaJS's parser
      await coordinator.offsetCommit({ groupId: group, groupGenerationId: -1, memberId: '', topics: [{ topic, partitions }] });
    },
    async close() {
      const closing = cluster;
      cluster = null;
      await (await closing?.catch(() => null))?.disconnect().catch(() => {});
    },
  };
}
