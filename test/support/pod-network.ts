// The test cluster's pod network. kwok's pods run no container, and the addresses kwok gives them
// (its --cidr) route nowhere on this machine, so the kube-apiserver reaches its pods as a managed
// cluster's does through Konnectivity: its "cluster" egress goes as HTTP CONNECT over a unix socket
// (--egress-selector-config-file) to this server, which answers for each pod as the pod's app
// would: the metrics the test gives that pod, in Prometheus's text format. Everything up to the
// socket is real: the API server's pod proxy, its authorization, its egress dialer.
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import type { KubernetesClient } from '../../lib/kubernetes';

export interface PodRef {
  name: string;
  namespace: string;
}

export interface PodNetwork {
  socketPath: string;
  /** What a pod serves, on any path: these values (a name ending _total is a counter); null: it refuses the connection. */
  metricsOf: (pod: PodRef) => Record<string, number> | null;
  /** Every tunnel the API server opened, as "pod-name ip:port" (the pod at that address then; "?": none). */
  connects: string[];
  stop(): Promise<void>;
}

/** Prometheus text exposition of `values`: a name ending `_total` is typed a counter, any other a gauge. */
export function exposition(values: Record<string, number>): string {
  return Object.entries(values)
    .map(([name, value]) => `# TYPE ${name} ${name.endsWith('_total') ? 'counter' : 'gauge'}\n${name} ${value}\n`)
    .join('');
}

export async function startPodNetwork(socketPath: string, client: () => KubernetesClient): Promise<PodNetwork> {
  // The pod an address belongs to is looked up at each request, not once per tunnel: kwok hands a
  // deleted pod's address to a new pod, and the API server keeps its tunnels to an address open.
  const addressOf = new WeakMap<net.Socket, string>();
  const podAt = async (ip: string): Promise<PodRef | null> => {
    const pods = (await client().request<{ items: { metadata: PodRef; status?: { phase?: string } }[] }>('GET', `/api/v1/pods?fieldSelector=${encodeURIComponent(`status.podIP=${ip}`)}`)).items;
    const pod = pods.find((p) => p.status?.phase === 'Running')?.metadata ?? pods[0]?.metadata;
    return pod ? { name: pod.name, namespace: pod.namespace } : null;
  };
  const network: PodNetwork = { socketPath, metricsOf: () => null, connects: [], stop: async () => {} };
  // The pods' app: one HTTP server that each tunnelled connection is handed to.
  const app = http.createServer((req, res) => {
    void (async () => {
      const ip = addressOf.get(req.socket as net.Socket);
      const pod = ip ? await podAt(ip) : null;
      const values = pod ? network.metricsOf(pod) : null;
      if (!values) {
        res.writeHead(503).end('no metrics\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(exposition(values));
    })().catch((error: Error) => res.writeHead(500).end(error.message));
  });
  const proxy = http.createServer((_req, res) => res.writeHead(405).end());
  proxy.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const target = req.url ?? '';
    const ip = target.replace(/:\d+$/, '');
    void (async () => {
      const pod = await podAt(ip);
      network.connects.push(`${pod?.name ?? '?'} ${target}`);
      if (!pod || network.metricsOf(pod) === null) {
        socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
        return;
      }
      addressOf.set(socket, ip);
      socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
      if (head.length) socket.unshift(head);
      app.emit('connection', socket);
    })().catch(() => socket.destroy());
  });
  fs.rmSync(socketPath, { force: true });
  await new Promise<void>((resolve) => proxy.listen(socketPath, resolve));
  network.stop = async () => {
    proxy.closeAllConnections();
    app.closeAllConnections();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  };
  return network;
}

/** The kube-apiserver's egress selector: its "cluster" egress (pods, services, nodes) as HTTP CONNECT over `socketPath`. */
export function egressSelectorConfiguration(socketPath: string): string {
  return [
    'apiVersion: apiserver.k8s.io/v1beta1',
    'kind: EgressSelectorConfiguration',
    'egressSelections:',
    '- name: cluster',
    '  connection:',
    '    proxyProtocol: HTTPConnect',
    '    transport:',
    '      uds:',
    `        udsName: ${socketPath}`,
    '',
  ].join('\n');
}
