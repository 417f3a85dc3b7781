// The rollout's pure step planning (domain/rollout.ts): a canary of one, then batches; replicas
// already on the target left alone; a replacement keeps runtime, index and partitions, takes a new id
// minted on the fence its write takes, and the revision it is to run.
import { planRolloutSteps, replaceReplicas } from '../../domain/rollout';
import type { Assignment } from '../../protocol';

const replica = (index: number, revision?: string, extra: Partial<Assignment> = {}): Assignment => ({
  runtimeId: `agent-${index % 2}`, index, taskId: `web-${index}-g1`, ...(revision ? { revision } : {}), ...extra,
});

describe('planRolloutSteps', () => {
  it('a canary step of one, then the rest in batches of half, rounded up, in index order', () => {
    const fleet = [replica(2, 'old'), replica(0, 'old'), replica(1, 'old')];
    expect(planRolloutSteps(fleet, 'new')).toEqual([
      { role: 'canary', taskIds: ['web-0-g1'] },
      { role: 'batch', taskIds: ['web-1-g1', 'web-2-g1'] },
    ]);
  });

  it('takes the batch size asked for', () => {
    const fleet = [0, 1, 2, 3, 4].map((i) => replica(i, 'old'));
    expect(planRolloutSteps(fleet, 'new', 2).map((s) => s.taskIds.length)).toEqual([1, 2, 2]);
    expect(planRolloutSteps(fleet, 'new', 1).map((s) => s.role)).toEqual(['canary', 'batch', 'batch', 'batch', 'batch']);
  });

  it('leaves replicas on the target alone (a resumed rollout), and plans nothing when all are', () => {
    const fleet = [replica(0, 'new'), replica(1, 'old'), replica(2, 'new')];
    expect(planRolloutSteps(fleet, 'new')).toEqual([{ role: 'canary', taskIds: ['web-1-g1'] }]);
    expect(planRolloutSteps([replica(0, 'new')], 'new')).toEqual([]);
  });

  it('a replica that records no revision runs the current one: nothing to replace', () => {
    expect(planRolloutSteps([replica(0), replica(1)], 'new')).toEqual([]);
  });
});

describe('replaceReplicas', () => {
  it('replaces only the named replicas, on their runtime and index, with a new id on the next fence', () => {
    const fleet = [replica(0, 'old', { partitions: [0, 2], ports: { public: 1, internal: 2 } }), replica(1, 'old', { partitions: [1, 3] })];
    const { assignments, replacements } = replaceReplicas(fleet, { 'web-0-g1': 'new' }, { workload: 'web', fence: 7, generation: 1 });
    expect(assignments).toEqual([
      { runtimeId: 'agent-0', index: 0, taskId: 'web-0-g1-f8', revision: 'new', partitions: [0, 2] },
      fleet[1],
    ]);
    expect(replacements).toEqual([{ from: fleet[0], to: assignments[0] }]);
  });

  it('rolls back with each replica\'s own revision', () => {
    const fleet = [replica(0, 'new'), replica(1, 'new')];
    const { assignments } = replaceReplicas(fleet, { 'web-0-g1': 'a', 'web-1-g1': 'b' }, { workload: 'web', fence: 3, generation: 2 });
    expect(assignments.map((a) => [a.taskId, a.revision])).toEqual([['web-0-g2-f4', 'a'], ['web-1-g2-f4', 'b']]);
  });

  it('refuses a replica the placement no longer holds', () => {
    expect(() => replaceReplicas([replica(0, 'old')], { 'web-9-g1': 'new' }, { workload: 'web', fence: 1, generation: 1 })).toThrow(/no replica web-9-g1/);
  });
});
