// A small client of the Kubernetes API (issue 37): JSON over HTTPS with the credentials of a
// kubeconfig (SCALEGATE_KUBECONFIG: a context per cluster, bearer token or client certificate,
// CA data or insecure-skip-tls-verify) or of the pod's service account (in-cluster). The runtime
// port (runtimes/kubernetes.ts) is its only user.
//
// Why not @kubernetes/client-node: since 1.0 it is ESM only, which jest's CommonJS module loader
// (the test stacks load the activities) cannot require without transforming node_modules, and it
// depends on a newer @types/node than the one pinned here (a second Node typing in the tree). The
// calls the port makes are a dozen GETs, PATCHes and one PUT: plain HTTPS says them directly.
import fs from 'node:fs';
import https from 'node:https';
import { parse as parseYaml } from 'yaml';

export interface KubernetesCredentials {
  /** https://host:port */
  server: string;
  token?: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure?: boolean;
}

/** A refusal by the API server, with its HTTP status and the Status object's reason. */
export class KubernetesApiError extends Error {
  constructor(readonly status: number, readonly reason: string, message: string) {
    super(message);
    this.name = 'KubernetesApiError';
  }
}

export interface KubernetesClient {
  readonly cluster: string;
  /** The API server's JSON answer, of the shape the caller names (runtimes/kubernetes.ts names the fields it reads); it is not checked here. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a declared boundary: the Kubernetes API's objects are untyped JSON (no client library, see above); the tests read them loosely
  request<T = any>(method: string, path: string, body?: unknown, contentType?: string): Promise<T>;
  /** A GET whose answer is text (a pod's metrics through the API server's proxy), at most TEXT_ANSWER_LIMIT_BYTES. */
  getText(path: string): Promise<string>;
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

interface Kubeconfig {
  clusters?: { name: string; cluster: { server: string; 'certificate-authority-data'?: string; 'certificate-authority'?: string; 'insecure-skip-tls-verify'?: boolean } }[];
  users?: { name: string; user: { token?: string; 'token-file'?: string; 'client-certificate-data'?: string; 'client-key-data'?: string; 'client-certificate'?: string; 'client-key'?: string } }[];
  contexts?: { name: string; context: { cluster: string; user: string } }[];
  'current-context'?: string;
}

const fromBase64 = (data: string | undefined): Buffer | undefined => (data ? Buffer.from(data, 'base64') : undefined);
const fromFile = (file: string | undefined): Buffer | undefined => (file ? fs.readFileSync(file) : undefined);

/**
 * The credentials for `cluster`: in a kubeconfig, the context of that name (else the one whose
 * cluster has that name); without a kubeconfig, the pod's service account, whatever the name.
 */
export function credentialsFor(cluster: string, kubeconfigPath: string | undefined): KubernetesCredentials {
  if (!kubeconfigPath) {
    const host = process.env.KUBERNETES_SERVICE_HOST;
    if (!host || !fs.existsSync(`${SERVICE_ACCOUNT}/token`)) {
      throw new Error(`no Kubernetes cluster "${cluster}": SCALEGATE_KUBECONFIG is not set and this process runs in no pod with a service account`);
    }
    return {
      server: `https://${host.includes(':') ? `[${host}]` : host}:${process.env.KUBERNETES_SERVICE_PORT ?? 443}`,
      token: fs.readFileSync(`${SERVICE_ACCOUNT}/token`, 'utf8').trim(),
      ca: fs.readFileSync(`${SERVICE_ACCOUNT}/ca.crt`),
    };
  }
  const config = parseYaml(fs.readFileSync(kubeconfigPath, 'utf8')) as Kubeconfig;
  const contexts = config.contexts ?? [];
  const context = contexts.find((c) => c.name === cluster) ?? contexts.find((c) => c.context.cluster === cluster);
  if (!context) {
    throw new Error(`no Kubernetes cluster "${cluster}" in ${kubeconfigPath}: its contexts are ${contexts.map((c) => c.name).join(', ') || 'none'}`);
  }
  const entry = config.clusters?.find((c) => c.name === context.context.cluster)?.cluster;
  const user = config.users?.find((u) => u.name === context.context.user)?.user ?? {};
  if (!entry) throw new Error(`${kubeconfigPath}: context "${context.name}" names cluster "${context.context.cluster}", which it does not define`);
  return {
    server: entry.server,
    insecure: entry['insecure-skip-tls-verify'] === true,
    ca: fromBase64(entry['certificate-authority-data']) ?? fromFile(entry['certificate-authority']),
    token: user.token ?? (user['token-file'] ? fs.readFileSync(user['token-file'], 'utf8').trim() : undefined),
    cert: fromBase64(user['client-certificate-data']) ?? fromFile(user['client-certificate']),
    key: fromBase64(user['client-key-data']) ?? fromFile(user['client-key']),
  };
}

/** The most of a text answer (a pod's metrics through the API server's proxy) read: beyond it the answer is refused. */
export const TEXT_ANSWER_LIMIT_BYTES = 1 << 20;

export function createKubernetesClient(cluster: string, credentials: KubernetesCredentials): KubernetesClient {
  const agent = new https.Agent({
    keepAlive: true, ca: credentials.ca, cert: credentials.cert, key: credentials.key, rejectUnauthorized: !credentials.insecure,
  });
  /** One call: the answer's status and text (at most `limitBytes` of it: more is an error). */
  const send = (method: string, path: string, options: { body?: unknown; contentType?: string; accept: string; limitBytes?: number }) => {
    const url = new URL(path, credentials.server);
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    return new Promise<{ status: number; text: string; url: URL }>((resolve, reject) => {
      const req = https.request(url, {
        method, agent, timeout: 15_000,
        headers: {
          accept: options.accept,
          ...(credentials.token ? { authorization: `Bearer ${credentials.token}` } : {}),
          ...(payload ? { 'content-type': options.contentType ?? 'application/json', 'content-length': payload.length } : {}),
        },
      }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (options.limitBytes !== undefined && size > options.limitBytes) {
            req.destroy(new Error(`${method} ${url.pathname} on cluster ${cluster}: the answer is over ${options.limitBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), url }));
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${url.pathname} on cluster ${cluster}: no answer in 15 s`)));
      req.on('error', reject);
      req.end(payload);
    });
  };
  /** A refusal: the API server's Status object (reason, message), or whatever else it said. */
  const refusal = (method: string, url: URL, status: number, text: string) => {
    let parsed: { reason?: string; message?: string } | null = null;
    try {
      parsed = JSON.parse(text) as { reason?: string; message?: string };
    } catch {
      parsed = null;
    }
    return new KubernetesApiError(status, parsed?.reason ?? 'Unknown', `${method} ${url.pathname} on cluster ${cluster}: ${status} ${(parsed?.message ?? text.slice(0, 200)).trim()}`);
  };
  const succeeded = (status: number) => status >= 200 && status < 300;
  return {
    cluster,
    async request<T>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
      const { status, text, url } = await send(method, path, { body, contentType, accept: 'application/json' });
      if (!succeeded(status)) throw refusal(method, url, status, text);
      try {
        return (text ? JSON.parse(text) : null) as T;
      } catch {
        return { message: text.slice(0, 500) } as T;
      }
    },
    async getText(path: string): Promise<string> {
      const { status, text, url } = await send('GET', path, { accept: 'text/plain, */*', limitBytes: TEXT_ANSWER_LIMIT_BYTES });
      if (!succeeded(status)) throw refusal('GET', url, status, text);
      return text;
    },
  };
}

/** One client per cluster name, made on first use. */
export function kubernetesClients(kubeconfigPath: string | undefined): (cluster: string) => KubernetesClient {
  const clients: Record<string, KubernetesClient> = {};
  return (cluster) => (clients[cluster] ??= createKubernetesClient(cluster, credentialsFor(cluster, kubeconfigPath)));
}
