// Image references (DESIGN.md §5 "container"): what a service spec accepts, and how a name splits
// into the registry, repository and tag that pinning asks the registry about.
import { parseImageName } from '../../lib/image-registry';
import { imageDigestOf, AgentServiceSpecSchema } from '../../protocol';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

describe('parseImageName', () => {
  it.each([
    ['127.0.0.1:5000/scalegate/web:v1', { registry: '127.0.0.1:5000', repository: 'scalegate/web', tag: 'v1' }],
    ['localhost/web', { registry: 'localhost', repository: 'web', tag: 'latest' }],
    ['registry.example:443/a/b/c:1.2', { registry: 'registry.example:443', repository: 'a/b/c', tag: '1.2' }],
    ['busybox:1.36', { registry: 'registry-1.docker.io', repository: 'library/busybox', tag: '1.36' }],
    ['team/app', { registry: 'registry-1.docker.io', repository: 'team/app', tag: 'latest' }],
    [`127.0.0.1:5000/web@${DIGEST}`, { registry: '127.0.0.1:5000', repository: 'web', tag: 'latest' }],
  ])('%s', (image, expected) => {
    expect(parseImageName(image)).toEqual(expected);
  });
});

describe('a service spec', () => {
  it('runs a command or an image, and limits only with an image', () => {
    expect(AgentServiceSpecSchema.safeParse({ command: ['node', 'server.js'] }).success).toBe(true);
    expect(AgentServiceSpecSchema.safeParse({ image: `127.0.0.1:5000/web@${DIGEST}`, limits: { cpus: 0.5, memoryMiB: 64 } }).success).toBe(true);
    expect(AgentServiceSpecSchema.safeParse({}).error?.issues[0]).toMatchObject({ path: ['command'], message: 'a service runs a command or an image: give one' });
    expect(AgentServiceSpecSchema.safeParse({ command: ['x'], limits: { cpus: 1 } }).error?.issues[0]).toMatchObject({ path: ['limits'] });
  });

  it.each(['Web:1', 'web:', '/web', `web@sha256:${'a'.repeat(63)}`, 'web:tag with space'])('refuses the image %j', (image) => {
    expect(AgentServiceSpecSchema.safeParse({ image }).success).toBe(false);
  });

  it('knows a pinned image from a tag', () => {
    expect(imageDigestOf(`127.0.0.1:5000/web@${DIGEST}`)).toBe(DIGEST);
    expect(imageDigestOf('127.0.0.1:5000/web:v1')).toBeNull();
  });
});
