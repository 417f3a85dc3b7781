// Rendezvous keys and the keys kept across passes (domain/rendezvous.ts, domain/placement.ts),
// pure: a key orders exactly as the hex score does; a pass with a cache places exactly as one
// without, and hashes only the (workload, runtime) pairs it has not seen.
import { beginPlacementPass, matchesSelector, missingKeys, storeKeys, type PlacementWorkload } from '../../domain/placement';
import {
  compareKeyed,
  compareRendezvous,
  computeKeyWork,
  rendezvousKey,
  rendezvousOrder,
  rendezvousScore,
  RendezvousKeyCache,
  topAdmitted,
} from '../../domain/rendezvous';
import type { Runtime } from '../../protocol';
import { NOW, placeAll, runtime, seededWorkloads, zonedFleet } from '../support/placement-fleet';

const eligibleCount = (runtimes: Runtime[], workload: PlacementWorkload) => runtimes.filter((r) => matchesSelector(r.labels, workload.selector)).length;

describe('rendezvous keys', () => {
  it('are the first 53 bits of the score, so a higher key is a higher score', () => {
    for (const [name, id] of [['shop', 'rt-001'], ['zoné', 'rt-😀'], ['orders', 'rt-042'], ['', '']]) {
      expect(BigInt(rendezvousKey(name, id))).toBe(BigInt(`0x${rendezvousScore(name, id).slice(0, 14)}`) >> 3n);
    }
  });

  it('fall back to the full score, then the runtime id, when two keys are equal', () => {
    // Two keys are equal once in 2^53 pairs: force it to reach the fallback.
    const full = (id: string) => ({ runtimeId: id, score: rendezvousScore('shop', id) });
    expect(compareKeyed('shop', 7, 'rt-1', 7, 'rt-2')).toBe(compareRendezvous(full('rt-1'), full('rt-2')));
    expect(compareKeyed('shop', 7, 'rt-2', 7, 'rt-1')).toBe(compareRendezvous(full('rt-2'), full('rt-1')));
    expect(compareKeyed('shop', 7, 'rt-1', 7, 'rt-1')).toBe(0);
    expect(compareKeyed('shop', 8, 'rt-2', 7, 'rt-1')).toBe(-1);
  });

  it('rank the admitted runtimes as rendezvousOrder does, asking admit only of those that could make the cut', () => {
    const ids = zonedFleet(200).map((r) => r.id);
    const keys = Float64Array.from(ids, (id) => rendezvousKey('shop', id));
    const admitted = (position: number) => position % 3 !== 0;
    const expected = rendezvousOrder('shop', ids.filter((_, p) => admitted(p)).map((id) => ({ id })));
    for (const limit of [1, 3, 16, 17, 200, 500]) {
      let asked = 0;
      const top = topAdmitted('shop', ids, keys, limit, (p) => (asked++, admitted(p)));
      expect(top.map((p) => ids[p])).toEqual(expected.slice(0, limit));
      if (limit === 3) expect(asked).toBeLessThan(60);
    }
  });
});

describe('keys kept across passes', () => {
  const runtimes = zonedFleet(60);
  const all = seededWorkloads(40);
  const cold = placeAll(runtimes, all);

  it('a cold pass with a cache places as one without, hashing each eligible runtime once per workload', () => {
    const keys = new RendezvousKeyCache();
    const pass = placeAll(runtimes, all, { keys });
    expect(pass.results).toEqual(cold.results);
    expect(pass.digests).toBe(all.reduce((sum, w) => sum + eligibleCount(runtimes, w), 0));
    expect(keys.digestsComputed).toBe(pass.digests);
  });

  it('a warm pass over the same fleet and workloads computes no digest and places the same', () => {
    const keys = new RendezvousKeyCache();
    placeAll(runtimes, all, { keys });
    const warm = placeAll(runtimes, all, { keys });
    expect(warm.digests).toBe(0);
    expect(warm.results).toEqual(cold.results);
  });

  it('a runtime joining costs only its own digests, one per workload it is eligible for; one leaving costs none', () => {
    const keys = new RendezvousKeyCache();
    placeAll(runtimes, all, { keys });
    const joined = [...runtimes.slice(0, 30), runtime('rt-joiner', { zone: 'b' }), ...runtimes.slice(30)];
    const afterJoin = placeAll(joined, all, { keys });
    expect(afterJoin.digests).toBe(all.filter((w) => matchesSelector({ zone: 'b' }, w.selector)).length);
    expect(afterJoin.results).toEqual(placeAll(joined, all).results);

    const left = joined.filter((r) => r.id !== 'rt-007');
    const afterLeave = placeAll(left, all, { keys });
    expect(afterLeave.digests).toBe(0);
    expect(afterLeave.results).toEqual(placeAll(left, all).results);
  });

  it('a renamed workload hashes all its runtimes again; a widened selector only the runtimes it had not seen', () => {
    const keys = new RendezvousKeyCache();
    placeAll(runtimes, all, { keys });
    const zoned = all.findIndex((w) => w.selector.zone === 'a');
    const changed = all.map((w, i) => (i === 0 ? { ...w, name: 'wl-renamed' } : i === zoned ? { ...w, selector: {} } : w));
    const pass = placeAll(runtimes, changed, { keys });
    expect(pass.digests).toBe(eligibleCount(runtimes, changed[0]) + eligibleCount(runtimes, { ...all[zoned], selector: { zone: 'b' } }) * 2);
    expect(pass.results).toEqual(placeAll(runtimes, changed).results);
  });

  it('stays within maxKeys, dropping the least recently used workloads, and places the same', () => {
    const keys = new RendezvousKeyCache(500);
    placeAll(runtimes, all, { keys });
    expect(keys.size.keys).toBeLessThanOrEqual(500);
    const again = placeAll(runtimes, all, { keys });
    expect(again.results).toEqual(cold.results);
    expect(again.digests).toBeGreaterThan(0);
  });

  it('keys computed ahead (missingKeys → computeKeyWork → storeKeys) leave the pass nothing to hash', () => {
    const keys = new RendezvousKeyCache();
    const ahead = beginPlacementPass(runtimes, NOW, { keys });
    const { work, targets } = missingKeys(ahead, all);
    const out = new Float64Array(work.start[work.names.length]);
    // In two runs, as two threads would.
    computeKeyWork(work, 0, 17, out);
    computeKeyWork(work, 17, work.names.length, out);
    storeKeys(ahead, work, targets, out);
    expect(ahead.digestsComputed).toBe(cold.digests);
    const pass = placeAll(runtimes, all, { keys });
    expect(pass.digests).toBe(0);
    expect(pass.results).toEqual(cold.results);
  });
});
