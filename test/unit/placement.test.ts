import { createHash } from 'node:crypto';
import type { Labels } from '../../protocol';
import type { Assignment, Runtime } from '../../protocol';
import {
  PlacementUnavailableError,
  beginPlacementPass,
  compareRendezvous,
  computePlacement,
  diffAssignments,
  eligibleRuntimes,
  isFresh,
  matchesSelector,
  rendezvousOrder,
  rendezvousScore,
  type PlacementInput,
  type PlacementWorkload,
} from '../../domain/placement';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const iso = (ms: number): string => new Date(ms).toISOString();

function runtime(id: string, labels: Labels = {}, overrides: Partial<Runtime> = {}): Runtime {
  return {
    id,
    endpoint: `http://127.0.0.1:7400/${id}`,
    labels,
    slots: 4,
    status: 'READY',
    leaseExpiresAt: iso(NOW + 30_000),
    fence: 1,
    ...overrides,
  };
}

function fleet(count: number, labelsFor: (i: number) => Labels = () => ({})): Runtime[] {
  return Array.from({ length: count }, (_, i) => runtime(`rt-${String(i).padStart(3, '0')}`, labelsFor(i)));
}

function service(name: string, replicas: number | 'all', selector: Labels = {}): PlacementWorkload {
  return { name, kind: 'service', replicas, selector, spec: { command: ['node', 'server.js'] } };
}

/** Rendezvous order computed independently with node:crypto. */
function expectedOrder(name: string, runtimeIds: string[]): string[] {
  const score = (id: string) => createHash('sha256').update(`${name}\n${id}`).digest('hex');
  return [...runtimeIds].sort((a, b) => {
    const sa = score(a);
    const sb = score(b);
    if (sa !== sb) return sa > sb ? -1 : 1;
    return a < b ? -1 : 1;
  });
}

/** A runtime id that ranks first for `name` against `others` (found deterministically). */
function idRankingFirst(name: string, others: string[]): string {
  for (let i = 0; ; i++) {
    const candidate = `joiner-${i}`;
    if (expectedOrder(name, [...others, candidate])[0] === candidate) return candidate;
  }
}

const place = (input: Partial<PlacementInput> & Pick<PlacementInput, 'workload' | 'runtimes'>) => computePlacement({ nowMs: NOW, ...input });
const runtimeIdsOf = (assignments: Assignment[]) => assignments.map((a) => a.runtimeId);

describe('rendezvous score', () => {
  it('is the lowercase hex SHA-256 of the UTF-8 bytes of "<name>\\n<runtimeId>"', () => {
    // Pinned values: a different score function would silently move every unpinned placement.
    expect(rendezvousScore('shop', 'rt-001')).toBe('527c96edd1e46129f07127d7a248fef953ca8d1b04d47109e23a98ecfce87c08');
    expect(rendezvousScore('zoné', 'rt-😀')).toBe('f898b43619b730606649482a29affbded251fbd8b8fef22958d6253d6c36edad');
    expect(rendezvousScore('orders', 'rt-042')).toBe(createHash('sha256').update('orders\nrt-042', 'utf8').digest('hex'));
  });
});

describe('freshness and selectors', () => {
  it('is fresh only when READY with a lease strictly in the future', () => {
    expect(isFresh(runtime('a'), NOW)).toBe(true);
    expect(isFresh(runtime('a', {}, { leaseExpiresAt: iso(NOW) }), NOW)).toBe(false);
    expect(isFresh(runtime('a', {}, { leaseExpiresAt: iso(NOW - 1) }), NOW)).toBe(false);
    expect(isFresh(runtime('a', {}, { status: 'CORDONED' }), NOW)).toBe(false);
    expect(isFresh(runtime('a', {}, { status: 'LOST' }), NOW)).toBe(false);
    expect(isFresh(runtime('a', {}, { leaseExpiresAt: 'not a date' }), NOW)).toBe(false);
  });

  it('matches selectors as an AND over exact values, ignoring unmentioned labels', () => {
    const labels = { zone: 'a', tier: 'fast', engine: 'docker' };
    expect(matchesSelector(labels, {})).toBe(true);
    expect(matchesSelector({}, {})).toBe(true);
    expect(matchesSelector(labels, { zone: 'a' })).toBe(true);
    expect(matchesSelector(labels, { zone: 'a', tier: 'fast' })).toBe(true);
    expect(matchesSelector(labels, { zone: 'a', tier: 'slow' })).toBe(false); // AND, not OR
    expect(matchesSelector(labels, { zone: 'A' })).toBe(false); // exact, case-sensitive
    expect(matchesSelector(labels, { zone: 'a ' })).toBe(false);
    expect(matchesSelector(labels, { zone: '' })).toBe(false);
    expect(matchesSelector(labels, { region: 'eu' })).toBe(false); // a missing label fails
    expect(matchesSelector({ zone: '' }, { zone: '' })).toBe(true);
    expect(matchesSelector({}, { constructor: 'function Object() { [native code] }' })).toBe(false);
  });

  it('eligible = fresh READY ∩ selector', () => {
    const runtimes = [
      runtime('a1', { zone: 'a' }),
      runtime('a2', { zone: 'a', gpu: 'yes' }),
      runtime('a3', { zone: 'a' }, { status: 'CORDONED' }),
      runtime('a4', { zone: 'a' }, { status: 'LOST' }),
      runtime('a5', { zone: 'a' }, { leaseExpiresAt: iso(NOW - 1000) }),
      runtime('b1', { zone: 'b' }),
    ];
    expect(eligibleRuntimes(runtimes, { selector: { zone: 'a' } }, NOW).map((r) => r.id)).toEqual(['a1', 'a2']);
    expect(eligibleRuntimes(runtimes, { selector: {} }, NOW).map((r) => r.id)).toEqual(['a1', 'a2', 'b1']);
    expect(eligibleRuntimes(runtimes, { selector: { zone: 'a', gpu: 'yes' } }, NOW).map((r) => r.id)).toEqual(['a2']);
  });
});

describe('rendezvous order', () => {
  const runtimes = fleet(60);
  const ids = runtimes.map((r) => r.id);

  it.each(['shop', 'orders-consumer', 'w', 'a-very-long-workload-name-that-fills-more-than-one-sha-block-x'])(
    'equals the sha256 ranking computed with node:crypto for %s',
    (name) => {
      expect(rendezvousOrder(name, runtimes)).toEqual(expectedOrder(name, ids));
    },
  );

  it('differs between workloads (it is a per-name order)', () => {
    expect(rendezvousOrder('shop', runtimes)).not.toEqual(rendezvousOrder('cart', runtimes));
  });

  it('breaks equal scores by runtime id ascending', () => {
    const shuffled = ['rt-c', 'rt-a', 'rt-d', 'rt-b'].map((id) => ({ id }));
    expect(rendezvousOrder('x', shuffled, () => 'ff')).toEqual(['rt-a', 'rt-b', 'rt-c', 'rt-d']);
    // Two score groups: higher score first, ids ascending inside each group.
    const grouped = (_: string, id: string) => (id === 'rt-c' || id === 'rt-d' ? 'f0' : '0f');
    expect(rendezvousOrder('x', shuffled, grouped)).toEqual(['rt-c', 'rt-d', 'rt-a', 'rt-b']);
  });

  it('compareRendezvous orders by score descending, then id ascending', () => {
    expect(compareRendezvous({ runtimeId: 'b', score: 'ff' }, { runtimeId: 'a', score: '00' })).toBeLessThan(0);
    expect(compareRendezvous({ runtimeId: 'a', score: '00' }, { runtimeId: 'b', score: 'ff' })).toBeGreaterThan(0);
    expect(compareRendezvous({ runtimeId: 'a', score: '7f' }, { runtimeId: 'b', score: '7f' })).toBeLessThan(0);
    expect(compareRendezvous({ runtimeId: 'b', score: '7f' }, { runtimeId: 'a', score: '7f' })).toBeGreaterThan(0);
    expect(compareRendezvous({ runtimeId: 'a', score: '7f' }, { runtimeId: 'a', score: '7f' })).toBe(0);
  });
});

describe('computePlacement', () => {
  const zoned = fleet(30, (i) => ({ zone: 'abc'[i % 3] }));

  it('places N replicas on the N best-ranked runtimes, index 0 on the best, with task ids and no ports', () => {
    const result = place({ workload: service('shop', 3), runtimes: zoned });
    const order = expectedOrder('shop', zoned.map((r) => r.id));
    expect(result.assignments).toEqual([
      { runtimeId: order[0], index: 0, taskId: 'shop-0-g1' },
      { runtimeId: order[1], index: 1, taskId: 'shop-1-g1' },
      { runtimeId: order[2], index: 2, taskId: 'shop-2-g1' },
    ]);
    expect(result.unplaced).toBeUndefined();
    expect(result.warnings).toEqual([]);
  });

  it.each([1, 5, 16, 17, 29, 30])('replicas %i follow the rendezvous order exactly (partial and full ranking)', (replicas) => {
    const order = expectedOrder('shop', zoned.map((r) => r.id));
    expect(runtimeIdsOf(place({ workload: service('shop', replicas), runtimes: zoned }).assignments)).toEqual(order.slice(0, replicas));
  });

  it('only uses runtimes matching the selector', () => {
    const result = place({ workload: service('shop', 4, { zone: 'b' }), runtimes: zoned });
    const zoneB = zoned.filter((r) => r.labels.zone === 'b').map((r) => r.id);
    expect(runtimeIdsOf(result.assignments)).toEqual(expectedOrder('shop', zoneB).slice(0, 4));
  });

  it('skips stale, CORDONED and LOST runtimes even when they rank first', () => {
    const ids = zoned.map((r) => r.id);
    const [first, second, third, ...rest] = expectedOrder('shop', ids);
    const runtimes = zoned.map((r) => {
      if (r.id === first) return { ...r, status: 'CORDONED' as const };
      if (r.id === second) return { ...r, leaseExpiresAt: iso(NOW - 1) };
      if (r.id === third) return { ...r, status: 'LOST' as const };
      return r;
    });
    expect(runtimeIdsOf(place({ workload: service('shop', 2), runtimes }).assignments)).toEqual(rest.slice(0, 2));
  });

  it('gives the same result through a shared pass, and scores each eligible runtime once', () => {
    const pass = beginPlacementPass(zoned, NOW);
    const workloads = ['a', 'b', 'c', 'd'].map((name, i) => service(name, 2, i % 2 ? { zone: 'c' } : {}));
    for (const workload of workloads) {
      expect(computePlacement({ workload, runtimes: zoned, nowMs: NOW, pass })).toEqual(place({ workload, runtimes: zoned }));
    }
    expect(pass.digestsComputed).toBe(30 + 10 + 30 + 10);
    expect(() => computePlacement({ workload: workloads[0], runtimes: [...zoned], nowMs: NOW, pass })).toThrow(/other runtimes/);
  });

  it('replicas "all" runs one task on every eligible runtime (service and stream)', () => {
    const zoneA = zoned.filter((r) => r.labels.zone === 'a').map((r) => r.id);
    const all = place({ workload: service('shop', 'all', { zone: 'a' }), runtimes: zoned });
    expect(runtimeIdsOf(all.assignments)).toEqual(expectedOrder('shop', zoneA));
    expect(all.assignments.map((a) => a.index)).toEqual([...zoneA.keys()]);

    const stream: PlacementWorkload = { name: 'job', kind: 'stream', replicas: 'all', selector: { zone: 'a' }, spec: {} };
    const streamAll = place({ workload: stream, runtimes: zoned });
    expect(new Set(runtimeIdsOf(streamAll.assignments)).size).toBe(zoneA.length);
    expect(streamAll.assignments).toHaveLength(zoneA.length);
  });

  it('service/consumer run at most one task per runtime: the shortfall is unplaced', () => {
    const runtimes = fleet(3);
    const result = place({ workload: service('shop', 5), runtimes });
    expect(result.assignments).toHaveLength(3);
    expect(new Set(runtimeIdsOf(result.assignments)).size).toBe(3);
    expect(result.assignments.map((a) => a.index)).toEqual([0, 1, 2]);
    expect(result.unplaced).toEqual({ workload: 'shop', reason: 'placement-unavailable', missing: 2 });
    expect(result.warnings.join('\n')).toMatch(/capacity short: placed 3 of 5/);
  });

  it('respects slots used by other workloads', () => {
    const runtimes = fleet(4);
    const order = expectedOrder('shop', runtimes.map((r) => r.id));
    const usedSlots = { [order[0]]: 4, [order[2]]: 3 };
    const result = place({ workload: service('shop', 3), runtimes, usedSlots });
    expect(runtimeIdsOf(result.assignments)).toEqual([order[1], order[2], order[3]]);
    const full = place({ workload: service('shop', 3), runtimes, usedSlots: Object.fromEntries(runtimes.map((r) => [r.id, 4])) });
    expect(full.assignments).toEqual([]);
    expect(full.unplaced?.missing).toBe(3);
  });

  it('stream subtasks share runtimes up to their free slots, spreading first', () => {
    const runtimes = fleet(2).map((r) => ({ ...r, slots: 3 }));
    const [best, other] = expectedOrder('job', runtimes.map((r) => r.id));
    const stream: PlacementWorkload = { name: 'job', kind: 'stream', replicas: 5, selector: {}, spec: {} };
    const result = place({ workload: stream, runtimes });
    // Round robin in rank order: best, other, best, other, best.
    expect(runtimeIdsOf(result.assignments)).toEqual([best, other, best, other, best]);
    expect(result.unplaced).toBeUndefined();

    const crowded = place({ workload: { ...stream, replicas: 6 }, runtimes, usedSlots: { [best]: 2 } });
    expect(crowded.assignments.filter((a) => a.runtimeId === best)).toHaveLength(1);
    expect(crowded.assignments.filter((a) => a.runtimeId === other)).toHaveLength(3);
    expect(crowded.unplaced).toEqual({ workload: 'job', reason: 'placement-unavailable', missing: 2 });
  });

  it('new stream subtasks go to runtimes holding fewer of its subtasks before better-ranked loaded ones', () => {
    const runtimes = fleet(6);
    const order = expectedOrder('job', runtimes.map((r) => r.id));
    const current: Assignment[] = [
      { runtimeId: order[0], index: 0, taskId: 'job-0-g1' },
      { runtimeId: order[0], index: 1, taskId: 'job-1-g1' },
      { runtimeId: order[1], index: 2, taskId: 'job-2-g1' },
    ];
    const stream: PlacementWorkload = { name: 'job', kind: 'stream', replicas: 6, selector: {}, spec: {} };
    const result = place({ workload: stream, runtimes, current });
    expect(result.assignments.slice(0, 3)).toEqual(current);
    expect(runtimeIdsOf(result.assignments.slice(3))).toEqual([order[2], order[3], order[4]]);
  });

  it('throws PlacementUnavailableError when no runtime is fresh at all', () => {
    const dead = [
      runtime('a', {}, { status: 'LOST' }),
      runtime('b', {}, { leaseExpiresAt: iso(NOW - 1) }),
      runtime('c', {}, { status: 'CORDONED' }),
    ];
    for (const runtimes of [dead, []]) {
      let caught: unknown;
      try {
        place({ workload: service('shop', 1), runtimes });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(PlacementUnavailableError);
      expect((caught as PlacementUnavailableError).code).toBe('placement-unavailable');
      expect((caught as PlacementUnavailableError).message).toMatch(/shop/);
    }
  });

  it('records unplaced (not an error) when fresh runtimes exist but none matches the selector', () => {
    const numbered = place({ workload: service('shop', 2, { zone: 'z' }), runtimes: zoned });
    expect(numbered.assignments).toEqual([]);
    expect(numbered.unplaced).toEqual({ workload: 'shop', reason: 'placement-unavailable', missing: 2 });
    expect(numbered.warnings).toEqual(['selector matches nothing: no fresh READY runtime carries {"zone":"z"}']);
    const all = place({ workload: service('shop', 'all', { zone: 'z' }), runtimes: zoned });
    expect(all.assignments).toEqual([]);
    expect(all.unplaced).toEqual({ workload: 'shop', reason: 'placement-unavailable', missing: 1 });
  });

  it('refuses replicas 0 or fractions instead of placing nothing', () => {
    expect(() => place({ workload: service('shop', 0), runtimes: zoned })).toThrow(RangeError);
    expect(() => place({ workload: service('shop', 1.5), runtimes: zoned })).toThrow(/replicas must be an integer/);
  });

  it('does not mutate its inputs and is deterministic', () => {
    const current = place({ workload: service('shop', 3), runtimes: zoned }).assignments;
    const input: PlacementInput = { workload: service('shop', 4), runtimes: zoned, nowMs: NOW, current };
    const snapshot = JSON.stringify(input);
    const first = computePlacement(input);
    expect(JSON.stringify(input)).toBe(snapshot);
    expect(computePlacement(input)).toEqual(first);
  });
});

describe('stickiness', () => {
  const runtimes = fleet(8);
  const ids = runtimes.map((r) => r.id);

  it('a kept replica keeps the revision it runs; a new one records none (its write stamps the current one)', () => {
    const before = place({ workload: service('shop', 2), runtimes }).assignments.map((a) => ({ ...a, revision: 'r-old' }));
    const after = place({ workload: service('shop', 3), runtimes, current: before }).assignments;
    expect(after.slice(0, 2).map((a) => a.revision)).toEqual(['r-old', 'r-old']);
    expect(after[2].revision).toBeUndefined();
  });

  it('adding a runtime, even the best-ranked one, moves nothing for a fixed replica count', () => {
    const before = place({ workload: service('shop', 3), runtimes }).assignments;
    const joiner = idRankingFirst('shop', ids);
    const after = place({ workload: service('shop', 3), runtimes: [...runtimes, runtime(joiner)], current: before });
    expect(after.assignments).toEqual(before);
    expect(diffAssignments(before, after.assignments)).toEqual({ starts: [], stops: [], moves: [] });
    // Without stickiness the joiner would have taken index 0.
    expect(place({ workload: service('shop', 3), runtimes: [...runtimes, runtime(joiner)] }).assignments[0].runtimeId).toBe(joiner);
  });

  it('replicas "all" gains exactly one task when a runtime joins', () => {
    const before = place({ workload: service('shop', 'all'), runtimes }).assignments;
    const joiner = idRankingFirst('shop', ids);
    const after = place({ workload: service('shop', 'all'), runtimes: [...runtimes, runtime(joiner)], current: before }).assignments;
    const diff = diffAssignments(before, after);
    expect(diff.stops).toEqual([]);
    expect(diff.moves).toEqual([]);
    expect(diff.starts).toEqual([{ runtimeId: joiner, index: 8, taskId: 'shop-8-g1' }]);
  });

  it('losing a runtime moves only its index, to the best free runtime, with a new task id', () => {
    const before = place({ workload: service('shop', 3), runtimes }).assignments;
    const lostId = before[1].runtimeId;
    const degraded = runtimes.map((r) => (r.id === lostId ? { ...r, status: 'LOST' as const } : r));
    const after = place({ workload: service('shop', 3), runtimes: degraded, current: before, generation: 2 }).assignments;
    const order = expectedOrder('shop', ids);
    expect(after[0]).toEqual(before[0]);
    expect(after[2]).toEqual(before[2]);
    expect(after[1]).toEqual({ runtimeId: order[3], index: 1, taskId: 'shop-1-g2' });
    const diff = diffAssignments(before, after);
    expect(diff).toEqual({ starts: [], stops: [], moves: [{ from: before[1], to: after[1] }] });
  });

  it('keeps task ids and ports of sticky assignments across generations', () => {
    const before = place({ workload: service('shop', 2), runtimes }).assignments.map((a, i) => ({ ...a, ports: { public: 20000 + i, internal: 21000 + i } }));
    const after = place({ workload: service('shop', 3), runtimes, current: before, generation: 5 }).assignments;
    expect(after.slice(0, 2)).toEqual(before);
    expect(after[2].taskId).toBe('shop-2-g5');
    expect(after[2].ports).toBeUndefined();
  });

  it('shrinking drops the highest indices only', () => {
    const before = place({ workload: service('shop', 4), runtimes }).assignments;
    const after = place({ workload: service('shop', 2), runtimes, current: before }).assignments;
    expect(after).toEqual(before.slice(0, 2));
    expect(diffAssignments(before, after)).toEqual({ starts: [], stops: before.slice(2), moves: [] });
  });

  it('moves a sticky assignment whose runtime left the selector', () => {
    const labelled = runtimes.map((r) => ({ ...r, labels: { zone: 'a' } }));
    const before = place({ workload: service('shop', 2, { zone: 'a' }), runtimes: labelled }).assignments;
    const relabelled = labelled.map((r) => (r.id === before[0].runtimeId ? { ...r, labels: { zone: 'b' } } : r));
    const after = place({ workload: service('shop', 2, { zone: 'a' }), runtimes: relabelled, current: before }).assignments;
    expect(after[1]).toEqual(before[1]);
    expect(after[0].runtimeId).not.toBe(before[0].runtimeId);
    expect(after[0].runtimeId).not.toBe(before[1].runtimeId);
  });

  it('a duplicate runtime in a corrupt current record is not kept twice for a service', () => {
    const [a, b] = expectedOrder('shop', ids);
    const current: Assignment[] = [
      { runtimeId: a, index: 0, taskId: 'shop-0-g1' },
      { runtimeId: a, index: 1, taskId: 'shop-1-g1' },
    ];
    const after = place({ workload: service('shop', 2), runtimes, current }).assignments;
    expect(after).toEqual([current[0], { runtimeId: b, index: 1, taskId: 'shop-1-g1' }]);
  });
});

describe('colocation', () => {
  const runtimes = fleet(10, (i) => ({ zone: i < 5 ? 'a' : 'b' }));
  const leader: Assignment[] = [
    { runtimeId: 'rt-007', index: 0, taskId: 'lead-0-g1' },
    { runtimeId: 'rt-002', index: 1, taskId: 'lead-1-g1' },
    { runtimeId: 'rt-004', index: 2, taskId: 'lead-2-g1' },
  ];

  it('places the follower on exactly the leader runtimes, in order', () => {
    const follower = { ...service('side', 3), colocate: 'pair' };
    const result = place({ workload: follower, runtimes, colocatedWith: leader });
    expect(result.assignments).toEqual([
      { runtimeId: 'rt-007', index: 0, taskId: 'side-0-g1' },
      { runtimeId: 'rt-002', index: 1, taskId: 'side-1-g1' },
      { runtimeId: 'rt-004', index: 2, taskId: 'side-2-g1' },
    ]);
    expect(result.unplaced).toBeUndefined();
    const sticky = place({ workload: follower, runtimes, colocatedWith: leader, current: result.assignments, generation: 3 });
    expect(sticky.assignments).toEqual(result.assignments);
  });

  it('reports a colocation split when the follower cannot go where the leader is', () => {
    const follower = { ...service('side', 3, { zone: 'a' }), colocate: 'pair' };
    const result = place({ workload: follower, runtimes, colocatedWith: leader });
    expect(runtimeIdsOf(result.assignments)).toEqual(['rt-002', 'rt-004']);
    expect(result.assignments.map((a) => a.index)).toEqual([1, 2]);
    expect(result.unplaced).toEqual({ workload: 'side', reason: 'placement-unavailable', missing: 1 });
    expect(result.warnings.join('\n')).toMatch(/colocation split: replica 0 .*rt-007/);
  });

  it('a service follower of a stream leader with two subtasks on one runtime gets one task there', () => {
    const streamLeader: Assignment[] = [
      { runtimeId: 'rt-001', index: 0, taskId: 'j-0-g1' },
      { runtimeId: 'rt-001', index: 1, taskId: 'j-1-g1' },
    ];
    const result = place({ workload: { ...service('side', 2), colocate: 'g' }, runtimes, colocatedWith: streamLeader });
    expect(result.assignments).toEqual([{ runtimeId: 'rt-001', index: 0, taskId: 'side-0-g1' }]);
    expect(result.unplaced?.missing).toBe(1);
  });

  it('an empty leader leaves the follower unplaced', () => {
    const result = place({ workload: { ...service('side', 2), colocate: 'g' }, runtimes, colocatedWith: [] });
    expect(result.assignments).toEqual([]);
    expect(result.unplaced?.missing).toBe(2);
  });
});

describe('consumer partitions', () => {
  const runtimes = fleet(6);
  const consumer = (replicas: number | 'all', partitions = 8): PlacementWorkload => ({
    name: 'orders',
    kind: 'consumer',
    replicas,
    selector: {},
    spec: { partitions, source: 'orders', sink: 'orders_out' },
  });

  it('splits 0..P-1 by index: replica i owns p % n === i', () => {
    const result = place({ workload: consumer(3), runtimes });
    expect(result.assignments.map((a) => a.partitions)).toEqual([[0, 3, 6], [1, 4, 7], [2, 5]]);
    const explicit = place({ workload: consumer(3), runtimes, partitions: 4 });
    expect(explicit.assignments.map((a) => a.partitions)).toEqual([[0, 3], [1], [2]]);
  });

  it('covers every partition exactly once for many (n, P)', () => {
    for (let replicas = 1; replicas <= 6; replicas++) {
      for (const partitions of [1, 5, 8, 13]) {
        const owned = place({ workload: consumer(replicas, partitions), runtimes }).assignments.flatMap((a) => a.partitions ?? []);
        expect(owned.sort((a, b) => a - b)).toEqual([...Array(partitions).keys()]);
      }
    }
  });

  it('keeps each index’s partitions when a runtime is replaced (n unchanged)', () => {
    const before = place({ workload: consumer(3), runtimes }).assignments;
    const lost = before[0].runtimeId;
    const after = place({
      workload: consumer(3),
      runtimes: runtimes.map((r) => (r.id === lost ? { ...r, status: 'LOST' as const } : r)),
      current: before,
    }).assignments;
    expect(after[0].runtimeId).not.toBe(lost);
    expect(after.map((a) => a.partitions)).toEqual(before.map((a) => a.partitions));
  });

  it('warns when replicas exceed partitions', () => {
    const result = place({ workload: consumer(4, 2), runtimes });
    expect(result.assignments.map((a) => a.partitions)).toEqual([[0], [1], [], []]);
    expect(result.warnings.join('\n')).toMatch(/replicas 4 > partitions 2/);
  });

  it('gives no partitions to services', () => {
    expect(place({ workload: service('shop', 2), runtimes, partitions: 8 }).assignments.every((a) => a.partitions === undefined)).toBe(true);
  });
});

describe('diffAssignments', () => {
  const a = (runtimeId: string, index: number, generation = 1): Assignment => ({ runtimeId, index, taskId: `w-${index}-g${generation}` });

  it('classifies starts, stops and moves; unchanged appear nowhere', () => {
    const current = [a('r1', 0), a('r2', 1), a('r3', 2), a('r4', 3)];
    const target = [a('r1', 0), a('r5', 1), a('r3', 2), a('r6', 4)];
    expect(diffAssignments(current, target)).toEqual({
      starts: [a('r6', 4)],
      stops: [a('r4', 3)],
      moves: [{ from: a('r2', 1), to: a('r5', 1) }],
    });
  });

  it('everything starts from nothing and stops to nothing', () => {
    const set = [a('r1', 0), a('r2', 1)];
    expect(diffAssignments([], set)).toEqual({ starts: set, stops: [], moves: [] });
    expect(diffAssignments(set, [])).toEqual({ starts: [], stops: set, moves: [] });
  });

  it('a new task id on the same runtime replaces the task (stop + start)', () => {
    expect(diffAssignments([a('r1', 0)], [a('r1', 0, 2)])).toEqual({ starts: [a('r1', 0, 2)], stops: [a('r1', 0)], moves: [] });
  });
});

