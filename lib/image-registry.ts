// A container image's tag resolved to its digest, once, when a workload is defined (DESIGN.md §5
// "container"): the placement then names exactly one image, and every node runs that digest. The
// registry is asked over the Distribution API (HEAD /v2/<repository>/manifests/<tag>, its
// Docker-Content-Digest header); a registry on loopback is spoken to over plain HTTP, as the
// Docker engine itself does, any other over HTTPS.

/** An image pinned by digest (protocol's imageDigestOf says the same; lib/ imports no project folder). */
const PINNED = /@sha256:[a-f0-9]{64}$/;

const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');
const DEFAULT_TIMEOUT_MS = 10_000;

export interface ImageName {
  /** host[:port] of the registry */
  registry: string;
  repository: string;
  tag: string;
}

/** `host:port/path/name:tag` → its parts; an image without a registry host is Docker Hub's (library/ for one-part names). */
export function parseImageName(image: string): ImageName {
  const withoutDigest = image.replace(PINNED, '');
  const slash = withoutDigest.indexOf('/');
  const first = slash === -1 ? '' : withoutDigest.slice(0, slash);
  const hasRegistry = first.includes('.') || first.includes(':') || first === 'localhost';
  const registry = hasRegistry ? first : 'registry-1.docker.io';
  let rest = hasRegistry ? withoutDigest.slice(slash + 1) : withoutDigest;
  if (!hasRegistry && !rest.includes('/')) rest = `library/${rest}`;
  const colon = rest.lastIndexOf(':');
  return colon === -1 ? { registry, repository: rest, tag: 'latest' } : { registry, repository: rest.slice(0, colon), tag: rest.slice(colon + 1) };
}

export const isLoopback = (registry: string): boolean => /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/.test(registry);

/** Why an image could not be pinned: `missing` (the registry has no such tag) or `unreachable`. */
export class ImageResolveError extends Error {
  constructor(
    readonly reason: 'missing' | 'unreachable',
    message: string,
  ) {
    super(message);
    this.name = 'ImageResolveError';
  }
}

/**
 * The image pinned by digest: an image already pinned is answered as it is; a tag is resolved at
 * its registry to `<registry>/<repository>@sha256:…`.
 */
export async function pinImage(image: string, options: { timeoutMs?: number } = {}): Promise<string> {
  if (PINNED.test(image)) return image;
  const name = parseImageName(image);
  const url = `${isLoopback(name.registry) ? 'http' : 'https'}://${name.registry}/v2/${name.repository}/manifests/${encodeURIComponent(name.tag)}`;
  let response: Response;
  try {
    response = await fetch(url, { method: 'HEAD', headers: { accept: MANIFEST_TYPES }, signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS) });
  } catch (error) {
    throw new ImageResolveError('unreachable', `the registry ${name.registry} did not answer for ${image}: ${(error as Error).message}`);
  }
  if (response.status === 404) throw new ImageResolveError('missing', `the registry ${name.registry} has no ${name.repository}:${name.tag}`);
  const digest = response.headers.get('docker-content-digest');
  if (!response.ok || !digest || !/^sha256:[a-f0-9]{64}$/.test(digest)) {
    throw new ImageResolveError('unreachable', `the registry ${name.registry} answered ${response.status} for ${image}${digest ? '' : ' without a digest'}`);
  }
  return `${name.registry}/${name.repository}@${digest}`;
}
