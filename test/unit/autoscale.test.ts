import {
  AutoscalePolicySchema,
  MAX_RECOMMENDATION_HISTORY,
  decideScale,
  desiredFromSignals,
  inChangeWindow,
  initialAutoscaleState,
  nextEvaluationAt,
  noteRecommendation,
  type AutoscalePolicy,
  type AutoscaleState,
} from '../../domain/autoscale';
import { describeIssues } from '../../protocol';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
// 2024-01-03 is a Wednesday (UTC)
const wednesdayAt = (hour: number, minute = 0) => Date.UTC(2024, 0, 3, hour, minute);

function policy(patch: Record<string, unknown> = {}): AutoscalePolicy {
  return AutoscalePolicySchema.parse({
    workload: 'chat',
    min: 1,
    max: 20,
    signals: {
      activeUsers: { perInstance: 10 },
      qps: { perInstance: 100 },
      cpu: { targetPercent: 60 },
      queueDepth: { perInstance: 50 },
    },
    ...patch,
  });
}

/** No stabilization and no cooldown, so each test turns on only the behaviour it checks. */
const immediate = (patch: Record<string, unknown> = {}) =>
  policy({ scaleDownStabilizationMs: 0, cooldownMs: 0, tolerance: 0, ...patch });

describe('AutoscalePolicySchema', () => {
  it('fills the documented defaults', () => {
    const parsed = policy();
    expect(parsed).toMatchObject({
      tolerance: 0.1,
      scaleUpStabilizationMs: 0,
      scaleDownStabilizationMs: 300000,
      cooldownMs: 60000,
      maxStep: 4,
      changeWindows: [],
    });
  });

  it('refuses min above max, min 0, a policy with no signal and an empty change window', () => {
    const base = { workload: 'chat', min: 1, max: 5, signals: { qps: { perInstance: 10 } } };
    expect(describeIssues(AutoscalePolicySchema.safeParse({ ...base, min: 6 }).error!)).toMatch(/min must be ≤ max/);
    expect(AutoscalePolicySchema.safeParse({ ...base, min: 0 }).success).toBe(false);
    expect(describeIssues(AutoscalePolicySchema.safeParse({ ...base, signals: {} }).error!)).toMatch(/at least one signal/);
    expect(
      AutoscalePolicySchema.safeParse({ ...base, changeWindows: [{ startMinuteOfDay: 60, endMinuteOfDay: 60 }] }).success,
    ).toBe(false);
  });
});

describe('desiredFromSignals', () => {
  it('takes the largest per-signal desired count and reports which signal', () => {
    const result = desiredFromSignals(policy(), {
      currentReplicas: 4,
      activeUsers: 35, // 4
      qps: 720, // 8
      cpuPercent: 90, // ceil(4 × 90 / 60) = 6
      queueDepth: 100, // 2
    });
    expect(result.desired).toBe(8);
    expect(result.signal).toBe('qps');
    expect(result.perSignal).toEqual([
      { signal: 'activeUsers', observed: 35, desired: 4, withinTolerance: false },
      { signal: 'qps', observed: 720, desired: 8, withinTolerance: false },
      { signal: 'cpu', observed: 90, desired: 6, withinTolerance: false },
      { signal: 'queueDepth', observed: 100, desired: 2, withinTolerance: false },
    ]);
  });

  it('lets a different signal win when it is the largest', () => {
    const result = desiredFromSignals(policy(), { currentReplicas: 4, qps: 100, queueDepth: 510 });
    expect(result).toMatchObject({ desired: 11, signal: 'queueDepth' });
  });

  it('clamps each signal to [min, max]', () => {
    const p = policy({ min: 2, max: 10 });
    expect(desiredFromSignals(p, { currentReplicas: 3, qps: 5000 }).desired).toBe(10);
    expect(desiredFromSignals(p, { currentReplicas: 3, qps: 0 }).desired).toBe(2);
    expect(desiredFromSignals(p, { currentReplicas: 3, activeUsers: 1 }).perSignal[0].desired).toBe(2);
  });

  it('rounds up, but not on floating-point noise', () => {
    // 4.2 / 0.6 is 7.000000000000001 in binary floating point
    const p = policy({ signals: { activeUsers: { perInstance: 0.6 } } });
    expect(desiredFromSignals(p, { currentReplicas: 1, activeUsers: 4.2 }).desired).toBe(7);
    expect(desiredFromSignals(policy(), { currentReplicas: 1, activeUsers: 31 }).desired).toBe(4);
  });

  it('ignores signals that were not observed or are not configured (never as zero load)', () => {
    const p = policy({ signals: { qps: { perInstance: 100 } } });
    expect(desiredFromSignals(p, { currentReplicas: 5, activeUsers: 10_000 })).toEqual({ desired: null, signal: null, perSignal: [] });
    expect(desiredFromSignals(p, { currentReplicas: 5, qps: 250 })).toMatchObject({ desired: 3, signal: 'qps' });
  });
});

describe('decideScale', () => {
  it('scales out to the winning signal and records the change time', () => {
    const { decision, state } = decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 4, qps: 800, activeUsers: 10 }, 1_000_000);
    expect(decision).toMatchObject({ action: 'scale-out', from: 4, to: 8, signal: 'qps', recommended: 8, stabilized: 8 });
    expect(decision.reason).toMatch(/qps asks for 8/);
    expect(state.lastChangeAtMs).toBe(1_000_000);
    expect(state.recommendations).toEqual([{ atMs: 1_000_000, desired: 8 }]);
  });

  it('limits one decision to maxStep in either direction', () => {
    const out = decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 2, qps: 1200 }, 0).decision;
    expect(out).toMatchObject({ action: 'scale-out', from: 2, to: 6 });
    expect(out.reason).toMatch(/limited to max step 4/);
    const inward = decideScale(immediate({ maxStep: 3 }), initialAutoscaleState(), { currentReplicas: 12, qps: 100 }, 0).decision;
    expect(inward).toMatchObject({ action: 'scale-in', from: 12, to: 9 });
  });

  it('makes no change inside the tolerance band', () => {
    const p = immediate({ tolerance: 0.1 });
    const within = decideScale(p, initialAutoscaleState(), { currentReplicas: 10, qps: 1100 }, 0);
    // HPA's tolerance: 1100 qps over 10 replicas of 100 is a ratio of 1.1, inside ±0.1 → asks for 10
    expect(within.decision).toMatchObject({ action: 'none', code: 'within-tolerance', from: 10, to: 10, recommended: 10 });
    expect(within.decision.reason).toMatch(/within tolerance/);
    expect(within.state.lastChangeAtMs).toBeUndefined();
    const beyond = decideScale(p, initialAutoscaleState(), { currentReplicas: 10, qps: 1200 }, 0).decision;
    expect(beyond).toMatchObject({ action: 'scale-out', to: 12 });
  });

  it('corrects a count outside [min, max] even within tolerance', () => {
    const decision = decideScale(immediate({ tolerance: 0.5, min: 11 }), initialAutoscaleState(), { currentReplicas: 10, qps: 100 }, 0).decision;
    expect(decision).toMatchObject({ action: 'scale-out', from: 10, to: 11 });
  });

  it('reports "no change" with its reason when the target equals the current count', () => {
    const decision = decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 3, qps: 300 }, 0).decision;
    expect(decision).toMatchObject({ action: 'none', code: 'within-tolerance', from: 3, to: 3, signal: 'qps' });
    expect(decision.reason).toMatch(/^within tolerance 0: qps asks for 3/);
    const exact = decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 3, qps: 250 }, 0).decision;
    expect(exact).toMatchObject({ action: 'none', code: 'at-desired', to: 3 });
    expect(exact.reason).toMatch(/^no change: qps asks for 3/);
  });

  it('makes no decision without an observation of a configured signal', () => {
    const state: AutoscaleState = { recommendations: [{ atMs: 0, desired: 9 }] };
    const result = decideScale(immediate({ scaleDownStabilizationMs: MINUTE }), state, { currentReplicas: 5 }, SECOND);
    expect(result.decision).toMatchObject({ action: 'none', from: 5, to: 5, signal: null, recommended: null });
    expect(result.decision.reason).toMatch(/no observation/);
    expect(result.state.recommendations).toEqual([{ atMs: 0, desired: 9 }]);
  });

  it('holds a scale-in until the highest recommendation of the scale-down window allows it', () => {
    const p = policy({ cooldownMs: 0, scaleDownStabilizationMs: 5 * MINUTE });
    const t0 = 10_000_000;
    let state = decideScale(p, initialAutoscaleState(), { currentReplicas: 10, qps: 1000 }, t0).state;

    const dip = decideScale(p, state, { currentReplicas: 10, qps: 400 }, t0 + MINUTE);
    expect(dip.decision).toMatchObject({ action: 'none', recommended: 4, stabilized: 10 });
    state = dip.state;

    // still within 5 minutes of the recommendation of 10
    expect(decideScale(p, state, { currentReplicas: 10, qps: 400 }, t0 + 5 * MINUTE - 1).decision.action).toBe('none');

    // the 10 has left the window; the 4 from one minute in is the highest left
    const after = decideScale(p, state, { currentReplicas: 10, qps: 400 }, t0 + 5 * MINUTE + 1);
    expect(after.decision).toMatchObject({ action: 'scale-in', from: 10, to: 6, stabilized: 4 });
  });

  it('scales in only as far as the highest recent recommendation', () => {
    const p = policy({ cooldownMs: 0, scaleDownStabilizationMs: 5 * MINUTE, tolerance: 0 });
    const state = decideScale(p, initialAutoscaleState(), { currentReplicas: 10, qps: 700 }, 0).state;
    const decision = decideScale(p, state, { currentReplicas: 10, qps: 200 }, MINUTE).decision;
    expect(decision).toMatchObject({ action: 'scale-in', from: 10, to: 7, recommended: 2, stabilized: 7 });
  });

  it('holds a scale-out until the lowest recommendation of the scale-up window allows it', () => {
    const p = immediate({ scaleUpStabilizationMs: MINUTE });
    const t0 = 5_000_000;
    let state = decideScale(p, initialAutoscaleState(), { currentReplicas: 5, qps: 500 }, t0).state;
    const spike = decideScale(p, state, { currentReplicas: 5, qps: 1000 }, t0 + 30 * SECOND);
    expect(spike.decision).toMatchObject({ action: 'none', recommended: 10, stabilized: 5 });
    state = spike.state;
    const sustained = decideScale(p, state, { currentReplicas: 5, qps: 1000 }, t0 + MINUTE + 1);
    expect(sustained.decision).toMatchObject({ action: 'scale-out', from: 5, to: 9, stabilized: 10 });
  });

  it('waits out the cooldown after a change', () => {
    const p = immediate({ cooldownMs: MINUTE });
    const first = decideScale(p, initialAutoscaleState(), { currentReplicas: 4, qps: 600 }, 0);
    expect(first.decision).toMatchObject({ action: 'scale-out', to: 6 });

    const early = decideScale(p, first.state, { currentReplicas: 6, qps: 900 }, 30 * SECOND);
    expect(early.decision).toMatchObject({ action: 'none', from: 6, to: 6 });
    expect(early.decision.reason).toMatch(/cooldown: 30000 ms left/);
    expect(early.state.lastChangeAtMs).toBe(0);

    const later = decideScale(p, early.state, { currentReplicas: 6, qps: 900 }, MINUTE);
    expect(later.decision).toMatchObject({ action: 'scale-out', from: 6, to: 9 });
    expect(later.state.lastChangeAtMs).toBe(MINUTE);
  });

  it('refuses scale-in during a change window but still scales out', () => {
    const p = immediate({ changeWindows: [{ startMinuteOfDay: 9 * 60, endMinuteOfDay: 17 * 60 }] });
    const refused = decideScale(p, initialAutoscaleState(), { currentReplicas: 8, qps: 200 }, wednesdayAt(10));
    expect(refused.decision).toMatchObject({ action: 'none', from: 8, to: 8, recommended: 2 });
    expect(refused.decision.reason).toMatch(/scale-in refused: change window 09:00–17:00 UTC is open/);
    expect(refused.state.lastChangeAtMs).toBeUndefined();

    expect(decideScale(p, initialAutoscaleState(), { currentReplicas: 8, qps: 1000 }, wednesdayAt(10)).decision).toMatchObject({
      action: 'scale-out',
      to: 10,
    });
    expect(decideScale(p, initialAutoscaleState(), { currentReplicas: 8, qps: 200 }, wednesdayAt(17)).decision).toMatchObject({
      action: 'scale-in',
      to: 4,
    });
  });

  it('keeps its recommendation history bounded and plain JSON', () => {
    const p = policy({ scaleDownStabilizationMs: 10 * MINUTE });
    let state = initialAutoscaleState();
    for (let i = 0; i < 2000; i++) {
      state = decideScale(p, state, { currentReplicas: 5, qps: 100 + (i % 900) }, i * SECOND).state;
    }
    expect(state.recommendations.length).toBeLessThanOrEqual(MAX_RECOMMENDATION_HISTORY);
    expect(state.recommendations[state.recommendations.length - 1].atMs).toBe(1999 * SECOND);

    let sparse = initialAutoscaleState();
    for (let i = 0; i < 50; i++) sparse = decideScale(p, sparse, { currentReplicas: 5, qps: 500 }, i * MINUTE).state;
    // only what the 10-minute window can still see is kept
    expect(sparse.recommendations.map((r) => r.atMs)).toEqual([40, 41, 42, 43, 44, 45, 46, 47, 48, 49].map((m) => m * MINUTE));
    expect(JSON.parse(JSON.stringify(sparse))).toEqual(sparse);
  });
});

describe('autoscaler additions', () => {
  it('keeps a small fleet inside the tolerance band still (ratio per replica, not replica deviation)', () => {
    const p = immediate({ tolerance: 0.1 });
    for (const qps of [380, 395, 410, 420]) {
      const { decision } = decideScale(p, initialAutoscaleState(), { currentReplicas: 4, qps }, 0);
      expect(decision).toMatchObject({ action: 'none', code: 'within-tolerance', to: 4 });
    }
    expect(decideScale(p, initialAutoscaleState(), { currentReplicas: 4, qps: 460 }, 0).decision).toMatchObject({ action: 'scale-out', to: 5 });
    expect(decideScale(p, initialAutoscaleState(), { currentReplicas: 4, qps: 350 }, 0).decision).toMatchObject({ action: 'none', code: 'at-desired' });
  });

  it('codes each reason: stabilizing, cooldown, change window (also as precomputed intervals)', () => {
    const p = policy({ cooldownMs: 0, scaleDownStabilizationMs: MINUTE, tolerance: 0 });
    const high = decideScale(p, initialAutoscaleState(), { currentReplicas: 5, qps: 500 }, 0).state;
    expect(decideScale(p, high, { currentReplicas: 5, qps: 100 }, SECOND).decision.code).toBe('stabilizing');
    const cool = immediate({ cooldownMs: MINUTE });
    expect(decideScale(cool, { recommendations: [], lastChangeAtMs: 0 }, { currentReplicas: 5, qps: 900 }, SECOND).decision.code).toBe('cooldown');
    const intervals = [{ startMs: 0, endMs: 10 * MINUTE, label: '"* * * * *"' }];
    const inside = decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 5, qps: 100 }, MINUTE, { changeIntervals: intervals }).decision;
    expect(inside).toMatchObject({ action: 'none', code: 'change-window', to: 5 });
    expect(inside.reason).toMatch(/change window "\* \* \* \* \*" is open/);
    expect(decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 5, qps: 900 }, MINUTE, { changeIntervals: intervals }).decision.action).toBe('scale-out');
    expect(decideScale(immediate(), initialAutoscaleState(), { currentReplicas: 5, qps: 100 }, 10 * MINUTE, { changeIntervals: intervals }).decision.action).toBe('scale-in');
  });

  it('notes intermediate observations for the scale-down window, and says when to look again', () => {
    const p = policy({ cooldownMs: 30 * SECOND, scaleDownStabilizationMs: MINUTE, tolerance: 0 });
    let state = noteRecommendation(p, initialAutoscaleState(), { currentReplicas: 5, qps: 900 }, 1000);
    expect(state.recommendations).toEqual([{ atMs: 1000, desired: 9 }]);
    const { decision } = decideScale(p, state, { currentReplicas: 5, qps: 100 }, 2000);
    expect(decision).toMatchObject({ action: 'none', code: 'stabilizing', to: 5 }); // the noted spike holds the scale-in
    state = { recommendations: [{ atMs: 1000, desired: 9 }], lastChangeAtMs: 5000 };
    expect(nextEvaluationAt(p, state, 6000)).toBe(35_000); // the cooldown ends first
    expect(nextEvaluationAt(p, state, 40_000)).toBe(61_000); // then the 9 leaves the window
    expect(nextEvaluationAt(p, state, 70_000)).toBeNull();
    expect(noteRecommendation(p, initialAutoscaleState(), { currentReplicas: 5 }, 0)).toEqual(initialAutoscaleState());
  });
});

describe('inChangeWindow', () => {
  const weekdays = { startMinuteOfDay: 9 * 60, endMinuteOfDay: 17 * 60, days: [1, 2, 3, 4, 5] };
  const fridayNight = { startMinuteOfDay: 22 * 60, endMinuteOfDay: 2 * 60, days: [5] };
  const at = (day: number, hour: number, minute = 0) => Date.UTC(2024, 0, day, hour, minute); // 2024-01-05 is a Friday

  it('opens on the listed UTC weekdays only, end exclusive', () => {
    expect(inChangeWindow(weekdays, wednesdayAt(9))).toBe(true);
    expect(inChangeWindow(weekdays, wednesdayAt(16, 59))).toBe(true);
    expect(inChangeWindow(weekdays, wednesdayAt(17))).toBe(false);
    expect(inChangeWindow(weekdays, wednesdayAt(8, 59))).toBe(false);
    expect(inChangeWindow(weekdays, at(6, 10))).toBe(false); // Saturday
    expect(inChangeWindow(weekdays, at(7, 10))).toBe(false); // Sunday
  });

  it('wraps past midnight, the early hours belonging to the day it opened', () => {
    expect(inChangeWindow(fridayNight, at(5, 23))).toBe(true); // Friday 23:00
    expect(inChangeWindow(fridayNight, at(6, 1))).toBe(true); // Saturday 01:00
    expect(inChangeWindow(fridayNight, at(6, 2))).toBe(false); // Saturday 02:00
    expect(inChangeWindow(fridayNight, at(6, 23))).toBe(false); // Saturday 23:00
    expect(inChangeWindow(fridayNight, at(5, 1))).toBe(false); // Friday 01:00 belongs to Thursday
  });

  it('opens every day when no days are listed', () => {
    const daily = { startMinuteOfDay: 0, endMinuteOfDay: 60 };
    for (let day = 1; day <= 7; day++) expect(inChangeWindow(daily, at(day, 0, 30))).toBe(true);
  });
});
