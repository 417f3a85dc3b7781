// The stream exchange between subtasks (agent/drivers/stream/exchange.ts) over real TCP on
// 127.0.0.1, no mocks: backpressure holds a writer while its reader does not take, and once it takes
// every message arrives once and in order; a channel held at a barrier yields nothing until
// released; a connection that is not an expected upstream of this job and generation, presenting
// this generation's secret, never becomes a channel; a peer that sends garbage loses its channel.
//
// Nothing here asserts on elapsed time: "held" is a state (the reader's queue stopped growing over
// several polls while a flush is still pending), and every wait is a waitFor on a condition.
import net from 'node:net';
import { InputServer, OutputChannel } from '../../agent/drivers/stream/exchange';
import { BARRIER, KEYED_RECORDS, RECORD, WATERMARK, type Hello, type KeyedRecord, type WireMessage } from '../../protocol/stream-wire';
import { waitFor } from '../../harness/wait-for';
import { setTimeout as sleep } from 'node:timers/promises';

const JOB = 'clicks';
const GENERATION = 3;
const SECRET = 'generation-secret-0123456789abcdef';
const hello = (from: number, overrides: Partial<Hello> = {}): Hello => ({ job: JOB, generation: GENERATION, from, secret: SECRET, ...overrides });

/** exchange.ts QUEUE_HIGH_WATER: an input channel pauses its socket once this many messages are queued. */
const QUEUE_HIGH_WATER = 4096;
/** The most bytes one socket read hands the reader (libuv's read buffer): the messages of one chunk may overshoot the mark. */
const MAX_CHUNK_BYTES = 64 * 1024;

/** Fixed-width records, so the overshoot past the mark is bounded by a known number of lines. */
const APPENDED_AT = 1_764_547_200_000;
const keyOf = (i: number) => `user-${String(i).padStart(10, '0')}`;
const recordOf = (i: number): KeyedRecord => [RECORD, keyOf(i), APPENDED_AT];
const LINE_BYTES = JSON.stringify(recordOf(0)).length + 1;

interface Server {
  input: InputServer<KeyedRecord>;
  closes: { from: number; lastBarrier: number }[];
  refusals: string[];
  wakes: () => number;
}

const servers: InputServer<KeyedRecord>[] = [];
const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function listen(expected: number[]): Promise<Server> {
  const closes: Server['closes'] = [];
  const refusals: string[] = [];
  let wakes = 0;
  const input = await InputServer.listen({
    host: '127.0.0.1', edge: KEYED_RECORDS, job: JOB, generation: GENERATION, secret: SECRET, expected: new Set(expected),
    wake: () => { wakes++; },
    onClose: (from, lastBarrier) => closes.push({ from, lastBarrier }),
    log: (event, fields) => { if (event === 'stream input refused') refusals.push(String(fields?.reason)); },
  });
  servers.push(input);
  return { input, closes, refusals, wakes: () => wakes };
}

/** An upstream's real writer; `broken` lists why it learnt its connection closed. */
async function connect(server: Server, from: number, overrides: Partial<Hello> = {}) {
  const broken: string[] = [];
  const output = await OutputChannel.connect(100 + from, '127.0.0.1', server.input.port, hello(from, overrides), (_to, reason) => broken.push(reason));
  cleanups.push(() => output.close());
  return { output, broken };
}

/** A raw peer, for what OutputChannel never sends (no hello, garbage). */
async function rawPeer(server: Server) {
  const socket = net.connect({ host: '127.0.0.1', port: server.input.port });
  socket.on('error', () => {});
  let closed = false;
  socket.on('close', () => { closed = true; });
  cleanups.push(() => socket.destroy());
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, closed: () => closed };
}

/** Tracks whether a promise settled, without awaiting it. */
function track(promise: Promise<void>) {
  const state = { settled: false, failed: null as unknown };
  promise.then(() => { state.settled = true; }, (error: unknown) => { state.settled = true; state.failed = error; });
  return state;
}

/** Waits until `read` answers the same value on `polls` consecutive polls; answers that value. */
async function steady(what: string, read: () => number, polls = 5): Promise<number> {
  let last = -1;
  let streak = 0;
  await waitFor(what, () => {
    const now = read();
    streak = now === last ? streak + 1 : 1;
    last = now;
    return streak >= polls;
  }, { intervalMs: 20 });
  return last;
}

/** Takes every message the channel yields now. */
function takeAll(channel: { next(): WireMessage<KeyedRecord> | undefined }, into: WireMessage<KeyedRecord>[]): number {
  let n = 0;
  for (let message = channel.next(); message; message = channel.next()) {
    into.push(message);
    n++;
  }
  return n;
}

/** The first index where `received` is not record i, or -1 when every record 0..count-1 is there once, in order. */
function firstOutOfOrder(received: WireMessage<KeyedRecord>[], count: number): number {
  for (let i = 0; i < Math.max(count, received.length); i++) {
    const message = received[i];
    if (!message || message[0] !== RECORD || message[1] !== keyOf(i)) return i;
  }
  return -1;
}

describe('backpressure', () => {
  test('a reader that does not take holds its writer at a bounded queue; once it takes, the held flush resolves and every message arrives once, in order', async () => {
    const server = await listen([0]);
    const { output, broken } = await connect(server, 0);
    await waitFor('the channel admitted', () => server.input.channels.has(0));
    const channel = server.input.channels.get(0)!;

    // Push and flush batches, never calling next(), until a flush stays pending while the reader's
    // queue stops growing: the reader paused its socket at the mark, the kernel buffers filled
    // behind it, and the writer's socket refuses more.
    const BATCH = 2_000;
    const LIMIT = 5_000_000;
    let sent = 0;
    let held: { flush: Promise<void>; state: ReturnType<typeof track>; queued: number } | null = null;
    while (!held) {
      if (sent >= LIMIT) throw new Error(`no backpressure after ${sent} messages (reader queued ${channel.queued})`);
      for (let i = 0; i < BATCH; i++) output.push(recordOf(sent++));
      const flush = output.flush();
      const state = track(flush);
      // A short poll window: a flush the socket accepted settles here.
      for (let poll = 0; poll < 3 && !state.settled; poll++) await sleep(5);
      if (state.settled) continue;
      // Not settled yet: held, or merely slow? Held only if the reader's queue stops growing while the flush still waits.
      const queued = await steady('the reader queue to stop growing', () => channel.queued);
      if (!state.settled) held = { flush, state, queued };
    }

    // The writer is held by state: the flush is pending several polls after the reader's queue stopped growing.
    expect(held.state.settled).toBe(false);
    expect(channel.queued).toBe(held.queued);
    // The bound: at least the high-water mark (the reader queues that much before it pauses), at most
    // the mark plus the lines of one socket read (the read that crossed the mark is queued whole).
    expect(held.queued).toBeGreaterThanOrEqual(QUEUE_HIGH_WATER);
    expect(held.queued).toBeLessThanOrEqual(QUEUE_HIGH_WATER + Math.ceil(MAX_CHUNK_BYTES / LINE_BYTES));
    // The writer has more to send: far more was written than the reader holds (the rest waits in the buffers).
    expect(sent - held.queued).toBeGreaterThan(0);
    expect(output.pending).toBe(0);
    expect(broken).toEqual([]);

    // The reader takes: the held flush resolves, and every message arrives exactly once, in order.
    const received: WireMessage<KeyedRecord>[] = [];
    await waitFor('every message sent taken', () => {
      takeAll(channel, received);
      return received.length >= sent;
    }, { timeoutMs: 60_000, intervalMs: 5 });
    await held.flush;
    expect(held.state).toEqual({ settled: true, failed: null });

    // The writer goes on after the hold: one more batch, and the counts still add up.
    for (let i = 0; i < BATCH; i++) output.push(recordOf(sent++));
    await output.flush();
    await waitFor('the last batch taken', () => {
      takeAll(channel, received);
      return received.length >= sent;
    });
    expect(received.length).toBe(sent);
    expect(firstOutOfOrder(received, sent)).toBe(-1);
    expect(new Set(received.map((m) => m[1])).size).toBe(sent);
    expect(channel.queued).toBe(0);
    expect(server.closes).toEqual([]);
  });
});

describe('barrier hold', () => {
  test('a channel held at a barrier yields nothing until released, keeps what arrives meanwhile, then continues in order', async () => {
    const server = await listen([1]);
    const { output } = await connect(server, 1);
    // Records 0..9, barrier 7, then more records than the high-water mark behind it.
    const BEFORE = 10;
    const AFTER = QUEUE_HIGH_WATER * 2;
    for (let i = 0; i < BEFORE; i++) output.push(recordOf(i));
    output.push([WATERMARK, APPENDED_AT]);
    output.push([BARRIER, 7]);
    await output.flush();
    await waitFor('the messages up to the barrier queued', () => server.input.channels.get(1)?.queued === BEFORE + 2);
    const channel = server.input.channels.get(1)!;

    const taken: WireMessage<KeyedRecord>[] = [];
    for (let i = 0; i < BEFORE; i++) taken.push(channel.next()!);
    expect(taken).toEqual(Array.from({ length: BEFORE }, (_, i) => recordOf(i)));
    expect(channel.next()).toEqual([WATERMARK, APPENDED_AT]);
    expect(channel.next()).toEqual([BARRIER, 7]);
    expect(channel.lastBarrierReceived).toBe(7);
    channel.hold(7);
    expect(channel.heldAt).toBe(7);

    // Behind the barrier the upstream goes on writing; the held channel queues (up to its mark) but yields nothing.
    for (let i = BEFORE; i < BEFORE + AFTER; i++) output.push(recordOf(i));
    const flush = track(output.flush());
    const queued = await steady('the held channel queue to stop growing', () => channel.queued);
    expect(queued).toBeGreaterThan(0);
    for (let poll = 0; poll < 5; poll++) expect(channel.next()).toBeUndefined();
    expect(channel.queued).toBe(queued);

    const wakesBefore = server.wakes();
    channel.release();
    expect(channel.heldAt).toBeNull();
    expect(server.wakes()).toBe(wakesBefore + 1); // the processing loop is woken to take what was queued

    const after: WireMessage<KeyedRecord>[] = [];
    await waitFor('every record after the barrier taken', () => {
      takeAll(channel, after);
      return after.length >= AFTER;
    });
    await waitFor('the flush behind the hold resolved', () => flush.settled);
    expect(flush.failed).toBeNull();
    expect(after.length).toBe(AFTER);
    expect(after).toEqual(Array.from({ length: AFTER }, (_, i) => recordOf(BEFORE + i)));
    expect(server.closes).toEqual([]);
  });
});

describe('refused connections', () => {
  test.each([
    ['a wrong secret', hello(0, { secret: 'not-the-secret-0123456789abcdef' }), /secret/],
    ['a secret of another length', hello(0, { secret: 'short' }), /secret/],
    ['another job', hello(0, { job: 'views' }), /views generation 3/],
    ['another generation', hello(0, { generation: GENERATION - 1 }), /clicks generation 2/],
    ['a newer generation', hello(0, { generation: GENERATION + 1 }), /clicks generation 4/],
    ['an index that is not an upstream of this subtask', hello(9), /subtask 9 is not an input/],
  ])('%s: closed, never a channel; a valid upstream is still admitted', async (_what, greeting, reason) => {
    const server = await listen([0]);
    const refused = await connect(server, greeting.from, greeting);
    // The refused writer learns that its connection closed.
    await waitFor('the refused connection closed', () => refused.broken.length === 1);
    expect(server.input.channels.size).toBe(0);
    expect(server.refusals).toHaveLength(1);
    expect(server.refusals[0]).toMatch(reason);

    // The real upstream connects afterwards and is admitted; its records flow.
    const valid = await connect(server, 0);
    valid.output.push(recordOf(0));
    await valid.output.flush();
    await waitFor('the valid upstream admitted, its record queued', () => server.input.channels.get(0)?.queued === 1);
    expect([...server.input.channels.keys()]).toEqual([0]);
    expect(server.input.channels.get(0)!.next()).toEqual(recordOf(0));
    expect(valid.broken).toEqual([]);
    // A refusal is not a channel that ended: nothing is reported to the subtask.
    expect(server.closes).toEqual([]);
  });

  test('a second connection for an upstream already connected is refused; the first stays and keeps delivering', async () => {
    const server = await listen([0, 1]);
    const first = await connect(server, 0);
    await waitFor('the first admitted', () => server.input.channels.has(0));
    const channel = server.input.channels.get(0)!;

    const second = await connect(server, 0);
    await waitFor('the duplicate closed', () => second.broken.length === 1);
    expect(server.refusals).toEqual(['subtask 0 is connected already']);
    expect(server.input.channels.size).toBe(1);
    expect(server.input.channels.get(0)).toBe(channel);
    expect(channel.closed).toBe(false);

    first.output.push(recordOf(0));
    first.output.push([BARRIER, 1]);
    await first.output.flush();
    await waitFor('the first channel delivers', () => channel.queued === 2);
    expect(channel.next()).toEqual(recordOf(0));
    expect(channel.next()).toEqual([BARRIER, 1]);
    expect(first.broken).toEqual([]);
    expect(server.closes).toEqual([]);
    // Still waiting for upstream 1, admitted as soon as it connects.
    expect(server.input.connected([0, 1])).toBe(false);
    await connect(server, 1);
    await waitFor('both upstreams connected', () => server.input.connected([0, 1]));
  });

  test('a first line that is not a hello, or a hello that never ends, is closed before anything is read', async () => {
    const server = await listen([0]);
    const garbage = await rawPeer(server);
    garbage.socket.write(`not json\n${JSON.stringify(recordOf(0))}\n`);
    await waitFor('the garbage peer closed', () => garbage.closed());

    const endless = await rawPeer(server);
    endless.socket.write('{"job":"clicks",' + ' '.repeat(8 * 1024)); // no newline, past the hello limit
    await waitFor('the endless hello closed', () => endless.closed());

    expect(server.input.channels.size).toBe(0);
    expect(server.closes).toEqual([]);
  });

  test.each([
    ['a count update on the keyed edge', [RECORD, 'user-1', 3, APPENDED_AT]],
    ['a record without its append time', [RECORD, 'user-1']],
    ['a barrier without its id', [BARRIER]],
    ['an unknown message tag', [9, 1]],
    ['an object', { key: 'user-1' }],
  ])('%s from an admitted peer: valid JSON, not a message of this edge: the channel is closed at it, what came before is kept', async (_what, line) => {
    const server = await listen([0]);
    const peer = await rawPeer(server);
    peer.socket.write(`${JSON.stringify(hello(0))}\n${JSON.stringify(recordOf(0))}\n${JSON.stringify(line)}\n${JSON.stringify(recordOf(1))}\n`);
    await waitFor('the channel reported closed', () => server.closes.length === 1);
    const channel = server.input.channels.get(0)!;
    expect(channel.next()).toEqual(recordOf(0));
    expect(channel.next()).toBeUndefined();
  });

  test('malformed JSON from an admitted peer closes that channel without crashing; the close is reported with the last barrier it delivered', async () => {
    const server = await listen([0, 1]);
    const other = await connect(server, 1);
    const peer = await rawPeer(server);
    peer.socket.write(`${JSON.stringify(hello(0))}\n${JSON.stringify(recordOf(0))}\n${JSON.stringify([BARRIER, 4])}\n{not json\n${JSON.stringify(recordOf(1))}\n`);

    await waitFor('the bad channel reported closed', () => server.closes.length === 1);
    expect(server.closes).toEqual([{ from: 0, lastBarrier: 4 }]);
    await waitFor('the bad peer disconnected', () => peer.closed());
    const channel = server.input.channels.get(0)!;
    expect(channel.closed).toBe(true);
    // What arrived before the bad line is kept; nothing after it.
    expect(channel.next()).toEqual(recordOf(0));
    expect(channel.next()).toEqual([BARRIER, 4]);
    expect(channel.next()).toBeUndefined();

    // The process and the server live on: the other channel still delivers.
    other.output.push(recordOf(7));
    await other.output.flush();
    await waitFor('the other channel delivers', () => server.input.channels.get(1)?.queued === 1);
    expect(server.input.channels.get(1)!.next()).toEqual(recordOf(7));
    expect(other.broken).toEqual([]);
    expect(server.closes).toHaveLength(1);
  });

  test('an upstream that goes away is reported once; closing the server itself reports nothing', async () => {
    const server = await listen([0, 1]);
    const leaving = await connect(server, 0);
    const staying = await connect(server, 1);
    await waitFor('both connected', () => server.input.connected([0, 1]));
    leaving.output.push([BARRIER, 2]);
    await leaving.output.end();
    await waitFor('the ended channel reported', () => server.closes.length === 1);
    expect(server.closes).toEqual([{ from: 0, lastBarrier: 2 }]);

    await server.input.close();
    await waitFor('the staying writer learnt of the close', () => staying.broken.length === 1);
    expect(server.closes).toHaveLength(1);
  });
});
