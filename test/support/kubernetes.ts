// A real Kubernetes control plane for the Kubernetes runtime's tests (issue 37): etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler 1.36.1 and kwok, from the cache that
// scripts/kubernetes.ts provisions, on free loopback ports with a static token (system:masters),
// and two kwok nodes labelled by zone. kwok marks their pods Running and Ready without running
// anything; what a pod "does" is played by test/fixtures/kube-drain.js (load reports, drain
// acknowledgements) and by test/support/pod-network.ts (what it serves). Started by the test file
// that needs it (only its run pays the ~6 s), stopped by it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { ensureKubernetes } from '../../embedded/kubernetes';
import { freePort, stopChild } from '../../embedded/processes';
import { createKubernetesClient, type KubernetesClient } from '../../lib/kubernetes';
import { waitFor } from '../../harness/wait-for';
import { egressSelectorConfiguration, startPodNetwork, type PodNetwork } from './pod-network';

export const CLUSTER = 'scalegate-test';
const TOKEN = 'scalegate-test-admin-token';

export interface KubernetesControlPlane {
  /** the kubeconfig (context CLUSTER), what SCALEGATE_KUBECONFIG takes */
  kubeconfig: string;
  server: string;
  client: KubernetesClient;
  /** what the API server reaches when it proxies to a pod (test/support/pod-network.ts): the test says what each pod serves */
  pods: PodNetwork;
  nodes: string[];
  dir: string;
  stop(): Promise<void>;
}

/** Two kwok nodes, zone a and zone b, with `allocatable` each. */
export function kwokNode(name: string, zone: string, allocatable: { cpu: string; memory: string; pods: string }) {
  return {
    apiVersion: 'v1', kind: 'Node',
    metadata: { name, annotations: { 'kwok.x-k8s.io/node': 'fake' }, labels: { type: 'kwok', 'topology.kubernetes.io/zone': zone, 'kubernetes.io/hostname': name } },
    spec: { taints: [{ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' }] },
    status: { allocatable, capacity: allocatable },
  };
}

export async function startKubernetes(options: { nodeAllocatable?: { cpu: string; memory: string; pods: string } } = {}): Promise<KubernetesControlPlane> {
  const { dir: bin } = ensureKubernetes(() => {}, { compile: false });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-kube-'));
  const [etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
  const server = `https://127.0.0.1:${apiPort}`;
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  fs.writeFileSync(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }));
  fs.writeFileSync(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  fs.writeFileSync(path.join(dir, 'tokens.csv'), `${TOKEN},admin,admin,system:masters\n`);
  const kubeconfig = path.join(dir, 'kubeconfig');
  fs.writeFileSync(kubeconfig, [
    'apiVersion: v1', 'kind: Config',
    `clusters: [{name: ${CLUSTER}, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: admin, user: {token: ${TOKEN}}}]`,
    `contexts: [{name: ${CLUSTER}, context: {cluster: ${CLUSTER}, user: admin}}]`,
    `current-context: ${CLUSTER}`, '',
  ].join('\n'));

  const client = createKubernetesClient(CLUSTER, { server, token: TOKEN, insecure: true });
  const pods = await startPodNetwork(path.join(dir, 'pods.sock'), () => client);
  fs.writeFileSync(path.join(dir, 'egress.yaml'), egressSelectorConfiguration(pods.socketPath));

  const children: ChildProcess[] = [];
  const start = (name: string, args: string[]) => {
    const log = fs.openSync(path.join(dir, `${name}.log`), 'a');
    const child = spawn(path.join(bin, name === 'kcm' ? 'kube-controller-manager' : name === 'sched' ? 'kube-scheduler' : name), args, { cwd: dir, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    children.push(child);
    return child;
  };
  const stop = async () => {
    for (const child of [...children].reverse()) await stopChild(child, 5_000);
    await pods.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const logTail = () => ['etcd', 'kube-apiserver', 'kcm', 'sched', 'kwok']
    .map((name) => path.join(dir, `${name}.log`)).filter((f) => fs.existsSync(f))
    .map((f) => `${path.basename(f)}:\n${fs.readFileSync(f, 'utf8').split('\n').slice(-15).join('\n')}`).join('\n');
  try {
    start('etcd', [
      '--name', 'kube', '--data-dir', path.join(dir, 'etcd-data'),
      '--listen-client-urls', `http://127.0.0.1:${etcdClient}`, '--advertise-client-urls', `http://127.0.0.1:${etcdClient}`,
      '--listen-peer-urls', `http://127.0.0.1:${etcdPeer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster', `kube=http://127.0.0.1:${etcdPeer}`, '--listen-metrics-urls', '', '--unsafe-no-fsync',
    ]);
    start('kube-apiserver', [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`, '--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', `--secure-port=${apiPort}`,
      `--cert-dir=${path.join(dir, 'certs')}`, '--service-account-key-file=sa.pub', '--service-account-signing-key-file=sa.key',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local', '--service-cluster-ip-range=10.0.0.0/24',
      '--token-auth-file=tokens.csv', '--authorization-mode=RBAC', '--anonymous-auth=false', '--enable-priority-and-fairness=false',
      '--egress-selector-config-file=egress.yaml',
    ]);
    const failFast = { timeoutMs: 60_000, intervalMs: 200, context: logTail };
    await waitFor('kube-apiserver ready', async () => {
      try {
        await client.request('GET', '/readyz');
        return true;
      } catch {
        return null;
      }
    }, failFast);
    start('kcm', [
      `--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1', `--secure-port=${kcmPort}`,
      '--service-account-private-key-file=sa.key', '--use-service-account-credentials=false',
    ]);
    start('sched', [`--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1', `--secure-port=${schedPort}`]);
    start('kwok', [
      `--kubeconfig=${kubeconfig}`, `--config=${path.join(bin, 'kwok-stages.yaml')}`, '--manage-all-nodes=false',
      '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake', '--cidr=10.0.1.0/24', '--node-ip=10.0.1.1',
      `--server-address=127.0.0.1:${kwokPort}`, '--node-lease-duration-seconds=40',
    ]);
    const allocatable = options.nodeAllocatable ?? { cpu: '2', memory: '4Gi', pods: '110' };
    const nodes = ['kwok-a', 'kwok-b'];
    await Promise.all(nodes.map((name, i) => client.request('POST', '/api/v1/nodes', kwokNode(name, i === 0 ? 'a' : 'b', allocatable))));
    await waitFor('kwok nodes Ready and the default service account', async () => {
      try {
        const list = await client.request('GET', '/api/v1/nodes');
        const ready = (list.items as any[]).filter((n) => n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'));
        await client.request('GET', '/api/v1/namespaces/default/serviceaccounts/default');
        return ready.length === nodes.length ? true : null;
      } catch {
        return null;
      }
    }, failFast);
    return { kubeconfig, server, client, pods, nodes, dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The cluster name of the API proxy's context (startApiProxy). */
export const PROXIED = 'scalegate-test-proxied';

export interface ApiProxy {
  /** a kubeconfig with both contexts: CLUSTER (the API server) and PROXIED (through this proxy) */
  kubeconfig: string;
  /** runs before a request is forwarded (a nemesis: the test changes the cluster first); null: none */
  beforeForward: ((request: { method: string; path: string }) => Promise<void>) | null;
  stop(): Promise<void>;
}

/**
 * An HTTPS proxy in front of the API server (serving the API server's own certificate): what goes
 * through it reaches the real API server unchanged, but the test may act on the cluster just before
 * a request is forwarded, so that the request meets a cluster that moved (a real 409, not a fake).
 */
export async function startApiProxy(kube: KubernetesControlPlane): Promise<ApiProxy> {
  const upstream = new URL(kube.server);
  const agent = new https.Agent({ keepAlive: true, rejectUnauthorized: false });
  const certs = path.join(kube.dir, 'certs');
  const proxy: ApiProxy = { kubeconfig: path.join(kube.dir, 'kubeconfig-with-proxy'), beforeForward: null, stop: async () => {} };
  const server = https.createServer({ cert: fs.readFileSync(path.join(certs, 'apiserver.crt')), key: fs.readFileSync(path.join(certs, 'apiserver.key')) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      try {
        await proxy.beforeForward?.({ method: req.method ?? 'GET', path: req.url ?? '/' });
      } catch (error) {
        res.writeHead(502).end(`the test's nemesis failed: ${(error as Error).message}`);
        return;
      }
      const out = https.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, agent }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      out.on('error', (error) => res.writeHead(502).end(error.message));
      out.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  fs.writeFileSync(proxy.kubeconfig, [
    'apiVersion: v1', 'kind: Config',
    `clusters: [{name: ${CLUSTER}, cluster: {server: "${kube.server}", insecure-skip-tls-verify: true}}, {name: ${PROXIED}, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: admin, user: {token: ${TOKEN}}}]`,
    `contexts: [{name: ${CLUSTER}, context: {cluster: ${CLUSTER}, user: admin}}, {name: ${PROXIED}, context: {cluster: ${PROXIED}, user: admin}}]`,
    `current-context: ${CLUSTER}`, '',
  ].join('\n'));
  proxy.stop = async () => {
    agent.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return proxy;
}
