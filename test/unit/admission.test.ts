// A start's answer agrees with the workflow's own admission check (DESIGN.md §4 "Unambiguous
// starts"): found by bench/fleet.ts, where 100 scale requests at once answered 202 for starts that
// Temporal recorded after their admission deadline, which then refused themselves (start-expired),
// because the API's event loop was too busy to run its deadline timer on time. Temporal is faked;
// the busy event loop is a callback that blocks it past the deadline.
import { parseApiConfig } from '../../api/config';
import type { ApiDeps } from '../../api/deps';
import { startOperation } from '../../api/operations';
import { CodedError } from '../../protocol';

/** SCALEGATE_REQUEST_DEADLINE_MS at its least: the admission deadline is 1 s after the request. */
const ADMIT_WITHIN_MS = 1_000;
const config = parseApiConfig({
  DATABASE_URL: 'postgres://unused', SCALEGATE_OPERATOR_TOKEN: 'op-'.padEnd(30, 'o'), SCALEGATE_AGENT_TOKEN: 'ag-'.padEnd(30, 'a'),
  SCALEGATE_VIEWER_TOKEN: 'vw-'.padEnd(30, 'v'), SCALEGATE_REQUEST_DEADLINE_MS: '500',
});

/**
 * Temporal answering the start shortly before the deadline, in a callback that then holds the event
 * loop past it (so the API reads the answer late); it recorded the start `recordedAfterMs` after
 * the request.
 */
function lateAnswer(recordedAfterMs: number): ApiDeps {
  const requestedAt = Date.now();
  const client = {
    workflow: {
      start: (_workflow: unknown, options: { workflowId: string }) => new Promise((resolve) => setTimeout(() => {
        while (Date.now() < requestedAt + ADMIT_WITHIN_MS + 150); // busy: the deadline's timer waits
        resolve({ workflowId: options.workflowId, firstExecutionRunId: 'run-1' });
      }, ADMIT_WITHIN_MS - 50)),
      getHandle: () => ({ describe: async () => ({ startTime: new Date(requestedAt + recordedAfterMs) }) }),
    },
  };
  return { config, temporal: { client: async () => client, reachable: async () => true, close: async () => {} } } as unknown as ApiDeps;
}

const scaleOfWeb = { workflow: async function scaleOut() {}, workflowId: 'scale:web', input: {}, summary: 'scale web 1 → 2' };

describe('startOperation, its answer read after the admission deadline', () => {
  it('answers 503 when Temporal recorded the start after the deadline (that run refuses itself)', async () => {
    const answer = startOperation(lateAnswer(ADMIT_WITHIN_MS + 100), scaleOfWeb);
    await expect(answer).rejects.toBeInstanceOf(CodedError);
    await expect(answer).rejects.toMatchObject({ code: 'unavailable', message: expect.stringMatching(/nothing was started/) });
  });

  it('answers the operation when Temporal recorded it in time, however late the answer was read', async () => {
    await expect(startOperation(lateAnswer(ADMIT_WITHIN_MS - 100), scaleOfWeb)).resolves.toMatchObject({ workflowId: 'scale:web', runId: 'run-1', kind: 'scaleOut' });
  });
});
