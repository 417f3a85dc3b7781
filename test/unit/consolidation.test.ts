import { planConsolidation, type ConsolidationWorker } from '../../domain/consolidation';

const worker = (id: string, assigned: string[], capacity: number): ConsolidationWorker => ({ id, assigned, capacity });

describe('planConsolidation', () => {
  it('does nothing at or below the target', () => {
    const workers = [worker('w1', ['u1'], 2), worker('w2', [], 2)];
    expect(planConsolidation({ workers, desiredWorkers: 2 })).toEqual({ moves: [], removed: [] });
    expect(planConsolidation({ workers, desiredWorkers: 3 })).toEqual({ moves: [], removed: [] });
  });

  it('reclaims an idle worker before draining a less loaded busy one', () => {
    const workers = [worker('a', ['u1', 'u2'], 4), worker('c', ['u3'], 4), worker('b', [], 4)];
    expect(planConsolidation({ workers, desiredWorkers: 2 })).toEqual({ moves: [], removed: ['b'] });
    // one further step drains the least loaded busy worker (c) onto a
    expect(planConsolidation({ workers, desiredWorkers: 1 })).toEqual({
      moves: [{ unit: 'u3', from: 'c', to: 'a' }],
      removed: ['b', 'c'],
    });
  });

  it('drains the least loaded worker onto the workers with most room, ties by id', () => {
    const workers = [
      worker('w3', ['p6', 'p7', 'p8'], 5),
      worker('w1', ['p1', 'p2'], 4),
      worker('w2', ['p3', 'p4', 'p5'], 5),
    ];
    // p1: w2 and w3 both have room 2 → w2 (id); p2: w3 now has more room (2 vs 1) → w3
    expect(planConsolidation({ workers, desiredWorkers: 2 })).toEqual({
      moves: [
        { unit: 'p1', from: 'w1', to: 'w2' },
        { unit: 'p2', from: 'w1', to: 'w3' },
      ],
      removed: ['w1'],
    });
  });

  it('rolls back every move of a worker whose units cannot all be placed, ending one above target', () => {
    // w1 (least loaded, tie with w2 by id): u1 fits on w2, then u2 fits nowhere
    const workers = [worker('w1', ['u1', 'u2'], 3), worker('w2', ['u3', 'u4'], 3), worker('w3', ['u5', 'u6', 'u7'], 3)];
    const plan = planConsolidation({ workers, desiredWorkers: 2 });
    expect(plan.moves).toEqual([]);
    expect(plan.removed).toEqual([]);
    expect(plan.stoppedAbove).toEqual({
      target: 2,
      actual: 3,
      reason: expect.stringMatching(/cannot place unit "u2" of worker "w1".*rolled back 1 move/),
    });
  });

  it('keeps moves already committed for earlier workers when a later one rolls back', () => {
    const workers = [worker('w1', ['u1'], 3), worker('w2', ['u2', 'u3'], 3), worker('w3', ['u4', 'u5'], 3)];
    const plan = planConsolidation({ workers, desiredWorkers: 1 });
    expect(plan.moves).toEqual([{ unit: 'u1', from: 'w1', to: 'w2' }]);
    expect(plan.removed).toEqual(['w1']);
    expect(plan.stoppedAbove).toMatchObject({ target: 1, actual: 2 });
  });

  it('stops when the last busy worker has nowhere to go', () => {
    const plan = planConsolidation({ workers: [worker('w1', ['u1'], 5)], desiredWorkers: 0 });
    expect(plan).toMatchObject({ moves: [], removed: [], stoppedAbove: { target: 0, actual: 1 } });
  });

  it('reports one move per unit, from its original worker to its final one', () => {
    const workers = [worker('a', ['u1', 'u2'], 10), worker('b', ['u3'], 10), worker('c', ['u4', 'u5', 'u6'], 10)];
    // b → a first (a has most room); then a (3, tie with c, by id) drains onto c, taking u3 along
    expect(planConsolidation({ workers, desiredWorkers: 1 })).toEqual({
      moves: [
        { unit: 'u3', from: 'b', to: 'c' },
        { unit: 'u1', from: 'a', to: 'c' },
        { unit: 'u2', from: 'a', to: 'c' },
      ],
      removed: ['b', 'a'],
    });
  });

  it('is deterministic in input order and does not mutate its input', () => {
    const workers = [worker('w3', ['p6', 'p7', 'p8'], 5), worker('w1', ['p1', 'p2'], 4), worker('w2', ['p3', 'p4', 'p5'], 5)];
    const snapshot = JSON.parse(JSON.stringify(workers));
    const forward = planConsolidation({ workers, desiredWorkers: 2 });
    const reversed = planConsolidation({ workers: [...workers].reverse(), desiredWorkers: 2 });
    expect(reversed).toEqual(forward);
    expect(workers).toEqual(snapshot);
  });

  describe('with a victim order (idle first by load, from domain/victims)', () => {
    it('removes the named workers in that order, not the ones with fewest units', () => {
      const workers = [worker('light', ['u1'], 4), worker('heavy', ['u2', 'u3'], 4), worker('mid', ['u4', 'u5'], 4)];
      expect(planConsolidation({ workers, desiredWorkers: 2, victimOrder: ['heavy'] })).toEqual({
        moves: [
          { unit: 'u2', from: 'heavy', to: 'light' },
          { unit: 'u3', from: 'heavy', to: 'light' },
        ],
        removed: ['heavy'],
      });
    });

    it('stops short when the order names fewer workers than the target needs', () => {
      const workers = [worker('a', [], 4), worker('b', [], 4), worker('c', [], 4)];
      expect(planConsolidation({ workers, desiredWorkers: 1, victimOrder: ['c'] })).toEqual({ moves: [], removed: ['c'] });
    });

    it('rolls back a named worker whose units cannot all be placed: nothing moved, one above target', () => {
      const workers = [worker('a', ['p0', 'p1', 'p2', 'p3'], 4), worker('b', ['p4', 'p5', 'p6', 'p7'], 4)];
      const plan = planConsolidation({ workers, desiredWorkers: 1, victimOrder: ['b'] });
      expect(plan.moves).toEqual([]);
      expect(plan.removed).toEqual([]);
      expect(plan.stoppedAbove).toMatchObject({ target: 1, actual: 2 });
      expect(plan.stoppedAbove!.reason).toMatch(/"b".*rolled back 0 move/);
    });
  });
});
