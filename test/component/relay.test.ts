// The multi-host stack's TCP relay (harness/relay.ts) on real loopback sockets: it forwards both
// ways, and a blackhole holds every byte (sent before or during it, on connections old and new)
// until the link opens again, then delivers them in order, none lost: a stalled link, not a
// corrupted stream.
import net from 'node:net';
import { startRelay, type Relay } from '../../harness/relay';
import { waitFor } from '../../harness/wait-for';

let echo: net.Server;
let relay: Relay;
/** every socket of the test, so that a failed case leaves nothing holding the servers open */
const opened = new Set<net.Socket>();

beforeAll(async () => {
  echo = net.createServer((socket) => {
    opened.add(socket);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  relay = await startRelay({ listenHost: '127.0.0.1', target: { host: '127.0.0.1', port: (echo.address() as net.AddressInfo).port } });
});
afterAll(async () => {
  for (const socket of opened) socket.destroy();
  await relay?.close();
  await new Promise<void>((resolve) => echo.close(() => resolve()));
});

function client(port = relay.port): { socket: net.Socket; received: () => string } {
  const socket = net.connect(port, '127.0.0.1');
  opened.add(socket);
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => { text += chunk; });
  return { socket, received: () => text };
}

test('a blackhole holds the bytes of old and new connections and delivers them, in order, when the link opens', async () => {
  const old = client();
  old.socket.write('one;');
  await waitFor('the echo through the relay', () => old.received() === 'one;', { timeoutMs: 5_000, intervalMs: 10 });
  relay.blackhole();
  old.socket.write('two;');
  const fresh = client();
  fresh.socket.write('three;');
  // A round trip on a second relay that stays open, sent after them: once it is back, the held
  // bytes would have been back too, had they passed.
  const control = await startRelay({ listenHost: '127.0.0.1', target: { host: '127.0.0.1', port: (echo.address() as net.AddressInfo).port } });
  const probe = client(control.port);
  probe.socket.write('ping;');
  await waitFor('the round trip on the open relay', () => probe.received() === 'ping;', { timeoutMs: 5_000, intervalMs: 10 });
  expect({ old: old.received(), fresh: fresh.received() }).toEqual({ old: 'one;', fresh: '' });
  probe.socket.destroy();
  await control.close();
  relay.open();
  await waitFor('the held bytes delivered', () => old.received() === 'one;two;' && fresh.received() === 'three;', {
    timeoutMs: 5_000, intervalMs: 10, context: () => JSON.stringify({ old: old.received(), fresh: fresh.received() }),
  });
  old.socket.destroy();
  fresh.socket.destroy();
});
