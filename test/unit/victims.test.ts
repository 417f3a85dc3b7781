import { chooseVictims, type ReplicaLoad } from '../../domain/victims';

const replica = (index: number, patch: Partial<ReplicaLoad> = {}): ReplicaLoad => ({
  taskId: `t${index}`,
  runtimeId: `rt-${index}`,
  index,
  ownedPartitions: 2,
  inFlight: 5,
  load: 100,
  ...patch,
});

describe('chooseVictims', () => {
  it('chooses idle replicas before busy ones, even busier-looking idle ones', () => {
    const replicas = [
      replica(0, { load: 1, inFlight: 1 }), // busy but barely
      replica(1, { ownedPartitions: 0, inFlight: 0, load: 0 }), // idle
      replica(2, { load: 50 }),
    ];
    const result = chooseVictims({ replicas, removeCount: 1 });
    expect(result.victims).toEqual(['t1']);
    expect(result.reasons.t1).toMatch(/^idle/);
    expect(result.refused).toBeUndefined();
  });

  it('treats a partitioned consumer with no load and nothing in flight as idle', () => {
    const replicas = [
      replica(0, { load: 1, inFlight: 1 }),
      replica(1, { ownedPartitions: 3, inFlight: 0, load: 0 }),
      replica(2, { load: 50 }),
    ];
    expect(chooseVictims({ replicas, removeCount: 1 }).victims).toEqual(['t1']);
  });

  it('treats a replica that owns no partitions and has nothing in flight as idle, though its load figure lags', () => {
    const replicas = [
      replica(0, { load: 1, inFlight: 1 }), // busy, lightly
      replica(1, { ownedPartitions: 0, inFlight: 0, load: 5 }), // partitions just revoked
    ];
    const result = chooseVictims({ replicas, removeCount: 1 });
    expect(result.victims).toEqual(['t1']);
    expect(result.reasons.t1).toMatch(/^idle/);
  });

  it('prefers a fully idle replica over one that still owns quiet partitions', () => {
    const replicas = [
      replica(2, { ownedPartitions: 3, inFlight: 0, load: 0 }),
      replica(1, { ownedPartitions: 0, inFlight: 0, load: 0 }),
    ];
    expect(chooseVictims({ replicas, removeCount: 1, minReplicas: 1 }).victims).toEqual(['t1']);
  });

  it('otherwise chooses the least loaded, then the fewest in flight', () => {
    const replicas = [
      replica(0, { load: 30, inFlight: 1 }),
      replica(1, { load: 10, inFlight: 9 }),
      replica(2, { load: 10, inFlight: 2 }),
      replica(3, { load: 20, inFlight: 1 }),
    ];
    const result = chooseVictims({ replicas, removeCount: 3 });
    expect(result.victims).toEqual(['t2', 't1', 't3']);
    expect(result.reasons.t2).toMatch(/^least loaded: .*2 in flight, load 10/);
    expect(Object.keys(result.reasons).sort()).toEqual(['t1', 't2', 't3']);
  });

  it('never chooses by age: permuting startedAt changes nothing', () => {
    const base = [
      replica(0, { load: 40 }),
      replica(1, { load: 10 }),
      replica(2, { load: 25 }),
      replica(3, { load: 10, inFlight: 7 }),
    ];
    const instants = ['2020-01-01T00:00:00Z', '2024-06-01T00:00:00Z', '2025-01-01T00:00:00Z', '2019-03-03T00:00:00Z'];
    const rotations = instants.map((_, shift) =>
      base.map((r, i) => ({ ...r, startedAt: instants[(i + shift) % instants.length] })),
    );
    const withoutAge = chooseVictims({ replicas: base, removeCount: 2 });
    expect(withoutAge.victims).toEqual(['t1', 't3']);
    for (const replicas of rotations) {
      expect(chooseVictims({ replicas, removeCount: 2 })).toEqual(withoutAge);
      // input order does not matter either
      expect(chooseVictims({ replicas: [...replicas].reverse(), removeCount: 2 })).toEqual(withoutAge);
    }
  });

  it('never prefers a busy replica only because its CPU is low', () => {
    const replicas = [
      replica(0, { load: 80, inFlight: 4, cpu: 1 }), // busy, nearly no CPU
      replica(1, { ownedPartitions: 0, inFlight: 0, load: 0, cpu: 95 }), // idle, hot CPU
      replica(2, { load: 20, inFlight: 2, cpu: 90 }), // least loaded busy, hot CPU
    ];
    expect(chooseVictims({ replicas, removeCount: 2 }).victims).toEqual(['t1', 't2']);
    const withoutCpu = replicas.map(({ cpu: _cpu, ...rest }) => rest);
    expect(chooseVictims({ replicas, removeCount: 2 })).toEqual(chooseVictims({ replicas: withoutCpu, removeCount: 2 }));
  });

  it('breaks ties by highest index so surviving indices stay compact', () => {
    const replicas = [0, 1, 2, 3].map((i) => replica(i, { load: 10, inFlight: 1 }));
    expect(chooseVictims({ replicas, removeCount: 2 }).victims).toEqual(['t3', 't2']);
    const idle = [0, 1, 2].map((i) => replica(i, { ownedPartitions: 0, inFlight: 0, load: 0 }));
    expect(chooseVictims({ replicas: idle, removeCount: 1 }).victims).toEqual(['t2']);
  });

  it('never goes below the default minimum of one replica and says so', () => {
    const replicas = [replica(0), replica(1)];
    const result = chooseVictims({ replicas, removeCount: 2 });
    expect(result.victims).toHaveLength(1);
    expect(result.refused).toMatch(/removing 2 of 2 replicas would go below minReplicas 1: removing only 1/);
  });

  it('honours minReplicas: removes only down to it', () => {
    const replicas = [0, 1, 2, 3].map((i) => replica(i, { load: i }));
    const result = chooseVictims({ replicas, removeCount: 3, minReplicas: 2 });
    expect(result.victims).toEqual(['t0', 't1']);
    expect(result.refused).toMatch(/below minReplicas 2: removing only 2/);
  });

  it('refuses entirely when already at minReplicas', () => {
    const result = chooseVictims({ replicas: [replica(0), replica(1)], removeCount: 1, minReplicas: 2 });
    expect(result.victims).toEqual([]);
    expect(result.reasons).toEqual({});
    expect(result.refused).toMatch(/removing only 0/);
  });

  it('chooses nothing for a zero remove count', () => {
    expect(chooseVictims({ replicas: [replica(0), replica(1)], removeCount: 0 })).toEqual({ victims: [], reasons: {} });
  });
});
