// Task identity (DESIGN.md §3, issue 33 item 1): a new replica never takes an id a live or stopped
// task of its workload held. Before it, ids were `<name>-<index>-g<generation>`: a scale-in
// re-indexed its survivor `dupe-2-g1` to index 1, the next scale-out minted a second `dupe-2-g1`,
// and the scale-in after that stopped both of them (it tells victims apart by task id).
import { buildPlan } from '../../domain/plan';
import { planScaleIn } from '../../domain/scale-in';
import { duplicateTaskIds } from '../../domain/task-identity';
import { seededRandom } from '../../lib/seeded-random';
import { UNKNOWN_CONTRACT, type Assignment, type Placement, type Runtime, type Workload } from '../../protocol';

const NOW = Date.parse('2030-01-01T00:00:00.000Z');
const runtimes: Runtime[] = [0, 1, 2, 3, 4].map((i) => ({
  id: `rt-${i}`, endpoint: `http://127.0.0.1:7400/${i}`, labels: {}, slots: 4, status: 'READY',
  leaseExpiresAt: new Date(NOW + 30_000).toISOString(), fence: 1,
}));
const dupe = {
  name: 'dupe', kind: 'consumer', replicas: 3, selector: {}, revision: 1, retired: false,
  contract: { ...UNKNOWN_CONTRACT, ownership: 'partitioned', partitions: 6 },
  spec: { partitions: 6, source: 'dupe_in', sink: 'dupe_out', workMs: 1 },
} as Workload;

/** One operation as the workflows run it: plan on the current record, then the fenced write (fence + 1). */
function scaleTo(placement: Placement | null, replicas: number, loads: (a: Assignment) => number = () => 1): Placement {
  const current = placement?.assignments ?? [];
  let plan;
  if (placement && replicas < current.length) {
    const decision = planScaleIn({
      current, target: replicas,
      loads: current.map((a) => ({ taskId: a.taskId, runtimeId: a.runtimeId, index: a.index, ownedPartitions: a.partitions?.length ?? 0, inFlight: 0, load: loads(a) })),
    });
    plan = buildPlan({ workload: dupe, replicas: decision.survivors.length, runtimes, placements: [placement], nowMs: NOW, decided: { assignments: decision.survivors, onFence: placement.fence } });
  } else {
    plan = buildPlan({ workload: { ...dupe, replicas }, replicas, runtimes, placements: placement ? [placement] : [], nowMs: NOW });
  }
  return { workload: 'dupe', fence: plan.basis.placementFence + 1, generation: plan.generation, assignments: plan.target };
}

const ids = (placement: Placement) => placement.assignments.map((a) => a.taskId);

describe('task ids', () => {
  it('a generation\'s first placement names tasks by index; later writes mint ids carrying their fence', () => {
    const first = scaleTo(null, 3);
    expect(ids(first)).toEqual(['dupe-0-g1', 'dupe-1-g1', 'dupe-2-g1']);
    const grown = scaleTo(first, 4);
    expect(ids(grown)).toEqual(['dupe-0-g1', 'dupe-1-g1', 'dupe-2-g1', 'dupe-3-g1-f2']);
  });

  it('3 → 2 → 3 → 2: the survivor re-indexed onto a freed index keeps its id and the new replica takes another', () => {
    // replica 1 is the least loaded: it goes, and dupe-2-g1 survives as index 1
    const three = scaleTo(null, 3);
    const two = scaleTo(three, 2, (a) => [5, 1, 5][a.index]);
    expect(two.assignments.map((a) => [a.taskId, a.index])).toEqual([['dupe-0-g1', 0], ['dupe-2-g1', 1]]);
    const threeAgain = scaleTo(two, 3);
    expect(duplicateTaskIds(threeAgain.assignments)).toEqual([]);
    expect(ids(threeAgain)).toEqual(['dupe-0-g1', 'dupe-2-g1', 'dupe-2-g1-f3']);
    // the next scale-in stops exactly one replica and keeps two
    const twoAgain = scaleTo(threeAgain, 2, (a) => [5, 5, 1][a.index]);
    expect(ids(twoAgain)).toEqual(['dupe-0-g1', 'dupe-2-g1']);
    expect(twoAgain.assignments.flatMap((a) => a.partitions ?? []).sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('a scale-in on a record that names one id twice removes nothing and says why', () => {
    const broken: Assignment[] = [
      { runtimeId: 'rt-0', index: 0, taskId: 'dupe-0-g1', partitions: [0, 2] },
      { runtimeId: 'rt-1', index: 1, taskId: 'dupe-2-g1', partitions: [1, 3] },
      { runtimeId: 'rt-2', index: 2, taskId: 'dupe-2-g1', partitions: [4, 5] },
    ];
    const decision = planScaleIn({ current: broken, target: 2, loads: broken.map((a) => ({ taskId: a.taskId, runtimeId: a.runtimeId, index: a.index, ownedPartitions: 2, inFlight: 0, load: 1 })) });
    expect(decision.victims).toEqual([]);
    expect(decision.survivors).toEqual(broken);
    expect(decision.stoppedAbove?.reason).toMatch(/dupe-2-g1 names more than one replica/);
  });

  it('seeded sequences of scale-outs and scale-ins never repeat an id, never lose a partition, and land on the asked size', () => {
    const failures: string[] = [];
    for (let seed = 1; seed <= 200 && failures.length === 0; seed++) {
      const random = seededRandom(seed);
      let placement = scaleTo(null, 1 + Math.floor(random() * 5));
      const everMinted = new Set(ids(placement));
      for (let step = 0; step < 12 && failures.length === 0; step++) {
        const before = new Set(ids(placement));
        const target = 1 + Math.floor(random() * 5);
        const loads = placement.assignments.map(() => Math.floor(random() * 10));
        const from = placement;
        placement = scaleTo(from, target, (a) => loads[from.assignments.indexOf(a)] ?? 0);
        const context = `seed ${seed}, step ${step}: ${ids(from).join(' ')} → ${target}: ${ids(placement).join(' ')}`;
        const partitions = placement.assignments.flatMap((a) => a.partitions ?? []).sort().join(',');
        // an id that left the placement never comes back: only kept ids and never-seen ones
        const reused = ids(placement).filter((id) => !before.has(id) && everMinted.has(id));
        if (duplicateTaskIds(placement.assignments).length > 0) failures.push(`${context}: an id names two replicas`);
        else if (placement.assignments.length !== target) failures.push(`${context}: ${placement.assignments.length} replicas`);
        else if (partitions !== '0,1,2,3,4,5') failures.push(`${context}: partitions ${partitions}`);
        else if (reused.length > 0) failures.push(`${context}: ${reused.join(', ')} minted again`);
        for (const id of ids(placement)) everMinted.add(id);
      }
    }
    expect(failures).toEqual([]);
  });
});
