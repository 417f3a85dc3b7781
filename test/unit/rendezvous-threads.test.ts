// A cold placement pass on both cores (activities/rendezvous-threads.ts): worker threads compute
// the rendezvous keys into the pass's cache, the pass itself stays sequential, and its result is
// exactly the single-threaded pass's. In-process worker threads; one child process runs the threads
// from a bundle, as the test stacks' worker does.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRendezvousThreads } from '../../activities/rendezvous-threads';
import { beginPlacementPass } from '../../domain/placement';
import { rendezvousKey, RendezvousKeyCache } from '../../domain/rendezvous';
import { bundleForNode } from '../../harness/entry-bundles';
import { NOW, placeAll, seededWorkloads, zonedFleet } from '../support/placement-fleet';

const runtimes = zonedFleet(90, 16);
const workloads = seededWorkloads(600, 11);
const singleThreaded = placeAll(runtimes, workloads);

/** A pass whose keys `threads` computed first, then placed in order on this thread. */
async function threadedPass(threads: ReturnType<typeof createRendezvousThreads>) {
  const keys = new RendezvousKeyCache();
  const pass = beginPlacementPass(runtimes, NOW, { keys });
  const filled = await threads.fill(pass, workloads);
  const placed = placeAll(runtimes, workloads, { pass });
  return { filled, keys, ...placed };
}

describe('rendezvous keys on worker threads', () => {
  it('a cold pass on two threads places exactly as the single-threaded pass, and hashes nothing after the fill', async () => {
    const threads = createRendezvousThreads({ workers: 1, minKeys: 0 });
    try {
      await threads.ready();
      const threaded = await threadedPass(threads);
      expect(threaded.filled).toMatchObject({ keys: singleThreaded.digests, threads: 2 });
      expect(threaded.digests).toBe(singleThreaded.digests); // all of them in the fill
      expect(threaded.results).toEqual(singleThreaded.results);
    } finally {
      await threads.close();
    }
  });

  it('the worker thread alone computes the same keys when the calling thread stays free', async () => {
    const threads = createRendezvousThreads({ workers: 1, minKeys: 0, callerComputes: false });
    try {
      const threaded = await threadedPass(threads);
      expect(threaded.filled).toEqual({ keys: singleThreaded.digests, threads: 1, offThread: singleThreaded.digests });
      expect(threaded.results).toEqual(singleThreaded.results);
      // Equal results alone would not show a wrong key: equal keys fall back to the full scores.
      const zoneA = runtimes.filter((r) => r.labels.zone === 'a').map((r) => r.id);
      for (const workload of workloads.filter((w) => w.selector.zone === 'a').slice(0, 5)) {
        expect(threaded.keys.keysFor(workload.name, threaded.keys.layout(zoneA))).toEqual(Float64Array.from(zoneA, (id) => rendezvousKey(workload.name, id)));
      }
    } finally {
      await threads.close();
    }
  });

  it('leaves a fill below minKeys, or a pass without a cache, to the calling thread', async () => {
    const threads = createRendezvousThreads({ workers: 1, minKeys: singleThreaded.digests + 1 });
    try {
      const small = await threadedPass(threads);
      expect(small.filled).toEqual({ keys: singleThreaded.digests, threads: 1, offThread: 0 });
      expect(small.results).toEqual(singleThreaded.results);
      expect(await threads.fill(beginPlacementPass(runtimes, NOW), workloads)).toEqual({ keys: 0, threads: 0, offThread: 0 });
    } finally {
      await threads.close();
    }
  });

  it('computes every key on the calling thread when the threads cannot start', async () => {
    const threads = createRendezvousThreads({ workers: 1, minKeys: 0, source: () => { throw new Error('no entry'); } });
    try {
      const alone = await threadedPass(threads);
      expect(alone.filled).toEqual({ keys: singleThreaded.digests, threads: 1, offThread: 0 });
      expect(alone.results).toEqual(singleThreaded.results);
    } finally {
      await threads.close();
    }
  });

  it('runs its threads from a bundle of the worker, as the test stacks and benches start it', async () => {
    // The bundle is another file than the sources: the thread's entry must be found from the source's directory.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-rendezvous-bundle-'));
    try {
      const outfile = path.join(dir, 'fill.js');
      await bundleForNode({
        outfile,
        stdin: `
          import { createRendezvousThreads } from './activities/rendezvous-threads';
          import { beginPlacementPass } from './domain/placement';
          import { RendezvousKeyCache } from './domain/rendezvous';
          import { NOW, seededWorkloads, zonedFleet } from './test/support/placement-fleet';
          const threads = createRendezvousThreads({ workers: 1, minKeys: 0, callerComputes: false });
          const runtimes = zonedFleet(20, 4);
          threads.fill(beginPlacementPass(runtimes, NOW, { keys: new RendezvousKeyCache() }), seededWorkloads(50, 3))
            .then((filled) => { console.log(JSON.stringify(filled)); return threads.close(); })
            .catch((error) => { console.error(error); process.exit(1); });
        `,
      });
      const run = spawnSync(process.execPath, [outfile], { encoding: 'utf8', timeout: 60_000 });
      expect(run.stderr).toBe('');
      const filled = JSON.parse(run.stdout);
      expect(filled.keys).toBeGreaterThan(0);
      expect(filled).toEqual({ keys: filled.keys, threads: 1, offThread: filled.keys });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
