// The source port (issue 21): what a consumer reads, whatever holds the records, a PostgreSQL table
// (table-source.ts) or a Kafka topic (kafka-source.ts). Offsets are the source's own (a table's
// "offset" column, a Kafka partition's offsets); the consumer keeps the committed offset per
// partition in PostgreSQL and asks for the records after it, so the source never decides what was
// processed and a re-read after a rollback or a takeover is the consumer's choice.

export interface SourceRecord {
  offset: number;
  key: string;
  /** JSON text (the sink column is jsonb) */
  payload: string;
  /** when the record was appended (ms since the epoch), for latency; null when the source does not say */
  appendedMs: number | null;
}

export interface PartitionRecord extends SourceRecord {
  partition: number;
}

export interface SourcePort {
  /** "table orders" / "kafka topic orders", for details and errors */
  readonly description: string;
  /** Creates or checks what the source needs before the first read (a table, the topic's metadata). */
  prepare(): Promise<void>;
  /** The newest offset per partition (-1 when empty): the backlog and which partitions have work. */
  newestOffsets(partitions: readonly number[]): Promise<Map<number, number>>;
  /** Up to `limit` records of `partition` after offset `after`, in offset order. */
  readAfter(partition: number, after: number, limit: number): Promise<SourceRecord[]>;
  /**
   * Up to `perPartition` records of each partition after its offset in `after`, in offset order per
   * partition: a stream source reads all its partitions at once (a table in one round trip).
   */
  readEach(after: ReadonlyMap<number, number>, perPartition: number): Promise<PartitionRecord[]>;
  /** The partition no longer read here (released or drained): its reader may go. */
  forget(partition: number): Promise<void>;
  /**
   * Tells the source's own tooling how far `group` processed each partition (the last offset
   * processed): a Kafka topic mirrors it as the group's committed offsets, so lag tools see the
   * consumer; a table has no such tooling. Never where reading resumes: that is PostgreSQL's.
   */
  mirrorProcessed(group: string, lastProcessed: ReadonlyMap<number, number>): Promise<void>;
  close(): Promise<void>;
}
