// A Kafka topic as a consumer's source (DESIGN.md §5 "Kafka sources"). scalegate assigns the
// partitions itself, under owner fences in PostgreSQL: the broker only carries records. Each owned
// partition gets a reader of its own, a KafkaJS consumer in a single-member group of its own whose
// assigner hands it exactly that partition (KafkaJS has no manual assignment). So taking or giving
// up one partition never pauses the others (no group rebalance across partitions or tasks), and the
// consumer's committed offset in PostgreSQL, not a group offset, says where reading resumes.
//
// The reader turns KafkaJS's push into the consumer's pull: fetched records wait in a bounded
// buffer (the partition is paused on the broker side when it fills), and `readAfter(after)` hands
// out the records that follow `after`. A read that does not continue where the last one ended (a
// rolled-back batch, a takeover) reopens the reader at `after + 1`: nothing is skipped, and what is
// re-read is exactly what was never committed.
import { randomUUID } from 'node:crypto';
import { AssignerProtocol, type Admin, type Consumer, type Kafka, type KafkaMessage, type PartitionAssigner } from 'kafkajs';
import { groupOffsetWriter, kafkaClient, topicPartitionCount } from '../../../lib/kafka';
import { DriverError } from '../driver';
import type { PartitionRecord, SourcePort, SourceRecord } from './source';
import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialDelayMs } from '../../../lib/backoff';

/** records buffered per partition before its fetching pauses, and the level it resumes at */
const BUFFER_HIGH = 2_000;
const BUFFER_LOW = 500;
/** tries at opening a reader while the broker answers with retriable errors (backoff 0.5, 1, 2 s) */
const REOPEN_ATTEMPTS = 4;

export interface KafkaSourceOptions {
  brokers: string;
  topic: string;
  /** the partition count the workload declares: the broker's must agree */
  partitions: number;
  /** names the readers' transport groups: scalegate-transport-<owner>-p<partition>-<random> */
  owner: string;
  onError?: (error: unknown) => void;
}

/** An assigner that gives the only member of its group exactly one partition of one topic. */
function onePartition(topic: string, partition: number): PartitionAssigner {
  const name = `scalegate-p${partition}`;
  return () => ({
    name,
    version: 1,
    async assign({ members }) {
      return members.map((member, i) => ({
        memberId: member.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: i === 0 ? { [topic]: [partition] } : {}, userData: Buffer.alloc(0) }),
      }));
    },
    protocol({ topics }) {
      return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
    },
  });
}

/** A record's value as JSON text for the jsonb sink column: JSON as it is, anything else as a JSON string. */
export function payloadOf(value: Buffer | null): string {
  if (value === null) return 'null';
  const text = value.toString('utf8');
  try {
    JSON.parse(text);
    return text;
  } catch {
    return JSON.stringify(text);
  }
}

const recordOf = (message: KafkaMessage): SourceRecord => ({
  offset: Number(message.offset),
  key: message.key?.toString('utf8') ?? '',
  payload: payloadOf(message.value),
  appendedMs: message.timestamp ? Number(message.timestamp) : null,
});

class PartitionReader {
  private consumer: Consumer | null = null;
  private buffer: SourceRecord[] = [];
  /** the next offset the fetching side takes (anything below it is a re-fetch, dropped) */
  private acceptFrom = 0;
  /** where the reads continue: one past the last record handed out */
  private nextExpected = -1;
  private pausedHere = false;
  /** KafkaJS crashed the transport consumer (and may be restarting it): the next read reopens it at nextExpected */
  private crashed = false;
  /** closed from outside (forget, the source's close): a read still opening its consumer must not leave one running */
  private closed = false;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly partition: number,
    private readonly owner: string,
    private readonly onError: (error: unknown) => void,
  ) {}

  async read(after: number, limit: number): Promise<SourceRecord[]> {
    if (!this.consumer || this.crashed || after + 1 !== this.nextExpected) await this.reopenRetrying(after + 1);
    const records = this.buffer.splice(0, limit);
    if (records.length) this.nextExpected = records[records.length - 1].offset + 1;
    if (this.pausedHere && this.buffer.length < BUFFER_LOW) {
      this.pausedHere = false;
      this.consumer?.resume([{ topic: this.topic, partitions: [this.partition] }]);
    }
    return records;
  }

  /**
   * A broker in a passing state (its group coordinator loading, a leader moving) refuses a new
   * reader with a retriable error: retried here, briefly, so that it is not a task error; anything
   * else, or a state that lasts, is.
   */
  private async reopenRetrying(from: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.reopen(from);
      } catch (error) {
        const passing = this.crashed || (error as { retriable?: boolean }).retriable === true;
        if (this.closed || !passing || attempt >= REOPEN_ATTEMPTS) throw error;
        await sleep(exponentialDelayMs(attempt, 250, 2_000));
      }
    }
  }

  private async reopen(from: number): Promise<void> {
    await this.disconnect();
    this.refuseIfClosed();
    this.crashed = false;
    this.buffer = [];
    this.acceptFrom = from;
    this.nextExpected = from;
    this.pausedHere = false;
    const consumer = this.kafka.consumer({
      groupId: `scalegate-transport-${this.owner}-p${this.partition}-${randomUUID().slice(0, 8)}`,
      partitionAssigners: [onePartition(this.topic, this.partition)],
      sessionTimeout: 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 100,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 2_000 },
    });
    this.consumer = consumer;
    consumer.on(consumer.events.CRASH, (event) => {
      if (this.consumer !== consumer) return;
      this.crashed = true;
      // one KafkaJS restarts by itself is a passing state (reopened at the next read); one it gives up on is an error
      if (!event.payload.restart) this.onError(event.payload.error);
    });
    try {
      await consumer.connect();
      await consumer.subscribe({ topic: this.topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          if (this.consumer !== consumer) return; // a reader replaced meanwhile
          for (const message of batch.messages) {
            const offset = Number(message.offset);
            if (offset < this.acceptFrom) continue;
            this.buffer.push(recordOf(message));
            this.acceptFrom = offset + 1;
          }
          if (!this.pausedHere && this.buffer.length >= BUFFER_HIGH) {
            this.pausedHere = true;
            consumer.pause([{ topic: this.topic, partitions: [this.partition] }]);
          }
        },
      });
      // Reading starts at `from`, whatever the (empty) transport group would start from.
      consumer.seek({ topic: this.topic, partition: this.partition, offset: String(from) });
      // Closed while connecting: the close found this consumer not yet running, so it is stopped here.
      this.refuseIfClosed();
    } catch (error) {
      if (this.consumer === consumer) this.consumer = null;
      await consumer.disconnect().catch(() => {});
      throw error;
    }
  }

  private refuseIfClosed(): void {
    if (this.closed) throw new Error(`the reader of ${this.topic} partition ${this.partition} is closed`);
  }

  private async disconnect(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = null;
    await consumer?.disconnect().catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.disconnect();
  }
}

export function kafkaSource(options: KafkaSourceOptions): SourcePort {
  const kafka = kafkaClient(options.brokers, `scalegate-${options.owner}`);
  const onError = options.onError ?? (() => {});
  const readers = new Map<number, PartitionReader>();
  let admin: Admin | null = null;
  const offsetWriter = groupOffsetWriter(kafka);
  const connectedAdmin = async (): Promise<Admin> => {
    if (!admin) {
      const created = kafka.admin();
      await created.connect();
      admin = created;
    }
    return admin;
  };

  const readAfter = (partition: number, after: number, limit: number): Promise<SourceRecord[]> => {
    let reader = readers.get(partition);
    if (!reader) {
      reader = new PartitionReader(kafka, options.topic, partition, options.owner, onError);
      readers.set(partition, reader);
    }
    return reader.read(after, limit);
  };

  return {
    description: `kafka topic ${options.topic}`,
    async prepare() {
      const count = await topicPartitionCount(await connectedAdmin(), options.topic);
      if (count !== options.partitions) {
        throw new DriverError('partitions-mismatch', `kafka topic ${options.topic} has ${count} partitions on the broker; the workload declares ${options.partitions}`);
      }
    },
    async newestOffsets(partitions) {
      const offsets = await (await connectedAdmin()).fetchTopicOffsets(options.topic);
      const wanted = new Set(partitions);
      // the high watermark is the next offset to be written: the newest is one below it
      return new Map(offsets.filter((o) => wanted.has(o.partition)).map((o) => [o.partition, Number(o.high) - 1]));
    },
    readAfter,
    async readEach(after, perPartition) {
      // Each reader hands out what it has buffered (never waiting on the broker): one pass over the partitions.
      const batches = await Promise.all([...after].map(async ([partition, offset]) =>
        (await readAfter(partition, offset, perPartition)).map((record): PartitionRecord => ({ ...record, partition }))));
      return batches.flat();
    },
    async mirrorProcessed(group, lastProcessed) {
      // Kafka's committed offset is the next one to read. The group has no members (scalegate's
      // readers use transport groups of their own), and each replica commits its own partitions
      // from outside it, so replicas mirroring at once never meet (lib/kafka.ts groupOffsetWriter).
      const partitions = [...lastProcessed].map(([partition, last]) => ({ partition, offset: String(last + 1) }));
      if (partitions.length) await offsetWriter.commit(group, options.topic, partitions);
    },
    async forget(partition) {
      const reader = readers.get(partition);
      readers.delete(partition);
      await reader?.close();
    },
    async close() {
      await Promise.all([...readers.values()].map((r) => r.close()));
      readers.clear();
      const closing = admin;
      admin = null;
      await Promise.all([closing?.disconnect().catch(() => {}), offsetWriter.close()]);
    },
  };
}
