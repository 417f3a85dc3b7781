import { planScaleIn } from '../../domain/scale-in';
import type { Assignment } from '../../protocol';
import type { ReplicaLoad } from '../../domain/victims';

const consumerReplica = (index: number, partitions: number[]): Assignment => ({ runtimeId: `rt-${index}`, index, taskId: `orders-${index}-g1`, partitions });
const load = (a: Assignment, figures: Partial<ReplicaLoad>): ReplicaLoad => ({
  taskId: a.taskId, runtimeId: a.runtimeId, index: a.index, ownedPartitions: a.partitions?.length ?? 0, inFlight: 1, load: 10, ...figures,
});
// replica i owns p % 4 === i
const four = [0, 1, 2, 3].map((i) => consumerReplica(i, [i, i + 4]));

describe('planScaleIn', () => {
  it('removes an idle replica before busy ones, whatever their age or CPU', () => {
    const loads = [
      load(four[0], { load: 50, startedAt: '2020-01-01T00:00:00Z', cpu: 1 }), // oldest, low CPU, busy
      load(four[1], { load: 90 }), // busiest
      load(four[2], { load: 0, inFlight: 0, startedAt: '2030-01-01T00:00:00Z' }), // idle, newest
      load(four[3], { load: 30 }),
    ];
    const decision = planScaleIn({ current: four, target: 3, loads });
    expect(decision.victims.map((v) => v.taskId)).toEqual(['orders-2-g1']);
    expect(decision.reasons['orders-2-g1']).toMatch(/^idle/);
  });

  it('hands every partition of the victims to survivors under the per-instance limit, re-indexed 0..n-1', () => {
    const loads = four.map((a) => load(a, { load: [40, 10, 30, 20][a.index] }));
    const decision = planScaleIn({ current: four, target: 2, loads });
    expect(decision.victims.map((v) => v.index)).toEqual([1, 3]); // least loaded first
    expect(decision.survivors.map((s) => [s.taskId, s.index])).toEqual([['orders-0-g1', 0], ['orders-2-g1', 1]]);
    const owned = decision.survivors.flatMap((s) => s.partitions!);
    expect([...owned].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const s of decision.survivors) expect(s.partitions!.length).toBeLessThanOrEqual(4);
    expect(decision.moves).toHaveLength(4);
    expect(decision.stoppedAbove).toBeNull();
  });

  it('rolls back when a victim\'s partitions do not fit: nothing moved, one above target', () => {
    const two = [consumerReplica(0, [0, 1, 2, 3]), consumerReplica(1, [4, 5, 6, 7])];
    const decision = planScaleIn({ current: two, target: 1, loads: two.map((a) => load(a, {})), perInstanceLimit: 4 });
    expect(decision.victims).toEqual([]);
    expect(decision.moves).toEqual([]);
    expect(decision.survivors).toEqual(two);
    expect(decision.stoppedAbove).toMatchObject({ target: 1, actual: 2 });
  });

  it('scales a service in (no partitions) by load and keeps the survivors\' runtimes and ports', () => {
    const web = [0, 1, 2].map((i): Assignment => ({ runtimeId: `rt-${i}`, index: i, taskId: `web-${i}-g1`, ports: { public: 20000 + i, internal: 21000 + i } }));
    const decision = planScaleIn({ current: web, target: 2, loads: web.map((a) => load(a, { load: [5, 1, 9][a.index], ownedPartitions: 0 })) });
    expect(decision.victims.map((v) => v.taskId)).toEqual(['web-1-g1']);
    expect(decision.survivors).toEqual([web[0], { ...web[2], index: 1 }]);
  });

  it('honours min replicas', () => {
    const decision = planScaleIn({ current: four, target: 1, loads: four.map((a) => load(a, {})), minReplicas: 3 });
    expect(decision.victims).toHaveLength(1);
    expect(decision.stoppedAbove?.reason).toMatch(/minReplicas 3/);
  });
});
