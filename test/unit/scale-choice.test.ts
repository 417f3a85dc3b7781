// The one choice of the operation that changes a workload's size, for every door (workflows/scale-choice.ts).
import { chooseScale, type ScaleAsk } from '../../workflows/scale-choice';

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
});
