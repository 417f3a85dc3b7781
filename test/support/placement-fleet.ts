// A seeded fleet and workloads for placement tests, and a pass that places them all from scratch
// (slots accumulated as a reconcile of pending workloads would).
import { beginPlacementPass, computePlacement, type PlacementPass, type PlacementResult, type PlacementWorkload } from '../../domain/placement';
import type { RendezvousKeyCache } from '../../domain/rendezvous';
import { seededRandom } from '../../lib/seeded-random';
import type { Labels, Runtime } from '../../protocol';

export const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const ZONES = ['a', 'b', 'c'];

export function runtime(id: string, labels: Labels, slots = 8): Runtime {
  return { id, endpoint: `http://127.0.0.1:7400/${id}`, labels, slots, status: 'READY', leaseExpiresAt: new Date(NOW + 30_000).toISOString(), fence: 1 };
}

/** `count` runtimes over zones a, b, c in turn. */
export const zonedFleet = (count: number, slots = 8): Runtime[] =>
  Array.from({ length: count }, (_, i) => runtime(`rt-${String(i).padStart(3, '0')}`, { zone: ZONES[i % 3] }, slots));

/** Services, consumers and stream jobs in turn, replicas 2–4, a quarter of them on every zone. */
export function seededWorkloads(count: number, seed = 7): PlacementWorkload[] {
  const random = seededRandom(seed);
  const kinds = ['service', 'consumer', 'stream'] as const;
  return Array.from({ length: count }, (_, i): PlacementWorkload => ({
    name: `wl-${String(i).padStart(3, '0')}`,
    kind: kinds[i % 3],
    replicas: 2 + (i % 3),
    selector: random() < 0.25 ? {} : { zone: ZONES[Math.floor(random() * 3)] },
    spec: kinds[i % 3] === 'consumer' ? { partitions: 6 } : {},
  }));
}

/** Places every workload in order on `pass` (default: a new one, with `keys` if given). */
export function placeAll(
  runtimes: Runtime[],
  workloads: readonly PlacementWorkload[],
  options: { keys?: RendezvousKeyCache; pass?: PlacementPass } = {},
): { results: PlacementResult[]; digests: number } {
  const pass = options.pass ?? beginPlacementPass(runtimes, NOW, { keys: options.keys });
  const usedSlots: Record<string, number> = {};
  const results = workloads.map((workload) => {
    const result = computePlacement({ workload, runtimes, nowMs: NOW, pass, usedSlots });
    for (const a of result.assignments) usedSlots[a.runtimeId] = (usedSlots[a.runtimeId] ?? 0) + 1;
    return result;
  });
  return { results, digests: pass.digestsComputed };
}
