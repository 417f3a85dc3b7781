// domain/steps.ts: the sizes a stepped scale-out goes through.
import { stepSizes } from '../../domain/steps';

describe('stepSizes', () => {
  it('one step without steps, as before', () => {
    expect(stepSizes(2, 8, undefined)).toEqual([8]);
    expect(stepSizes(2, 8, [])).toEqual([8]);
  });

  it('[1, "50%", "rest"] from 2 to 8: one more, half the increase, then the target', () => {
    expect(stepSizes(2, 8, [1, '50%', 'rest'])).toEqual([3, 5, 8]);
  });

  it('always ends at the target, never passes it, and only grows', () => {
    expect(stepSizes(2, 8, [1, 1])).toEqual([3, 4, 8]);
    expect(stepSizes(2, 4, [5, 'rest'])).toEqual([4]);
    expect(stepSizes(2, 8, ['10%', '10%', '100%'])).toEqual([3, 4, 8]);
    expect(stepSizes(1, 2, [1, '50%', 'rest'])).toEqual([2]);
  });

  it('a percentage is of the whole increase, at least one more than the step before', () => {
    expect(stepSizes(0, 10, ['25%', '50%', '75%'])).toEqual([3, 5, 8, 10]);
    expect(stepSizes(4, 5, ['50%'])).toEqual([5]);
  });
});
