import { sweepStaleHostNetworks } from '../../harness/hosts';

export default async function teardown(): Promise<void> {
  const stop = (globalThis as Record<string, unknown>).__scalegateStop as (() => Promise<void>) | undefined;
  await stop?.();
  // The namespaces and links of multi-host stacks (harness/hosts.ts) whose test process died before removing them.
  if (process.getuid?.() === 0) {
    const removed = sweepStaleHostNetworks();
    if (removed.length) process.stderr.write(`[global-teardown] removed stale test networks: ${removed.join(', ')}\n`);
  }
}
