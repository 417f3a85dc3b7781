// A worker thread of activities/rendezvous-threads.ts: takes chunks of rendezvous keys to compute
// until none is left, then says so.
import { parentPort } from 'node:worker_threads';
import { computeClaimedChunks, type KeyRequest } from './rendezvous-threads';

const port = parentPort!;
port.on('message', (request: KeyRequest) => {
  try {
    port.postMessage({ id: request.id, keys: computeClaimedChunks(request) });
  } catch (error) {
    port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) });
  }
});
port.postMessage({ ready: true });
