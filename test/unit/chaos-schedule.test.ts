// The chaos schedule (harness/chaos/schedule.ts) is a pure function of its seed: a failure's seed replays it.
import { buildSchedule, describeStep, prng } from '../../harness/chaos/schedule';

test('the same seed gives the same schedule; another seed another one', () => {
  expect(buildSchedule(7, 40)).toEqual(buildSchedule(7, 40));
  expect(buildSchedule(7, 40)).not.toEqual(buildSchedule(8, 40));
  // a longer run starts as the shorter one did
  expect(buildSchedule(7, 60).slice(0, 40)).toEqual(buildSchedule(7, 40));
});

test('a schedule mixes operations and faults, each with its bounds', () => {
  const steps = buildSchedule(1, 400);
  const kinds = new Set(steps.map((s) => s.action.kind));
  for (const kind of ['scale', 'plan-apply', 'rescale', 'recover', 'tier-signal', 'cancel', 'abort', 'redefine', 'kill', 'pause', 'unwritable']) expect(kinds).toContain(kind);
  for (const { action, gapMs } of steps) {
    expect(gapMs).toBeGreaterThanOrEqual(300);
    expect(gapMs).toBeLessThanOrEqual(2_500);
    if (action.kind === 'scale' || action.kind === 'plan-apply') expect([1, 2, 3]).toContain(action.replicas);
    if (action.kind === 'kill' || action.kind === 'pause' || action.kind === 'unwritable') expect(action.durationMs).toBeGreaterThanOrEqual(1_000);
    if (action.kind === 'unwritable') expect([0, 1, 2]).toContain(action.index);
  }
  expect(buildSchedule(1, 100, { faults: false }).some((s) => ['kill', 'pause', 'unwritable'].includes(s.action.kind))).toBe(false);
  expect(describeStep(steps[0])).toMatch(/\S/);
});

test('prng: the same stream for the same seed, in [0, 1)', () => {
  const a = prng(42);
  const b = prng(42);
  const values = Array.from({ length: 1000 }, () => a());
  expect(values).toEqual(Array.from({ length: 1000 }, () => b()));
  expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
  expect(new Set(values).size).toBeGreaterThan(990);
});

test('network nemeses (issue 35) replace some faults, from a stream of their own: every other step of a seed is what it was', () => {
  const plain = buildSchedule(5, 400);
  const networked = buildSchedule(5, 400, { network: true });
  const networkKinds = ['partition', 'slow-link', 'clock-skew', 'cut-store'];
  expect(plain.some((s) => networkKinds.includes(s.action.kind))).toBe(false);
  const replaced = networked.filter((s) => networkKinds.includes(s.action.kind));
  expect(new Set(replaced.map((s) => s.action.kind))).toEqual(new Set(networkKinds));
  expect(new Set(replaced.flatMap((s) => (s.action.kind === 'partition' ? [s.action.cut] : [])))).toEqual(new Set(['isolate', 'inbound', 'to-api', 'control-plane']));
  networked.forEach((step, i) => {
    expect(step.gapMs).toBe(plain[i]!.gapMs);
    if (!networkKinds.includes(step.action.kind)) expect(step).toEqual(plain[i]);
    else expect(['kill', 'pause', 'unwritable']).toContain(plain[i]!.action.kind);
    if (step.action.kind === 'clock-skew') expect([30, -30]).toContain(step.action.seconds);
    if (networkKinds.includes(step.action.kind)) expect(describeStep(step)).toMatch(/ms$/);
  });
});
