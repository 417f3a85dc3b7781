// A TCP relay on a multi-host stack's bridge (harness/hosts.ts): the nodes reach a server of
// the host that listens on loopback only (the shared PostgreSQL) at <bridge address>:<port>, so their
// connections cross their links like any client's and a cut of a link cuts them. `blackhole()` is
// the host side's own partition (the control plane cut from a server while the nodes run on):
// connections stay open and nothing moves either way until `open()`, as on a dead link whose TCP
// retransmits once it heals (bytes wait in the sockets' buffers; none is dropped, so no stream is
// corrupted). A connection opened meanwhile waits, unanswered, for the link too.
import net from 'node:net';

export interface Relay {
  /** host:port the relay listens at */
  address: string;
  port: number;
  blackhole(): void;
  open(): void;
  close(): Promise<void>;
}

export async function startRelay(options: { listenHost: string; listenPort?: number; target: { host: string; port: number } }): Promise<Relay> {
  const sockets = new Set<net.Socket>();
  let cut = false;
  let waiting: (() => void)[] = [];
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    if (cut) socket.pause();
  };
  const connect = (inbound: net.Socket) => {
    const outbound = net.connect(options.target);
    track(outbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', end);
    outbound.on('error', end);
    inbound.on('close', end);
    outbound.on('close', end);
    // pipe() by hand: a drain resumes a side only while the link is up
    const forward = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk) => {
        if (!to.write(chunk)) from.pause();
      });
      to.on('drain', () => {
        if (!cut) from.resume();
      });
      from.on('end', () => to.end());
    };
    forward(inbound, outbound);
    forward(outbound, inbound);
  };
  const server = net.createServer((inbound) => {
    track(inbound);
    inbound.on('error', () => inbound.destroy());
    if (cut) waiting.push(() => connect(inbound));
    else connect(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, options.listenHost, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `${options.listenHost}:${port}`, port,
    blackhole: () => {
      cut = true;
      for (const socket of sockets) socket.pause();
    },
    open: () => {
      cut = false;
      for (const socket of sockets) socket.resume();
      const deferred = waiting;
      waiting = [];
      for (const go of deferred) go();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
