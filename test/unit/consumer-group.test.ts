import { groupConvergence, lagBehind, partitionList, type GroupFacts } from '../../domain/consumer-group';

const facts = (change: Partial<GroupFacts> = {}): GroupFacts => ({
  group: 'payments', topic: 'orders', state: 'Stable', partitions: 4, lag: 7,
  members: [{ clientId: 'payments-0', partitions: [0, 1] }, { clientId: 'payments-1', partitions: [2, 3] }], unassigned: [],
  ...change,
});

describe('a consumer group as convergence evidence', () => {
  it('converges with one member per replica, stable, every partition assigned', () => {
    expect(groupConvergence(facts(), 2)).toEqual({ converged: true, detail: 'consumer group payments on topic orders: 2 member(s), 2 owning partitions, all 4 assigned; lag 7' });
  });

  it('waits while the member count is not the replica count, naming both', () => {
    expect(groupConvergence(facts(), 3)).toEqual({ converged: false, detail: 'consumer group payments on topic orders: 2 member(s) for 3 replica(s) (state Stable)' });
  });

  it('waits through a rebalance, and while a partition has no member', () => {
    expect(groupConvergence(facts({ state: 'PreparingRebalance' }), 2).detail).toMatch(/rebalancing \(state PreparingRebalance\)/);
    expect(groupConvergence(facts({ unassigned: [1, 2, 3] }), 2).detail).toMatch(/partition\(s\) 1-3 of 4 assigned to no member/);
  });

  it('refuses a drain while a drained task is still a member, naming it', () => {
    expect(groupConvergence(facts(), 2, ['payments-1'])).toEqual({ converged: false, detail: 'consumer group payments on topic orders: drained payments-1 still a member' });
  });

  it('is converged with no member when no replica runs', () => {
    expect(groupConvergence(facts({ members: [], state: 'Empty', unassigned: [0, 1, 2, 3] }), 0).converged).toBe(true);
  });

  it('writes partition lists as runs', () => {
    expect(partitionList([5, 0, 1, 2, 7, 8])).toBe('0-2, 5, 7-8');
    expect(partitionList([])).toBe('');
  });
});

describe('the lag behind a topic', () => {
  it('counts, per partition, the records from the last processed offset to the end; nothing processed counts from 0', () => {
    const ends = new Map([[0, 10], [1, 5], [2, 0]]);
    expect(lagBehind(ends, new Map([[0, 9], [1, 1]]))).toBe(0 + 3 + 0);
    expect(lagBehind(ends, new Map())).toBe(15);
    expect(lagBehind(ends, new Map([[0, 20]]))).toBe(5); // a checkpoint ahead of a stale end: no negative lag
  });
});
