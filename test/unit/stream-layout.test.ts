// The layout arithmetic of a stream job (domain/stream.ts): every key group and every partition has
// exactly one owner at any parallelism, indices map back and forth, and scaling stays in bounds.
import {
  keyGroupOf, keyGroupRange, operatorBlocks, ownerOfKeyGroup, scaleParallelism, sourcePartitions, subtaskAt, subtaskCount, withParallelism,
} from '../../domain/stream';
import { StreamSpecSchema, type StreamSpec } from '../../protocol';

const spec = (parallelism: { src: number; agg: number; out: number }, extra: Partial<StreamSpec> = {}): StreamSpec =>
  StreamSpecSchema.parse({
    source: 'clicks', sink: 'click_counts', partitions: 8, checkpointIntervalMs: 1000, maxParallelism: 128,
    operators: [
      { id: 'src', kind: 'source', parallelism: parallelism.src },
      { id: 'agg', kind: 'keyed-aggregate', parallelism: parallelism.agg },
      { id: 'out', kind: 'sink', parallelism: parallelism.out },
    ],
    ...extra,
  });

const MAX_PARALLELISMS = [1, 2, 7, 64, 128, 1000];

describe('key groups', () => {
  it('are covered 0..M-1 exactly once, contiguously, across any parallelism', () => {
    for (const maxParallelism of MAX_PARALLELISMS) {
      for (let parallelism = 1; parallelism <= Math.min(maxParallelism, 40); parallelism++) {
        let next = 0;
        for (let index = 0; index < parallelism; index++) {
          const { start, end } = keyGroupRange(index, parallelism, maxParallelism);
          expect(start).toBe(next); // contiguous, no gap and no overlap
          expect(end).toBeGreaterThan(start); // parallelism ≤ maxParallelism: nobody is left empty
          next = end;
        }
        expect(next).toBe(maxParallelism);
      }
    }
  });

  it('have the owner keyGroupRange gives them (ownerOfKeyGroup is its inverse)', () => {
    for (const maxParallelism of MAX_PARALLELISMS) {
      for (const parallelism of [1, 2, 3, 5, 7, maxParallelism].filter((p) => p <= maxParallelism)) {
        for (let index = 0; index < parallelism; index++) {
          const { start, end } = keyGroupRange(index, parallelism, maxParallelism);
          for (let group = start; group < end; group++) expect(ownerOfKeyGroup(group, parallelism, maxParallelism)).toBe(index);
        }
      }
    }
  });

  it('keep a key in one group: stable, in range, and spread over the groups', () => {
    const keys = Array.from({ length: 10_000 }, (_, i) => `user-${i}`);
    const counts = new Array<number>(64).fill(0);
    const groups = keys.map((key) => keyGroupOf(key, 64));
    expect(keys.map((key) => keyGroupOf(key, 64))).toEqual(groups);
    expect(groups.every((group) => Number.isInteger(group) && group >= 0 && group < 64)).toBe(true);
    for (const group of groups) counts[group] += 1;
    // 10,000 keys over 64 groups: about 156 each; a poor hash piles them up
    expect(Math.min(...counts)).toBeGreaterThan(100);
    expect(Math.max(...counts)).toBeLessThan(220);
    expect(keyGroupOf('', 128)).toBe(keyGroupOf('', 128));
    expect(keyGroupOf('a', 1)).toBe(0);
  });
});

describe('source partitions', () => {
  it('cover every partition once, each subtask a contiguous range', () => {
    for (const partitions of [1, 2, 4, 7, 8, 100]) {
      for (let parallelism = 1; parallelism <= partitions; parallelism++) {
        const all = Array.from({ length: parallelism }, (_, index) => sourcePartitions(index, parallelism, partitions));
        for (const range of all) {
          expect(range.length).toBeGreaterThan(0);
          range.forEach((p, i) => i > 0 && expect(p).toBe(range[i - 1] + 1));
        }
        expect(all.flat()).toEqual(Array.from({ length: partitions }, (_, p) => p));
      }
    }
  });
});

describe('subtasks', () => {
  it('take contiguous blocks of job-global indices in spec order', () => {
    const job = spec({ src: 2, agg: 3, out: 1 });
    expect(operatorBlocks(job)).toEqual([
      { id: 'src', kind: 'source', parallelism: 2, base: 0 },
      { id: 'agg', kind: 'keyed-aggregate', parallelism: 3, base: 2 },
      { id: 'out', kind: 'sink', parallelism: 1, base: 5 },
    ]);
    expect(subtaskCount(job)).toBe(6);
    expect(Array.from({ length: 6 }, (_, i) => subtaskAt(job, i)).map((s) => `${s.operator}/${s.operatorIndex}`))
      .toEqual(['src/0', 'src/1', 'agg/0', 'agg/1', 'agg/2', 'out/0']);
    expect(subtaskAt(job, 3)).toEqual({ index: 3, operator: 'agg', kind: 'keyed-aggregate', operatorIndex: 1, parallelism: 3 });
  });

  it('refuse an index outside the job', () => {
    const job = spec({ src: 1, agg: 1, out: 1 });
    expect(() => subtaskAt(job, 3)).toThrow(RangeError);
    expect(() => subtaskAt(job, -1)).toThrow(RangeError);
  });
});

describe('scaling a job', () => {
  it('scales every operator proportionally', () => {
    const job = spec({ src: 2, agg: 2, out: 1 });
    expect(scaleParallelism(job, 10)).toEqual({ src: 4, agg: 4, out: 2 });
    expect(scaleParallelism(job, 5)).toEqual({ src: 2, agg: 2, out: 1 });
  });

  it('keeps each operator at least 1, a source at most its partitions, all at most maxParallelism', () => {
    const job = spec({ src: 4, agg: 4, out: 2 }, { maxParallelism: 16 });
    expect(scaleParallelism(job, 1)).toEqual({ src: 1, agg: 1, out: 1 });
    expect(scaleParallelism(job, 1000)).toEqual({ src: 8, agg: 16, out: 16 });
  });

  it('replaces only the operators named', () => {
    const job = spec({ src: 2, agg: 2, out: 1 });
    const scaled = withParallelism(job, { agg: 3 });
    expect(scaled.operators.map((o) => o.parallelism)).toEqual([2, 3, 1]);
    expect(job.operators[1].parallelism).toBe(2); // the original is untouched
    expect(StreamSpecSchema.safeParse(withParallelism(job, scaleParallelism(job, 7))).success).toBe(true);
  });
});
