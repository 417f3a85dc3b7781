// Rendezvous keys computed on every core before a cold placement pass (issue 23 item 3). The pass
// itself (slot accounting, stickiness, the order of workloads) stays sequential in the calling
// thread and reads the keys from the pass's cache, so its result is the single-threaded one.
//
// The calling thread and the worker threads take chunks of the work from one shared counter until
// none is left (a busy core simply takes fewer), each writing its keys into one shared buffer.
// A worker that fails costs speed, never a result: the calling thread computes what it left.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { chunkKeyWork, computeKeyWork, RendezvousKeyCache, type KeyWork } from '../domain/rendezvous';
import { missingKeys, storeKeys, type PlacementPass, type PlacementWorkload } from '../domain/placement';

/** Below this many missing keys the pass computes them inline: a round trip to a thread costs more. */
export const DEFAULT_MIN_THREADED_KEYS = 50_000;
/** Chunks a thread; more chunks even out a busy core, fewer cost less claiming. */
const CHUNKS_PER_THREAD = 32;

/** What a worker thread is asked: claim chunks of `work` from `next` and write their keys into `out`. */
export interface KeyRequest {
  id: number;
  work: KeyWork;
  chunks: Int32Array;
  /** the next unclaimed chunk, shared (Atomics) */
  next: Int32Array;
  /** chunks done per thread, shared: done[c] = 1 once chunk c's keys are in `out` */
  done: Int32Array;
  out: Float64Array;
}

/** Claims and computes chunks until none is left, the loop every thread runs; answers how many keys it computed. */
export function computeClaimedChunks(request: Omit<KeyRequest, 'id'>): number {
  const { work, chunks } = request;
  const chunkCount = chunks.length - 1;
  let keys = 0;
  for (let chunk = Atomics.add(request.next, 0, 1); chunk < chunkCount; chunk = Atomics.add(request.next, 0, 1)) {
    computeKeyWork(work, chunks[chunk], chunks[chunk + 1], request.out);
    Atomics.store(request.done, chunk, 1);
    keys += work.start[chunks[chunk + 1]] - work.start[chunks[chunk]];
  }
  return keys;
}

export interface FillResult {
  /** keys computed into the pass's cache */
  keys: number;
  /** threads that took part, the calling one included when it computes */
  threads: number;
  /** of `keys`, those the worker threads computed */
  offThread: number;
}

export interface RendezvousThreads {
  /** worker threads besides the calling one */
  readonly workers: number;
  /** Resolves once every worker thread has loaded (the first fill waits for it anyway). */
  ready(): Promise<void>;
  /**
   * Computes into the pass's cache every key the pass lacks to rank `workloads` over their eligible
   * runtimes, on the calling thread and the worker threads together; fewer than `minKeys` are left
   * to the pass, and so is everything when the pass has no cache. Answers how many keys it computed.
   */
  fill(pass: PlacementPass, workloads: readonly Pick<PlacementWorkload, 'name' | 'selector'>[]): Promise<FillResult>;
  /** Ends the worker threads. */
  close(): Promise<void>;
}

/**
 * The worker's entry: the compiled JavaScript beside this file, or else its TypeScript through tsx
 * (npm start, jest, the test stacks' bundles). Found from `__dirname`, not `__filename`: a bundle
 * keeps each source file's directory (harness/entry-bundles.ts) but is itself another file.
 */
export function workerSource(dir = __dirname): string {
  const compiled = path.join(dir, 'rendezvous-thread.js');
  if (fs.existsSync(compiled)) return `require(${JSON.stringify(compiled)});`;
  const entry = path.join(dir, 'rendezvous-thread.ts');
  if (!fs.existsSync(entry)) throw new Error(`no rendezvous worker thread entry in ${dir}`);
  // The worker does not inherit the parent's loader; TSX_DISABLE_CACHE: it writes no cache files.
  const tsx = require.resolve('tsx/cjs/api', { paths: [dir] });
  return `process.env.TSX_DISABLE_CACHE = '1'; require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(entry)});`;
}

interface Pending {
  /** with the keys the thread computed */
  resolve: (keys: number) => void;
  reject: (error: Error) => void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
  loaded: Promise<void>;
  /** set once the thread failed or exited: it is asked nothing more */
  failed: Error | null;
}

function startThread(source: string): Thread {
  const worker = new Worker(source, { eval: true });
  worker.unref();
  const thread: Thread = { worker, pending: new Map(), loaded: Promise.resolve(), failed: null };
  thread.loaded = new Promise<void>((resolve, reject) => {
    worker.on('message', (message: { ready?: true; id?: number; keys?: number; error?: string }) => {
      if (message.ready) return resolve();
      const waiting = thread.pending.get(message.id!);
      thread.pending.delete(message.id!);
      if (message.error) waiting?.reject(new Error(message.error));
      else waiting?.resolve(message.keys ?? 0);
    });
    const fail = (error: Error) => {
      thread.failed ??= error;
      reject(error);
      for (const waiting of thread.pending.values()) waiting.reject(error);
      thread.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`rendezvous worker thread exited (${code})`)));
  });
  thread.loaded.catch(() => undefined);
  return thread;
}

/** Asks a thread to join `request`; settles, with the keys it computed, when it has no chunk left to take. */
function askThread(thread: Thread, id: number, request: Omit<KeyRequest, 'id'>): Promise<number> {
  if (thread.failed) return Promise.reject(thread.failed);
  return new Promise<number>((resolve, reject) => {
    thread.pending.set(id, { resolve, reject });
    thread.worker.postMessage({ id, ...request } satisfies KeyRequest);
  });
}

/**
 * Worker threads for rendezvous keys: by default one fewer than the cores (the calling thread is
 * the last one). Started on first use, kept for the life of the process, unref'd so they never
 * hold it open.
 */
export function createRendezvousThreads(options: {
  workers?: number;
  minKeys?: number;
  /** whether the calling thread computes chunks too (default); without it its event loop stays free while the workers hash */
  callerComputes?: boolean;
  /** the threads' script (default workerSource()) */
  source?: () => string;
} = {}): RendezvousThreads {
  const workerCount = Math.max(0, options.workers ?? os.availableParallelism() - 1);
  const minKeys = options.minKeys ?? DEFAULT_MIN_THREADED_KEYS;
  const callerComputes = options.callerComputes ?? true;
  let threads: Thread[] | null = null;
  let nextRequest = 0;

  const start = (): Thread[] => {
    if (threads) return threads;
    threads = [];
    try {
      const source = (options.source ?? workerSource)();
      for (let i = 0; i < workerCount; i++) threads.push(startThread(source));
    } catch {
      // No entry to load, or no thread (resource limits): the calling thread computes the rest.
    }
    return threads;
  };

  return {
    workers: workerCount,

    async ready() {
      await Promise.all(start().map((thread) => thread.loaded));
    },

    async fill(pass, workloads) {
      if (!pass.keys) return { keys: 0, threads: 0, offThread: 0 };
      const { work, targets } = missingKeys(pass, workloads);
      const total = work.start[work.names.length];
      if (total === 0) return { keys: 0, threads: 0, offThread: 0 };
      const usable = total < minKeys ? [] : start().filter((thread) => !thread.failed);
      if (usable.length === 0) {
        const out = new Float64Array(total);
        computeKeyWork(work, 0, work.names.length, out);
        storeKeys(pass, work, targets, out);
        return { keys: total, threads: 1, offThread: 0 };
      }
      const chunks = chunkKeyWork(work, (usable.length + 1) * CHUNKS_PER_THREAD);
      const request: Omit<KeyRequest, 'id'> = {
        work,
        chunks,
        next: new Int32Array(new SharedArrayBuffer(4)),
        done: new Int32Array(new SharedArrayBuffer(4 * (chunks.length - 1))),
        out: new Float64Array(new SharedArrayBuffer(8 * total)),
      };
      // A worker still loading only joins late: the calling thread starts at once.
      const answers = usable.map((thread) => askThread(thread, nextRequest++, request));
      if (callerComputes) computeClaimedChunks(request);
      const settled = await Promise.allSettled(answers);
      let offThread = 0;
      for (const answer of settled) if (answer.status === 'fulfilled') offThread += answer.value;
      if (settled.some((answer) => answer.status === 'rejected')) {
        // A failed worker may have claimed chunks it never finished.
        for (let chunk = 0; chunk < chunks.length - 1; chunk++) {
          if (Atomics.load(request.done, chunk) === 0) computeKeyWork(work, chunks[chunk], chunks[chunk + 1], request.out);
        }
      }
      storeKeys(pass, work, targets, request.out);
      return { keys: total, threads: usable.length + (callerComputes ? 1 : 0), offThread };
    },

    async close() {
      const running = threads ?? [];
      threads = null;
      await Promise.all(running.map(({ worker }) => worker.terminate()));
    },
  };
}

/**
 * What the worker process keeps for placement across activities: the rendezvous keys of the
 * passes it ran, and the threads that compute a cold pass's keys. One per createActivities.
 */
export interface Rendezvous {
  keys: RendezvousKeyCache;
  threads: RendezvousThreads;
}

export function createRendezvous(options: { maxKeys?: number } & Parameters<typeof createRendezvousThreads>[0] = {}): Rendezvous {
  return { keys: new RendezvousKeyCache(options.maxKeys), threads: createRendezvousThreads(options) };
}
