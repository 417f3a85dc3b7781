// The stream exchange's wire format (DESIGN.md §5 "stream"): what one subtask sends another over
// TCP, one JSON array per line. A connection opens with a hello; every line after it is a record of
// the edge's kind, a checkpoint barrier or a watermark. Each line is checked against this format
// when it arrives (parseWireLine), so the dataflow handles typed messages, never casts: a peer that
// sends anything else is dropped before what it sent is used.

export const RECORD = 0;
export const BARRIER = 1;
export const WATERMARK = 2;

/** [1, checkpointId]: everything before it on this channel belongs to that checkpoint. */
export type BarrierMessage = readonly [typeof BARRIER, number];
/** [2, watermarkMs]: no record older than this follows on this channel. */
export type WatermarkMessage = readonly [typeof WATERMARK, number];

/** source → keyed aggregate: [0, key, appendedAtMs] */
export type KeyedRecord = readonly [typeof RECORD, string, number];
/** keyed aggregate → sink: [0, key, count, appendedAtMs]: the key's count after this record */
export type CountUpdate = readonly [typeof RECORD, string, number, number];
/** Every record kind an edge may carry. */
export type StreamRecord = KeyedRecord | CountUpdate;

/** A message of an edge whose records are R. */
export type WireMessage<R extends StreamRecord = StreamRecord> = R | BarrierMessage | WatermarkMessage;

/** The first line of a connection: who is sending, for which job generation, with its secret. */
export interface Hello {
  job: string;
  generation: number;
  /** the job-global index of the upstream subtask */
  from: number;
  secret: string;
}

/** What one edge carries: the name and the check of its records. */
export interface WireEdge<R extends StreamRecord> {
  readonly name: string;
  isRecord(message: readonly unknown[]): message is R;
}

const isFiniteNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
const isControl = (m: readonly unknown[]): m is BarrierMessage | WatermarkMessage => m.length === 2 && (m[0] === BARRIER || m[0] === WATERMARK) && isFiniteNumber(m[1]);

/** The source → keyed-aggregate edge. */
export const KEYED_RECORDS: WireEdge<KeyedRecord> = {
  name: 'keyed records',
  isRecord: (m): m is KeyedRecord => m.length === 3 && m[0] === RECORD && typeof m[1] === 'string' && isFiniteNumber(m[2]),
};

/** The keyed-aggregate → sink edge. */
export const COUNT_UPDATES: WireEdge<CountUpdate> = {
  name: 'count updates',
  isRecord: (m): m is CountUpdate => m.length === 4 && m[0] === RECORD && typeof m[1] === 'string' && Number.isInteger(m[2]) && isFiniteNumber(m[3]),
};

export class WireFormatError extends Error {}

/** One line of an edge as a message, or WireFormatError saying what is wrong with it. */
export function parseWireLine<R extends StreamRecord>(line: string, edge: WireEdge<R>): WireMessage<R> {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new WireFormatError('a line that is not JSON');
  }
  if (!Array.isArray(value)) throw new WireFormatError('a message that is not an array');
  if (edge.isRecord(value)) return value;
  if (isControl(value)) return value;
  throw new WireFormatError(`a message that is neither one of ${edge.name}, a barrier nor a watermark`);
}

/** The hello line, or null when it is not one. */
export function parseHello(line: string): Hello | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { job, generation, from, secret } = value as Record<string, unknown>;
  if (typeof job !== 'string' || !Number.isInteger(generation) || !Number.isInteger(from) || typeof secret !== 'string') return null;
  return { job, generation: generation as number, from: from as number, secret };
}
