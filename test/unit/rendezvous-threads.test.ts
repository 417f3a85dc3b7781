// A cold placement pass on both cores (activities/rendezvous-threads.ts): worker threads compute
// the rendezvous keys into the pass's cache, the pass itself stays sequential, and its result is
// exactly the single-threaded pass's. In-process: worker threads, no process, port or file.
import { createRendezvousThreads } from '../../activities/rendezvous-threads';
import { beginPlacementPass } from '../../domain/placement';
import { rendezvousKey, RendezvousKeyCache } from '../../domain/rendezvous';
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
});
