// The one choice of the operation that changes a workload's size, for every door (domain/scale-choice.ts).
import { chooseScale, optionsNotTaken, SCALE_REQUEST_OPTIONS, type ScaleAsk } from '../../domain/scale-choice';
import { z } from 'zod';
import { SCALE_OPTIONS_TAKEN, ScaleInInputSchema, ScaleOutInputSchema, ScaleRequestSchema } from '../../protocol';

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

describe('a scale request means one thing (optionsNotTaken)', () => {
  const scaleOut = { workflow: 'scaleOut' as const, workflowId: 'scale:web' };
  const scaleIn = { workflow: 'scaleIn' as const, workflowId: 'scale:web' };
  const replan = { workflow: 'stopTheWorldReplan' as const, workflowId: 'replan:clicks' };

  it('refuses an option the chosen operation would drop, naming it and what it takes', () => {
    expect(optionsNotTaken(scaleOut, { drainTimeoutMs: 5000, soakMs: 0 }, '2 → 4')).toEqual({
      refused: 'validation-failed',
      message: 'drainTimeoutMs does not apply to a scale-out (2 → 4); it takes soakMs, convergeTimeoutMs, steps, accept: leave it out',
    });
    expect(optionsNotTaken(scaleIn, { steps: [1], accept: ['delivery'] }, '4 → 2')?.message).toMatch(/^steps, accept do not apply to a scale-in \(4 → 2\)/);
    expect(optionsNotTaken(replan, { soakMs: 1000 }, '3 → 6')?.message).toMatch(/^soakMs does not apply to a stream job's scale \(the stop-the-world replan\)/);
  });

  it('passes what the operation takes, and options left out', () => {
    expect(optionsNotTaken(scaleOut, { soakMs: 0, steps: [1, 'rest'], accept: ['delivery'], convergeTimeoutMs: 5000 }, '2 → 4')).toBeNull();
    expect(optionsNotTaken(scaleIn, { drainTimeoutMs: 100, perInstanceLimit: 2, override: { reason: 'x' }, force: true, soakMs: 0 }, '4 → 2')).toBeNull();
    expect(optionsNotTaken(scaleIn, { steps: undefined }, '4 → 2')).toBeNull();
    expect(optionsNotTaken(replan, { convergeTimeoutMs: 5000 }, '3 → 6')).toBeNull();
  });

  it('knows every option of the request schema (a new one must be placed)', () => {
    expect([...SCALE_REQUEST_OPTIONS].sort()).toEqual(Object.keys(ScaleRequestSchema.shape).filter((key) => !['replicas', 'approval', 'reason'].includes(key)).sort());
  });

  it('one schema per request: each option a workflow takes has the same type and bounds in the request and in that workflow\'s input', () => {
    // the field itself, without the request's optional or the workflow's default around it
    const core = (field: z.ZodType): unknown => {
      const inner = (field as unknown as { unwrap?: () => z.ZodType }).unwrap?.() ?? (field as unknown as { def: { innerType?: z.ZodType } }).def.innerType;
      return inner && inner !== field ? core(inner) : z.toJSONSchema(field);
    };
    const inputs = { scaleOut: ScaleOutInputSchema.shape, scaleIn: ScaleInInputSchema.shape } as Record<string, Record<string, z.ZodType>>;
    const request = ScaleRequestSchema.shape as Record<string, z.ZodType>;
    let compared = 0;
    for (const [operation, options] of Object.entries(SCALE_OPTIONS_TAKEN)) {
      if (!(operation in inputs)) continue;
      for (const option of [...options, 'reason']) {
        expect({ operation, option, field: core(inputs[operation]![option]!) }).toEqual({ operation, option, field: core(request[option]!) });
        compared += 1;
      }
    }
    expect(compared).toBe(SCALE_OPTIONS_TAKEN.scaleOut.length + SCALE_OPTIONS_TAKEN.scaleIn.length + 2);
    // a bound that differed before (perInstanceLimit had no maximum in the scale-in input)
    expect(ScaleInInputSchema.safeParse({ workload: 'w', replicas: 1, perInstanceLimit: 10_000_000 }).success).toBe(false);
  });
});
