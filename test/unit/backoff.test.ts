import { doublingDelays } from '../../lib/backoff';

describe('doublingDelays', () => {
  it('starts at the first delay and doubles up to the maximum, then stays there', () => {
    const next = doublingDelays(10, 100);
    expect(Array.from({ length: 7 }, next)).toEqual([10, 20, 40, 80, 100, 100, 100]);
  });
});
