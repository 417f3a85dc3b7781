// The one choice of the operation that changes a workload's size, for every door (domain/scale-choice.ts).
import { chooseScale, type ScaleAsk } from '../../domain/scale-choice';

const ask = (overrides: Partial<ScaleAsk>): ScaleAsk => ({ door: 'request', workload: 'web', kind: 'service', current: 2, target: 4, ...overrides });

describe('chooseScale', () => {
  test('a request: up is scaleOut, down is scaleIn, both under scale:<name>; the same size is a conflict', () => {
    expect(chooseScale(ask({ target: 4 }))).toEqual({ workflow: 'scaleOut', workflowId: 'scale:web' });
    expect(chooseScale(ask({ target: 1, kind: 'consumer' }))).toEqual({ workflow: 'scaleIn', workflowId: 'scale:web' });
    expect(chooseScale(ask({ target: 2 }))).toEqual({ refused: 'conflict', message: 'web already runs 2 replica(s)' });
  });

  test('manual approval is for scale-out only', () => {
    expect(chooseScale(ask({ target: 4, approval: 'manual' }))).toMatchObject({ workflow: 'scaleOut' });
    expect(chooseScale(ask({ target: 1, approval: 'manual' }))).toMatchObject({ refused: 'validation-failed', message: 'manual approval applies to scale-out only' });
    expect(chooseScale(ask({ kind: 'stream', target: 6, approval: 'manual' }))).toMatchObject({ refused: 'validation-failed' });
  });

  test('a stream job: a request replans every operator, the autoscaler rescales its aggregate', () => {
    expect(chooseScale(ask({ kind: 'stream', target: 6 }))).toEqual({ workflow: 'stopTheWorldReplan', workflowId: 'replan:web' });
    expect(chooseScale(ask({ kind: 'stream', target: 1, door: 'autoscaler' }))).toEqual({ workflow: 'rescaleOperator', workflowId: 'rescale:web' });
    expect(chooseScale(ask({ kind: 'service', target: 1, door: 'autoscaler' }))).toEqual({ workflow: 'scaleIn', workflowId: 'scale:web' });
  });

  test('a plan: up and down go through scaleOut and scaleIn; a first placement, a same-size plan and a stream job apply as planned', () => {
    expect(chooseScale(ask({ door: 'plan', target: 4 }))).toEqual({ workflow: 'scaleOut', workflowId: 'scale:web' });
    expect(chooseScale(ask({ door: 'plan', target: 1 }))).toEqual({ workflow: 'scaleIn', workflowId: 'scale:web' });
    for (const other of [{ current: 0 }, { target: 2 }, { kind: 'stream' as const }]) {
      expect(chooseScale(ask({ door: 'plan', ...other }))).toEqual({ workflow: 'applyPlan', workflowId: 'scale:web' });
    }
  });

  test('chaos seed 10: a plan short of room never shrinks what runs (a plan for 3 that placed 0 is no scale-in to 0)', () => {
    expect(chooseScale(ask({ door: 'plan', current: 2, target: 0, unplaced: 3 }))).toEqual({
      refused: 'conflict',
      message: 'the plan places 0 replica(s) of web, 3 short of what it asked for (too few eligible runtimes when it was made), below the 2 that run; plan again once the runtimes are back',
    });
    expect(chooseScale(ask({ door: 'plan', current: 0, target: 0, unplaced: 2 }))).toMatchObject({ refused: 'conflict' });
    // short, but still above what runs: a scale-out, whose gates judge the shortfall
    expect(chooseScale(ask({ door: 'plan', current: 1, target: 2, unplaced: 1 }))).toEqual({ workflow: 'scaleOut', workflowId: 'scale:web' });
  });
});
