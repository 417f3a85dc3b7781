// Record exchange between stream subtasks over TCP (DESIGN.md §5 "stream"): one connection per
// (upstream subtask, downstream subtask) pair, newline-delimited JSON arrays, so order within a
// channel is the wire's order (a barrier never overtakes a record). Backpressure is TCP's own: a
// writer waits for 'drain' when the socket's buffer is full, and a reader pauses its socket while
// its queue is long (a channel held for barrier alignment keeps queueing until then).
//
// A connection opens with one hello line naming the job, the generation, the upstream subtask and
// the generation's exchange secret; anything else is dropped before a single record is read. The
// lines are the typed messages of protocol/stream-wire.ts, each checked as it arrives against what
// the edge carries (a source's keyed records, an aggregate's count updates).
import { once } from 'node:events';
import net from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { BARRIER, parseHello, parseWireLine, type Hello, type StreamRecord, type WireEdge, type WireMessage } from '../../../protocol/stream-wire';

/** Messages queued per input channel before its socket is paused. */
const QUEUE_HIGH_WATER = 4096;
/** A hello line longer than this is not a hello. */
const MAX_HELLO_BYTES = 4096;

const sameSecret = (a: string, b: string): boolean => {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
};

/** Splits a byte stream into lines; a partial line waits for the rest. */
class LineSplitter {
  private rest = '';
  push(chunk: string): string[] {
    const text = this.rest + chunk;
    const lines = text.split('\n');
    this.rest = lines.pop() ?? '';
    return lines;
  }
  get pending(): number {
    return this.rest.length;
  }
}

/** One upstream subtask's channel into this subtask, carrying records R. */
export class InputChannel<R extends StreamRecord = StreamRecord> {
  private queue: WireMessage<R>[] = [];
  private head = 0;
  /** the barrier this channel delivered and is held at, until alignment releases it */
  heldAt: number | null = null;
  /** the newest watermark this channel delivered */
  watermark = 0;
  closed = false;
  /** the newest barrier that arrived on this channel (queued or taken) */
  lastBarrierReceived = 0;

  constructor(
    readonly from: number,
    private readonly socket: net.Socket,
    private readonly wake: () => void,
  ) {}

  enqueue(message: WireMessage<R>): void {
    this.queue.push(message);
    if (message[0] === BARRIER) this.lastBarrierReceived = message[1];
    if (this.queued >= QUEUE_HIGH_WATER) this.socket.pause();
  }

  get queued(): number {
    return this.queue.length - this.head;
  }

  /** The next message, unless the channel is held at a barrier. */
  next(): WireMessage<R> | undefined {
    if (this.heldAt !== null || this.head >= this.queue.length) return undefined;
    const message = this.queue[this.head++];
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (this.queued < QUEUE_HIGH_WATER / 2 && this.heldAt === null) this.socket.resume();
    return message;
  }

  hold(checkpoint: number): void {
    this.heldAt = checkpoint;
  }

  release(): void {
    this.heldAt = null;
    this.socket.resume();
    this.wake();
  }

  close(): void {
    this.socket.destroy();
  }
}

export interface InputServerOptions<R extends StreamRecord> {
  host: string;
  /** what this subtask's inputs carry: every line is checked against it */
  edge: WireEdge<R>;
  job: string;
  generation: number;
  secret: string;
  /** the upstream subtasks this subtask takes input from (a hot rescale adds to it: expect()) */
  expected: Set<number>;
  /** called when a message or a close arrives, so the processing loop wakes */
  wake: () => void;
  /** an expected channel closed before this subtask stopped; `lastBarrier` is the newest barrier it delivered */
  onClose: (from: number, lastBarrier: number) => void;
  log: (event: string, fields?: Record<string, unknown>) => void;
}

/** The listening side: accepts one authenticated channel per expected upstream subtask. */
export class InputServer<R extends StreamRecord = StreamRecord> {
  readonly channels = new Map<number, InputChannel<R>>();
  private readonly server: net.Server;
  private stopping = false;

  private constructor(private readonly options: InputServerOptions<R>) {
    this.server = net.createServer((socket) => this.accept(socket));
    this.server.on('error', (error) => options.log('stream input server error', { error: error.message }));
  }

  static async listen<R extends StreamRecord>(options: InputServerOptions<R>): Promise<InputServer<R>> {
    const input = new InputServer(options);
    input.server.listen(0, options.host);
    await once(input.server, 'listening');
    return input;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Every one of these upstream subtasks has connected. */
  connected(upstream: readonly number[]): boolean {
    return upstream.every((from) => this.channels.has(from));
  }

  /** Admits channels from more upstream subtasks (a hot rescale's new peers). */
  expect(upstream: readonly number[]): void {
    for (const from of upstream) this.options.expected.add(from);
  }

  /** Forgets a channel that ended (after the barrier it was meant to end with). */
  forget(from: number): void {
    this.channels.delete(from);
  }

  private accept(socket: net.Socket): void {
    socket.setEncoding('utf8');
    socket.setNoDelay(true);
    const lines = new LineSplitter();
    let channel: InputChannel<R> | null = null;
    socket.on('data', (chunk: string) => {
      const received = lines.push(chunk);
      if (!channel) {
        if (received.length === 0) {
          if (lines.pending > MAX_HELLO_BYTES) socket.destroy();
          return;
        }
        channel = this.admit(socket, received.shift()!);
        if (!channel) return;
      }
      try {
        for (const line of received) if (line) channel.enqueue(parseWireLine(line, this.options.edge));
      } catch (error) {
        // An authenticated peer sent something that is not a message of this edge: the channel is unusable.
        this.options.log('stream input closed: a malformed message', { from: channel.from, error: (error as Error).message });
        socket.destroy();
      }
      this.options.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (!channel || this.channels.get(channel.from) !== channel) return;
      channel.closed = true;
      this.options.wake();
      if (!this.stopping) this.options.onClose(channel.from, channel.lastBarrierReceived);
    });
  }

  /** Checks the hello; a refused connection is closed and never becomes a channel. */
  private admit(socket: net.Socket, line: string): InputChannel<R> | null {
    const hello = parseHello(line);
    if (!hello) {
      socket.destroy();
      return null;
    }
    const { job, generation, secret } = this.options;
    const { from } = hello;
    const refuse = (reason: string) => {
      this.options.log('stream input refused', { reason, from });
      socket.destroy();
      return null;
    };
    if (!sameSecret(hello.secret, secret)) return refuse('wrong exchange secret');
    if (hello.job !== job || hello.generation !== generation) return refuse(`hello for ${String(hello.job)} generation ${String(hello.generation)}`);
    if (!this.options.expected.has(from)) return refuse(`subtask ${from} is not an input of this subtask`);
    if (this.channels.has(from)) return refuse(`subtask ${from} is connected already`);
    const channel = new InputChannel<R>(from, socket, this.options.wake);
    this.channels.set(from, channel);
    return channel;
  }

  async close(): Promise<void> {
    this.stopping = true;
    for (const channel of this.channels.values()) channel.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The sending side of one channel carrying records R: buffered lines, written with TCP backpressure. */
export class OutputChannel<R extends StreamRecord = StreamRecord> {
  private buffered: string[] = [];
  private failure: Error | null = null;
  private closing = false;

  private constructor(
    readonly to: number,
    private readonly socket: net.Socket,
  ) {}

  static async connect<R extends StreamRecord>(to: number, host: string, port: number, hello: Hello, onBroken: (to: number, reason: string) => void): Promise<OutputChannel<R>> {
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    await Promise.race([
      once(socket, 'connect'),
      once(socket, 'error').then(([error]) => {
        throw error as Error;
      }),
    ]);
    const output = new OutputChannel<R>(to, socket);
    socket.on('error', (error) => {
      output.failure ??= error;
    });
    socket.on('close', () => {
      if (!output.closing) onBroken(to, output.failure?.message ?? 'the connection closed');
    });
    socket.write(`${JSON.stringify(hello)}\n`);
    return output;
  }

  push(message: WireMessage<R>): void {
    this.buffered.push(JSON.stringify(message));
  }

  get pending(): number {
    return this.buffered.length;
  }

  /** Writes what is buffered; waits while the peer's window is full (backpressure). */
  async flush(): Promise<void> {
    if (this.failure) throw this.failure;
    // A channel closed already (by its peer, or by this subtask failing) will never drain: say so instead of waiting.
    if (this.closing || this.socket.destroyed) throw new Error(`the channel to subtask ${this.to} is closed`);
    if (this.buffered.length === 0) return;
    const text = `${this.buffered.join('\n')}\n`;
    this.buffered = [];
    if (!this.socket.write(text)) {
      await Promise.race([once(this.socket, 'drain'), once(this.socket, 'close')]);
      if (this.socket.destroyed) throw this.failure ?? new Error(`the channel to subtask ${this.to} closed`);
    }
  }

  close(): void {
    this.closing = true;
    this.socket.destroy();
  }

  /** Ends the channel after everything written so far arrived (a barrier then the close: rule 4's Close). */
  async end(): Promise<void> {
    await this.flush();
    this.closing = true;
    await new Promise<void>((resolve) => this.socket.end(resolve));
  }
}
