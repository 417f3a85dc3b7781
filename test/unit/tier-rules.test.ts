import { scaleInViolations } from '../../domain/tier-rules';

describe('scaleInViolations', () => {
  const rule = (minReplicas: number, open: { label: string; endMs: number }[] = []) => ({ tier: 'web', minReplicas, openScaleInWindows: open });

  it('names a target below a tier minReplicas', () => {
    expect(scaleInViolations(1, [rule(2)])).toEqual(['tier web: minReplicas is 2, below it is 1']);
    expect(scaleInViolations(2, [rule(2)])).toEqual([]);
  });

  it('names every open change window that forbids scale-in, with when it closes', () => {
    const endMs = Date.UTC(2030, 0, 1, 17, 0, 0);
    expect(scaleInViolations(3, [rule(1, [{ label: '"0 9 * * 1-5" (28800000 ms, UTC)', endMs }])]))
      .toEqual(['tier web: change window "0 9 * * 1-5" (28800000 ms, UTC) forbids scale-in until 2030-01-01T17:00:00.000Z']);
  });

  it('checks every tier that holds the workload', () => {
    expect(scaleInViolations(1, [rule(1), { ...rule(3), tier: 'api' }])).toEqual(['tier api: minReplicas is 3, below it is 1']);
    expect(scaleInViolations(1, [])).toEqual([]);
  });
});
