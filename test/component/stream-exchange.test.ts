// The stream exchange between subtasks (agent/drivers/stream/exchange.ts) over real TCP on
// 127.0.0.1: backpressure holds a writer while its reader does not take, order and counts survive,
// a held channel yields nothing until released, and a connection that is not an expected upstream
// of this job and generation, with this generation's secret, never becomes a channel.
import net from 'node:net';
import { BARRIER, InputServer, OutputChannel, RECORD, type Hello } from '../../agent/drivers/stream/exchange';
import { waitFor } from '../support/wait-for';

const SECRET = 'generation-secret-0123456789';
const hello = (from: number, overrides: Partial<Hello> = {}): Hello => ({ job: 'clicks', generation: 3, from, secret: SECRET, ...overrides });

async function listen(expected: number[], onClose: (from: number, lastBarrier: number) => void = () => {}) {
  return InputServer.listen({ host: '127.0.0.1', job: 'clicks', generation: 3, secret: SECRET, expected: new Set(expected), wake: () => {}, onClose, log: () => {} });
}

const servers: InputServer[] = [];
const outputs: OutputChannel[] = [];
afterEach(async () => {
  for (const output of outputs.splice(0)) output.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

test('a reader that does not take holds its writer (backpressure); once it takes, every message arrives once, in order', async () => {
  const input = await listen([0]);
  servers.push(input);
  const output = await OutputChannel.connect(5, '127.0.0.1', input.port, hello(0), () => {});
  outputs.push(output);
  await waitFor('the channel admitted', () => input.channels.has(0));
  const channel = input.channels.get(0)!;

  // Write until a flush is held: the reader queued up to its high-water mark and paused its socket,
  // and the kernel buffers filled behind it.
  let sent = 0;
  let pending: Promise<void> | null = null;
  let settled = false;
  while (!pending) {
    for (let i = 0; i < 2000; i++) output.push([RECORD, `key-${sent++}`, sent]);
    const flush = output.flush().then(() => { settled = true; });
    // A flush the socket accepted settles at once; a held one stays pending while the reader queues nothing more.
    const queuedBefore = channel.queued;
    await new Promise((resolve) => setImmediate(resolve));
    await waitFor('the reader queue to settle', async () => {
      const now = channel.queued;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return channel.queued === now;
    });
    if (settled) {
      settled = false;
      continue;
    }
    expect(channel.queued).toBeGreaterThanOrEqual(queuedBefore);
    pending = flush;
    if (sent > 5_000_000) throw new Error('no backpressure after 5,000,000 messages');
  }
  // Held: several polls later the flush is still pending and the reader holds a bounded queue, not everything sent.
  for (let poll = 0; poll < 5; poll++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBe(false);
  }
  expect(channel.queued).toBeLessThan(sent);

  // Take everything: the held flush completes, and every message arrives once, in order.
  const received: string[] = [];
  await waitFor('every message taken', () => {
    for (let message = channel.next(); message; message = channel.next()) received.push(message[1] as string);
    return received.length === sent;
  }, { timeoutMs: 30_000, intervalMs: 5 });
  await pending;
  expect(settled).toBe(true);
  expect(received).toEqual(Array.from({ length: sent }, (_, i) => `key-${i}`));
});

test('a channel held at a barrier yields nothing until released, then continues in order', async () => {
  const input = await listen([1]);
  servers.push(input);
  const output = await OutputChannel.connect(5, '127.0.0.1', input.port, hello(1), () => {});
  outputs.push(output);
  output.push([RECORD, 'a', 1]);
  output.push([BARRIER, 7]);
  output.push([RECORD, 'b', 2]);
  await output.flush();
  await waitFor('three messages queued', () => input.channels.get(1)?.queued === 3);
  const channel = input.channels.get(1)!;
  expect(channel.next()).toEqual([RECORD, 'a', 1]);
  expect(channel.next()).toEqual([BARRIER, 7]);
  channel.hold(7);
  expect(channel.next()).toBeUndefined();
  expect(channel.lastBarrierReceived).toBe(7);
  channel.release();
  expect(channel.next()).toEqual([RECORD, 'b', 2]);
});

describe('refused connections', () => {
  /** Connects raw, sends one hello line, and answers whether the server closed the connection. */
  const closedAfter = (port: number, line: string) =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(`${line}\n`));
      socket.on('close', () => resolve(true));
      socket.on('error', () => {});
      setTimeout(() => {
        socket.destroy();
        resolve(false);
      }, 2000);
    });

  test.each([
    ['a wrong secret', hello(0, { secret: 'not-the-secret-at-all-xxxx' })],
    ['another job', hello(0, { job: 'views' })],
    ['another generation', hello(0, { generation: 2 })],
    ['an index that is not an upstream', hello(9)],
    ['no hello at all', 'not json'],
  ])('%s: closed, never a channel', async (_what, greeting) => {
    const input = await listen([0]);
    servers.push(input);
    expect(await closedAfter(input.port, typeof greeting === 'string' ? greeting : JSON.stringify(greeting))).toBe(true);
    expect(input.channels.size).toBe(0);
  });

  test('a second connection for an upstream already connected is refused; the first stays', async () => {
    const input = await listen([0]);
    servers.push(input);
    outputs.push(await OutputChannel.connect(5, '127.0.0.1', input.port, hello(0), () => {}));
    await waitFor('the first admitted', () => input.channels.has(0));
    expect(await closedAfter(input.port, JSON.stringify(hello(0)))).toBe(true);
    expect(input.channels.size).toBe(1);
  });

  test('malformed data from an admitted peer ends that channel, reported with the last barrier it delivered', async () => {
    const closes: [number, number][] = [];
    const input = await listen([0], (from, lastBarrier) => closes.push([from, lastBarrier]));
    servers.push(input);
    const socket = net.connect({ host: '127.0.0.1', port: input.port });
    socket.on('error', () => {});
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`${JSON.stringify(hello(0))}\n${JSON.stringify([BARRIER, 4])}\n{not json\n`);
    await waitFor('the close reported', () => closes.length === 1);
    expect(closes).toEqual([[0, 4]]);
    socket.destroy();
  });
});
