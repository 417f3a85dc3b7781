// Hot rescale eligibility, the appended layout and where the new subtasks go (domain/rescale.ts,
// domain/stream.ts): pure.
import { placeAppended, rescaleEligibility } from '../../domain/rescale';
import { appendRescaled, contiguousLayout, keyGroupRange, operatorBlocks, subtaskAt, subtaskIndices, withParallelism } from '../../domain/stream';
import { StreamSpecSchema, type StreamSpec } from '../../protocol';

const spec = (agg = 2): StreamSpec => StreamSpecSchema.parse({
  source: 'in_t', sink: 'out_t', partitions: 4, checkpointIntervalMs: 1000, maxParallelism: 64,
  operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: agg }, { id: 'out', kind: 'sink', parallelism: 1 }],
});

describe('rescale eligibility', () => {
  test.each([[2, 4], [4, 2], [2, 8], [8, 2], [3, 6], [6, 3], [1, 5]])('%i → %i is an integer factor: hot', (from, to) => {
    expect(rescaleEligibility(spec(from), 'agg', to)).toMatchObject({ hot: true, from, to });
  });

  test.each([[2, 3], [3, 4], [4, 6], [6, 4]])('%i → %i is not an integer factor: stop-the-world, saying so', (from, to) => {
    const eligibility = rescaleEligibility(spec(from), 'agg', to);
    expect(eligibility).toMatchObject({ hot: false, from, to });
    expect(eligibility.hot === false && eligibility.reason).toMatch(/not an integer factor/);
  });

  test('only the keyed aggregate rescales hot; an unknown operator or no change is refused with the reason', () => {
    expect(rescaleEligibility(spec(), 'src', 4)).toMatchObject({ hot: false, reason: expect.stringMatching(/source: only the keyed-aggregate/) });
    expect(rescaleEligibility(spec(), 'out', 2)).toMatchObject({ hot: false, reason: expect.stringMatching(/sink: only the keyed-aggregate/) });
    expect(rescaleEligibility(spec(), 'nope', 2)).toMatchObject({ hot: false, from: null, reason: expect.stringMatching(/no operator "nope"/) });
    expect(rescaleEligibility(spec(), 'agg', 2)).toMatchObject({ hot: false, reason: expect.stringMatching(/already runs 2/) });
  });
});

describe('the appended layout (append-only identity)', () => {
  test('the rescaled operator takes fresh indices past every index in use; no other index moves', () => {
    const before = spec(2);
    const after = appendRescaled(before, 'agg', 4);
    expect(StreamSpecSchema.safeParse(after).success).toBe(true);
    expect(operatorBlocks(after).map((b) => [b.id, b.base, b.parallelism])).toEqual([['src', 0, 2], ['agg', 5, 4], ['out', 4, 1]]);
    expect(subtaskIndices(after)).toEqual([0, 1, 4, 5, 6, 7, 8]);
    for (const index of [0, 1, 4]) expect(subtaskAt(after, index)).toEqual(subtaskAt(before, index));
    expect(subtaskAt(after, 7)).toMatchObject({ operator: 'agg', operatorIndex: 2, parallelism: 4 });
    // and again: 4 → 2 appends past 8
    const again = appendRescaled(after, 'agg', 2);
    expect(subtaskIndices(again)).toEqual([0, 1, 4, 9, 10]);
  });

  test('a stop-the-world replan lays the job out contiguously again', () => {
    const appended = appendRescaled(spec(2), 'agg', 4);
    expect(subtaskIndices(contiguousLayout(appended))).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(subtaskIndices(withParallelism(appended, { agg: 3 }))).toEqual([0, 1, 2, 3, 4, 5]);
  });

  test('overlapping or partial bases are refused by the schema, naming the field', () => {
    const overlapping = { ...spec(), operators: [{ id: 'src', kind: 'source', parallelism: 2, base: 0 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2, base: 1 }, { id: 'out', kind: 'sink', parallelism: 1, base: 9 }] };
    const parsed = StreamSpecSchema.safeParse(overlapping);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.path.join('.'))).toContain('operators.1.base');
    const partial = { ...spec(), operators: [{ id: 'src', kind: 'source', parallelism: 2, base: 0 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 2 }, { id: 'out', kind: 'sink', parallelism: 1, base: 4 }] };
    expect(StreamSpecSchema.safeParse(partial).error?.issues.map((i) => i.path.join('.'))).toContain('operators.1.base');
  });

  test("with an integer factor each new subtask's key groups come from exactly one old subtask (or the reverse)", () => {
    const owners = (parallelism: number) => Array.from({ length: parallelism }, (_, i) => keyGroupRange(i, parallelism, 64));
    const within = (inner: { start: number; end: number }, outer: { start: number; end: number }) => inner.start >= outer.start && inner.end <= outer.end;
    for (const [from, to] of [[2, 4], [3, 6], [2, 8]]) {
      for (const range of owners(to)) expect(owners(from).filter((old) => within(range, old))).toHaveLength(1);
      for (const range of owners(from)) expect(owners(to).filter((fresh) => within(fresh, range)).length).toBe(to / from);
    }
  });
});

describe('placing the new subtasks', () => {
  const runtimes = [{ id: 'a', slots: 4 }, { id: 'b', slots: 4 }, { id: 'c', slots: 2 }];

  test('spreads them over runtimes with free slots, fewest of the job first, and names what does not fit', () => {
    const placed = placeAppended({ job: 'hot', indices: [5, 6, 7, 8], generation: 1, runtimes, usedSlots: { a: 3, b: 1, c: 1 }, jobSubtasks: { a: 3, b: 1, c: 1 } });
    expect(placed.missing).toEqual([]);
    const perRuntime = placed.assignments.reduce<Record<string, number>>((n, a) => ({ ...n, [a.runtimeId]: (n[a.runtimeId] ?? 0) + 1 }), {});
    expect(perRuntime).toEqual({ a: 1, b: 2, c: 1 });
    expect(placed.assignments.map((a) => a.taskId)).toEqual(['hot-5-g1', 'hot-6-g1', 'hot-7-g1', 'hot-8-g1']);

    const full = placeAppended({ job: 'hot', indices: [5, 6, 7], generation: 1, runtimes, usedSlots: { a: 4, b: 3, c: 2 }, jobSubtasks: {} });
    expect(full.assignments).toHaveLength(1);
    expect(full.missing).toEqual([6, 7]);
  });
});
