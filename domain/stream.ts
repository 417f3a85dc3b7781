// The layout of a stream job (DESIGN.md §5 "stream"): which subtask a job-global index is, which
// partitions a source subtask reads, which key group a key belongs to and which aggregate subtask
// owns it, and how a job's parallelism scales. Pure: no I/O, no clock, no node built-ins, so the
// agent, the control plane and the workflows share the very same arithmetic.
import type { StreamSpec } from '../protocol';

export type StreamOperatorKind = StreamSpec['operators'][number]['kind'];

export interface OperatorBlock {
  id: string;
  kind: StreamOperatorKind;
  parallelism: number;
  /** the job-global index of this operator's subtask 0: operators take contiguous blocks in spec order */
  base: number;
}

export interface SubtaskIdentity {
  /** job-global index */
  index: number;
  operator: string;
  kind: StreamOperatorKind;
  /** index within the operator */
  operatorIndex: number;
  parallelism: number;
}

/** Every operator's block of job-global indices, in spec order. */
export function operatorBlocks(spec: Pick<StreamSpec, 'operators'>): OperatorBlock[] {
  let next = 0;
  return spec.operators.map((op) => {
    // An explicit base (after a hot rescale) wins; otherwise contiguous blocks in spec order.
    const block = { id: op.id, kind: op.kind, parallelism: op.parallelism, base: op.base ?? next };
    next = block.base + op.parallelism;
    return block;
  });
}

/** Every job-global subtask index of the layout, ascending. */
export function subtaskIndices(spec: Pick<StreamSpec, 'operators'>): number[] {
  return operatorBlocks(spec).flatMap((b) => Array.from({ length: b.parallelism }, (_, i) => b.base + i)).sort((a, b) => a - b);
}

/** The job-global indices of one operator's subtasks. */
export function indicesOf(block: OperatorBlock): number[] {
  return Array.from({ length: block.parallelism }, (_, i) => block.base + i);
}

/**
 * The layout after a hot rescale of one operator (append-only identity): every operator keeps its
 * block, recorded as an explicit base, and the rescaled one takes fresh indices past every index in use.
 */
export function appendRescaled(spec: StreamSpec, operator: string, parallelism: number): StreamSpec {
  const blocks = operatorBlocks(spec);
  const next = Math.max(...blocks.map((b) => b.base + b.parallelism));
  return {
    ...spec,
    operators: spec.operators.map((op, i) => (op.id === operator ? { ...op, parallelism, base: next } : { ...op, base: blocks[i].base })),
  };
}

/** The spec laid out contiguously again (a stop-the-world replan starts a new generation so). */
export function contiguousLayout(spec: StreamSpec): StreamSpec {
  return { ...spec, operators: spec.operators.map(({ base: _base, ...op }) => op) };
}

/** How many subtasks the job runs: what placement places (its `replicas`). */
export function subtaskCount(spec: Pick<StreamSpec, 'operators'>): number {
  return spec.operators.reduce((sum, op) => sum + op.parallelism, 0);
}

/** The operator and operator index of a job-global subtask index. */
export function subtaskAt(spec: Pick<StreamSpec, 'operators'>, index: number): SubtaskIdentity {
  for (const block of operatorBlocks(spec)) {
    if (index >= block.base && index < block.base + block.parallelism) {
      return { index, operator: block.id, kind: block.kind, operatorIndex: index - block.base, parallelism: block.parallelism };
    }
  }
  throw new RangeError(`subtask ${index} is outside the job's ${subtaskCount(spec)} subtasks`);
}

/** The block of the (single) operator of a kind. */
export function blockOf(spec: Pick<StreamSpec, 'operators'>, kind: StreamOperatorKind): OperatorBlock {
  const block = operatorBlocks(spec).find((b) => b.kind === kind);
  if (!block) throw new RangeError(`the job has no ${kind} operator`);
  return block;
}

/** The contiguous range [start, end) of 0..total-1 that member `index` of `parallelism` takes. */
export function contiguousRange(index: number, parallelism: number, total: number): { start: number; end: number } {
  return { start: Math.ceil((index * total) / parallelism), end: Math.ceil(((index + 1) * total) / parallelism) };
}

/** The partitions a source subtask reads: a contiguous range of the source table's partitions. */
export function sourcePartitions(operatorIndex: number, parallelism: number, partitions: number): number[] {
  const { start, end } = contiguousRange(operatorIndex, parallelism, partitions);
  return Array.from({ length: end - start }, (_, i) => start + i);
}

/**
 * A key's key group: FNV-1a (32-bit) of its UTF-16 code units, mod maxParallelism. Any stable hash
 * would do; this one is cheap per record and needs no built-in module.
 */
export function keyGroupOf(key: string, maxParallelism: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % maxParallelism;
}

/** The key groups [start, end) an operator subtask owns: contiguous ranges, as in the reference. */
export function keyGroupRange(operatorIndex: number, parallelism: number, maxParallelism: number): { start: number; end: number } {
  return contiguousRange(operatorIndex, parallelism, maxParallelism);
}

/** The operator index that owns a key group: the inverse of keyGroupRange. */
export function ownerOfKeyGroup(group: number, parallelism: number, maxParallelism: number): number {
  return Math.floor((group * parallelism) / maxParallelism);
}

/**
 * Every operator's parallelism scaled so the job's subtasks come to about `replicas`, each at
 * least 1, at most maxParallelism, and a source at most the partitions it can read.
 */
export function scaleParallelism(spec: StreamSpec, replicas: number): Record<string, number> {
  const factor = replicas / subtaskCount(spec);
  const scaled: Record<string, number> = {};
  for (const op of spec.operators) {
    const cap = op.kind === 'source' ? Math.min(spec.maxParallelism, spec.partitions) : spec.maxParallelism;
    scaled[op.id] = Math.min(cap, Math.max(1, Math.round(op.parallelism * factor)));
  }
  return scaled;
}

/** The spec with some operators' parallelism replaced, laid out contiguously (a new generation). */
export function withParallelism(spec: StreamSpec, parallelism: Readonly<Record<string, number>>): StreamSpec {
  return contiguousLayout({ ...spec, operators: spec.operators.map((op) => ({ ...op, parallelism: parallelism[op.id] ?? op.parallelism })) });
}

/** The expected operator chain of a runnable job. */
export const STREAM_OPERATOR_CHAIN: readonly StreamOperatorKind[] = ['source', 'keyed-aggregate', 'sink'];
