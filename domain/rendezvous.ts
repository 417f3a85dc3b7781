// Rendezvous hashing (DESIGN.md §3, reference/placement-records.txt): for a workload, each runtime
// scores sha256("<name>\n<runtimeId>"); the highest score ranks first, equal scores fall back to
// the runtime id.
//
// Pure computation over node:crypto and nothing else, so that a worker thread can load it
// (activities/rendezvous-threads.ts). The hot path ranks by a key, the digest's first 53 bits as a
// number, and goes back to the full digest only when two keys are equal: the order is the order of
// the hex scores, exactly. RendezvousKeyCache keeps keys across passes in the process that holds it.
import * as crypto from 'node:crypto';

// ---------------------------------------------------------------------------------------------
// Scores and keys

/**
 * Lowercase hex SHA-256 of the UTF-8 bytes of `text`. The one-shot `crypto.hash` (Node ≥ 20.12)
 * avoids a Hash object; older Node falls back to createHash.
 */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * The digest as a 'binary' (latin1) string, one char a byte: measured cheaper than hex (half the
 * chars) and than a Buffer (no allocation of a buffer object).
 */
const sha256Bytes: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'binary')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('binary');

/** The rendezvous score of a runtime for a workload: sha256("<name>\n<runtimeId>") in hex. */
export function rendezvousScore(name: string, runtimeId: string): string {
  return sha256Hex(`${name}\n${runtimeId}`);
}

/**
 * The first 53 bits of the rendezvous score as a number (exact in a double): a higher key is a
 * higher score; equal keys say nothing, and compareKeyed then reads the full scores.
 */
export function rendezvousKey(name: string, runtimeId: string): number {
  const d = sha256Bytes(`${name}\n${runtimeId}`);
  const high32 = d.charCodeAt(0) * 0x1000000 + ((d.charCodeAt(1) << 16) | (d.charCodeAt(2) << 8) | d.charCodeAt(3));
  const low21 = (d.charCodeAt(4) << 13) | (d.charCodeAt(5) << 5) | (d.charCodeAt(6) >>> 3);
  return high32 * 0x200000 + low21;
}

/** No key computed yet at this position (keys are ≥ 0). */
export const NO_KEY = -1;

export interface ScoredRuntime {
  runtimeId: string;
  /** lowercase hex, all of one length, so string order is numeric order */
  score: string;
}

/** Rendezvous comparator: highest score first; equal scores fall back to runtime id ascending. */
export function compareRendezvous(a: ScoredRuntime, b: ScoredRuntime): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  if (a.runtimeId === b.runtimeId) return 0;
  return a.runtimeId < b.runtimeId ? -1 : 1;
}

/** Runtime ids in rendezvous order for `name`. `score` is injectable so tests can force ties. */
export function rendezvousOrder(
  name: string,
  runtimes: ReadonlyArray<{ id: string }>,
  score: (name: string, runtimeId: string) => string = rendezvousScore,
): string[] {
  return runtimes
    .map((runtime): ScoredRuntime => ({ runtimeId: runtime.id, score: score(name, runtime.id) }))
    .sort(compareRendezvous)
    .map((scored) => scored.runtimeId);
}

/** compareRendezvous for runtimes given with their keys: the full scores are read only on equal keys. */
export function compareKeyed(name: string, keyA: number, idA: string, keyB: number, idB: string): number {
  if (keyA !== keyB) return keyA > keyB ? -1 : 1;
  if (idA === idB) return 0;
  return compareRendezvous({ runtimeId: idA, score: rendezvousScore(name, idA) }, { runtimeId: idB, score: rendezvousScore(name, idB) });
}

/** Computes the keys of `name` that `keys` lacks (NO_KEY) for the runtimes `ids`; answers how many. */
export function fillKeys(name: string, ids: readonly string[], keys: Float64Array): number {
  let computed = 0;
  for (let position = 0; position < ids.length; position++) {
    if (keys[position] !== NO_KEY) continue;
    keys[position] = rendezvousKey(name, ids[position]);
    computed++;
  }
  return computed;
}

/** The positions of `keys` still without a key. */
export function missingPositions(keys: Float64Array): Int32Array {
  let missing = 0;
  for (let position = 0; position < keys.length; position++) if (keys[position] === NO_KEY) missing++;
  const positions = new Int32Array(missing);
  for (let position = 0, at = 0; at < missing; position++) if (keys[position] === NO_KEY) positions[at++] = position;
  return positions;
}

/**
 * Positions (into `ids`) of the first `limit` runtimes in rendezvous order among those `admit`
 * accepts, given every runtime's key. For a small `limit` the best are kept in a short sorted
 * array, and `admit` is asked only of a runtime whose key could still make the cut: a pass over
 * many runtimes is mostly number comparisons.
 */
export function topAdmitted(name: string, ids: readonly string[], keys: Float64Array, limit: number, admit: (position: number) => boolean): number[] {
  const count = ids.length;
  const before = (i: number, j: number): boolean => compareKeyed(name, keys[i], ids[i], keys[j], ids[j]) < 0;
  if (limit <= 0 || count === 0) return [];
  if (limit > 16) {
    const admitted: number[] = [];
    for (let i = 0; i < count; i++) if (admit(i)) admitted.push(i);
    admitted.sort((i, j) => compareKeyed(name, keys[i], ids[i], keys[j], ids[j]));
    if (admitted.length > limit) admitted.length = limit;
    return admitted;
  }
  const order: number[] = [];
  for (let i = 0; i < count; i++) {
    if (order.length === limit) {
      const last = order[limit - 1];
      if (keys[i] < keys[last] || (keys[i] === keys[last] && !before(i, last))) continue;
    }
    if (!admit(i)) continue;
    let at = order.length < limit ? order.length : limit - 1;
    if (order.length < limit) order.push(i);
    while (at > 0 && before(i, order[at - 1])) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = i;
  }
  return order;
}

// ---------------------------------------------------------------------------------------------
// Keys kept across passes

/**
 * The runtime ids that a workload's keys are laid out by: a pass's eligible runtimes for one
 * selector. Interned by the cache, so equal lists from two passes are one object.
 */
export interface KeyLayout {
  readonly ids: readonly string[];
  /** the interning key */
  readonly joined: string;
}

interface CachedKeys {
  layout: KeyLayout;
  keys: Float64Array;
}

/** 8 M keys: 64 MiB of Float64, 10,000 workloads × 800 eligible runtimes. */
export const DEFAULT_MAX_KEYS = 8_000_000;

/**
 * Rendezvous keys per (workload name, runtime id), kept across placement passes by the process
 * that holds it (activities/, never a workflow). A key is a function of exactly those two strings,
 * so a cached key can never be stale: a new name or a new runtime id is a new key. Keys are held
 * per workload, laid out by the eligible runtimes they were computed for; a pass with another
 * eligible set re-lays them out (a runtime gone drops its key, a new one has none yet). Bounded:
 * past `maxKeys` the least recently used workloads are dropped.
 */
export class RendezvousKeyCache {
  /** digests computed into this cache since it was made (tests and benchmarks) */
  digestsComputed = 0;
  private readonly layouts = new Map<string, KeyLayout>();
  private readonly layoutUsers = new Map<KeyLayout, number>();
  /** by workload name, least recently used first */
  private readonly byName = new Map<string, CachedKeys>();
  /** new layout → old layout → the old position of each new position (−1: none) */
  private readonly relayouts = new WeakMap<KeyLayout, WeakMap<KeyLayout, Int32Array>>();
  private held = 0;

  constructor(readonly maxKeys: number = DEFAULT_MAX_KEYS) {}

  /** How many keys (and workloads) the cache holds. */
  get size(): { keys: number; workloads: number } {
    return { keys: this.held, workloads: this.byName.size };
  }

  /** The interned layout of these runtime ids, in this order. */
  layout(ids: readonly string[]): KeyLayout {
    const joined = ids.join('\n');
    let layout = this.layouts.get(joined);
    if (!layout) {
      layout = { ids: [...ids], joined };
      this.layouts.set(joined, layout);
      this.layoutUsers.set(layout, 0);
    }
    return layout;
  }

  /**
   * The keys of `name` laid out by `layout`, NO_KEY where none was computed yet. The caller
   * writes the keys it computes into the array: it is the cache's own.
   */
  keysFor(name: string, layout: KeyLayout): Float64Array {
    const cached = this.byName.get(name);
    if (cached) {
      this.byName.delete(name);
      this.byName.set(name, cached);
      if (cached.layout === layout) return cached.keys;
      const keys = this.relayout(cached, layout);
      this.release(cached.layout);
      this.held += keys.length - cached.keys.length;
      cached.layout = layout;
      cached.keys = keys;
      this.use(layout);
      this.evict();
      return keys;
    }
    const keys = new Float64Array(layout.ids.length).fill(NO_KEY);
    this.byName.set(name, { layout, keys });
    this.use(layout);
    this.held += keys.length;
    this.evict();
    return keys;
  }

  private relayout(cached: CachedKeys, layout: KeyLayout): Float64Array {
    let fromOld = this.relayouts.get(layout)?.get(cached.layout);
    if (!fromOld) {
      const oldPosition = new Map(cached.layout.ids.map((id, position) => [id, position]));
      fromOld = Int32Array.from(layout.ids, (id) => oldPosition.get(id) ?? -1);
      let byOld = this.relayouts.get(layout);
      if (!byOld) this.relayouts.set(layout, (byOld = new WeakMap()));
      byOld.set(cached.layout, fromOld);
    }
    const keys = new Float64Array(layout.ids.length);
    for (let i = 0; i < keys.length; i++) keys[i] = fromOld[i] < 0 ? NO_KEY : cached.keys[fromOld[i]];
    return keys;
  }

  private use(layout: KeyLayout): void {
    if (!this.layoutUsers.has(layout)) this.layouts.set(layout.joined, layout);
    this.layoutUsers.set(layout, (this.layoutUsers.get(layout) ?? 0) + 1);
  }

  private release(layout: KeyLayout): void {
    const users = (this.layoutUsers.get(layout) ?? 1) - 1;
    if (users > 0) {
      this.layoutUsers.set(layout, users);
      return;
    }
    this.layoutUsers.delete(layout);
    if (this.layouts.get(layout.joined) === layout) this.layouts.delete(layout.joined);
  }

  /** Drops least recently used workloads past maxKeys; the most recent one always stays. */
  private evict(): void {
    while (this.held > this.maxKeys && this.byName.size > 1) {
      const [name, oldest] = this.byName.entries().next().value as [string, CachedKeys];
      this.byName.delete(name);
      this.held -= oldest.keys.length;
      this.release(oldest.layout);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Keys computed ahead of a pass, in any thread

/**
 * The keys a pass lacks for some workloads, in a form a worker thread can take (structured
 * clone): job j is workload names[j], over lists[listOf[j]], at `positions[j]` of that list
 * (null: every position), its keys written at out[start[j] …].
 */
export interface KeyWork {
  lists: (readonly string[])[];
  names: string[];
  listOf: Int32Array;
  positions: (Int32Array | null)[];
  /** length names.length + 1; start[names.length] is the total */
  start: Int32Array;
}

/** Computes the keys of jobs [fromJob, toJob) into `out` (the same positions in every thread). */
export function computeKeyWork(work: KeyWork, fromJob: number, toJob: number, out: Float64Array): void {
  for (let job = fromJob; job < toJob; job++) {
    const name = work.names[job];
    const ids = work.lists[work.listOf[job]];
    const positions = work.positions[job];
    let at = work.start[job];
    if (positions === null) for (let p = 0; p < ids.length; p++) out[at++] = rendezvousKey(name, ids[p]);
    else for (let k = 0; k < positions.length; k++) out[at++] = rendezvousKey(name, ids[positions[k]]);
  }
}

/** Job boundaries cutting `work` into about `chunks` runs of equal key counts. */
export function chunkKeyWork(work: KeyWork, chunks: number): Int32Array {
  const jobs = work.names.length;
  const total = work.start[jobs];
  const bounds = [0];
  for (let job = 1; job < jobs && bounds.length < chunks; job++) {
    if (work.start[job] >= (total * bounds.length) / chunks) bounds.push(job);
  }
  bounds.push(jobs);
  return Int32Array.from(bounds);
}
