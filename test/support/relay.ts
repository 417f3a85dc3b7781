// A TCP relay on a multi-host stack's bridge (test/support/hosts.ts): the nodes reach a server of
// the host that listens on loopback only (the shared PostgreSQL) at <bridge address>:<port>, so their
// connections cross their links like any client's and a cut of a link cuts them. `blackhole()` is
// the host side's own partition (the control plane cut from a server while the nodes run on):
// connections stay open and nothing passes either way until `open()`, as on a dead link.
import net from 'node:net';

export interface Relay {
  /** host:port the relay listens at */
  address: string;
  port: number;
  blackhole(): void;
  open(): void;
  close(): Promise<void>;
}

export async function startRelay(options: { listenHost: string; target: { host: string; port: number } }): Promise<Relay> {
  const sockets = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(options.target);
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    const forward = (from: net.Socket, to: net.Socket) => from.on('data', (chunk) => {
      if (!cut) to.write(chunk);
    });
    forward(inbound, outbound);
    forward(outbound, inbound);
    inbound.on('end', () => outbound.end());
    outbound.on('end', () => inbound.end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, options.listenHost, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `${options.listenHost}:${port}`, port,
    blackhole: () => { cut = true; },
    open: () => { cut = false; },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
