// Requests mean one thing (issue 33 item 4, DESIGN.md §4 "Unambiguous starts"): the pure parts of
// binding an Idempotency-Key to its method, path and body, of the operation list's query and status
// words, and of links that name their run.
import { parseApiConfig } from '../../api/config';
import type { ApiDeps } from '../../api/deps';
import { operationListQuery } from '../../api/operation-list';
import { keyedAskOf, reportUrlOf, sameRequest } from '../../api/operations';
import { renderOperationReport } from '../../api/report';
import { reportUrl } from '../../cli/main';
import { canonicalJson, canonicalSha256 } from '../../lib/canonical-json';
import { CodedError, ERROR_CODES, LEDGER_OUTCOMES, listedStatusOf, OPERATION_STATUSES, ScaleRequestSchema, statusOfOutcome } from '../../protocol';
import type { RecordedStart } from '../../store/operation-starts';

const config = parseApiConfig({
  DATABASE_URL: 'postgres://unused', SCALEGATE_OPERATOR_TOKEN: 'op-'.padEnd(30, 'o'), SCALEGATE_AGENT_TOKEN: 'ag-'.padEnd(30, 'a'),
  SCALEGATE_VIEWER_TOKEN: 'vw-'.padEnd(30, 'v'), SCALEGATE_API_URL: 'http://api.test:8080',
});
const deps = { config } as ApiDeps;

describe('canonicalJson', () => {
  it('is one text whatever the order of object keys, at every depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(canonicalSha256({ replicas: 2, soakMs: 0 })).toBe(canonicalSha256({ soakMs: 0, replicas: 2 }));
  });
  it('leaves undefined members out, as JSON does, and keeps the order of arrays', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson([2, 1])).not.toBe(canonicalJson([1, 2]));
  });
  it('tells another value apart', () => {
    expect(canonicalSha256({ replicas: 3 })).not.toBe(canonicalSha256({ replicas: 2 }));
    expect(canonicalSha256({ replicas: 2 })).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('an Idempotency-Key bound to its method, path and body', () => {
  const request = (key: string | undefined, url = '/v1/workloads/web/scale') => ({ method: 'POST', url, headers: key ? { 'idempotency-key': key } : {} });
  const scale = (raw: unknown) => ScaleRequestSchema.parse(raw);
  const first = keyedAskOf(request('k-1'), scale({ replicas: 2, soakMs: 0 }))!;
  const recorded: RecordedStart = { workflowId: 'scale:web', runId: '0a1b2c3d-0000-4000-8000-000000000001', kind: 'scaleOut', uiUrl: 'http://ui/x', request: first.request, bodySha256: first.bodySha256 };

  it('asks nothing without a key', () => {
    expect(keyedAskOf(request(undefined), { replicas: 2 })).toBeNull();
  });

  it('answers the first operation to the same request: the same fields in any order, a default spelled out, a query string', () => {
    const again = keyedAskOf(request('k-1', '/v1/workloads/web/scale?x=1'), scale({ soakMs: 0, replicas: 2, approval: 'auto' }))!;
    expect(sameRequest(recorded, again)).toEqual({ workflowId: 'scale:web', runId: recorded.runId, kind: 'scaleOut', uiUrl: 'http://ui/x' });
  });

  it('refuses another body with idempotency-key-reused (422), naming the first operation', () => {
    const other = keyedAskOf(request('k-1'), scale({ replicas: 3, soakMs: 0 }))!;
    let refusal: CodedError | undefined;
    try {
      sameRequest(recorded, other);
    } catch (error) {
      refusal = error as CodedError;
    }
    expect(refusal).toBeInstanceOf(CodedError);
    expect(refusal!.status).toBe(422);
    expect(refusal!.toBody()).toMatchObject({ error: 'idempotency-key-reused', workflowId: 'scale:web', runId: recorded.runId, kind: 'scaleOut' });
    expect(refusal!.message).toMatch(/k-1 already started scaleOut scale:web \(run 0a1b2c3d-.*\) for POST \/v1\/workloads\/web\/scale with another body/);
  });

  it('refuses another method or path the same way', () => {
    const other = keyedAskOf({ method: 'POST', url: '/v1/runtimes/a/recover', headers: { 'idempotency-key': 'k-1' } }, undefined)!;
    expect(() => sameRequest(recorded, other)).toThrow(/for POST \/v1\/workloads\/web\/scale, not POST \/v1\/runtimes\/a\/recover/);
  });

  it('keeps a start recorded before bodies were (migration 011) bound to its method and path only', () => {
    const other = keyedAskOf(request('k-1'), scale({ replicas: 3 }))!;
    expect(sameRequest({ ...recorded, bodySha256: null }, other).runId).toBe(recorded.runId);
  });

  it('maps its codes to their statuses: idempotency-key-reused 422, kind-change 409', () => {
    expect(ERROR_CODES['idempotency-key-reused'].status).toBe(422);
    expect(ERROR_CODES['kind-change'].status).toBe(409);
  });
});

describe('GET /v1/operations', () => {
  it('asks visibility for the task queue, the workload\'s targets (or its search attribute) and the kind', () => {
    expect(operationListQuery('scalegate', {})).toBe('TaskQueue = "scalegate"');
    expect(operationListQuery('scalegate', { workload: 'web', kind: 'scaleOut' })).toBe(
      'TaskQueue = "scalegate" AND (WorkflowId = "scale:web" OR WorkflowId = "replan:web" OR WorkflowId = "rescale:web" OR ScalegateWorkload = "web") AND WorkflowType = "scaleOut"',
    );
  });

  it('says each run\'s status in the API\'s words: its outcome decides a closed run, a cancel or terminate is cancelled', () => {
    expect(listedStatusOf('RUNNING', null)).toBe('running');
    expect(listedStatusOf('COMPLETED', 'compensated')).toBe('compensated');
    expect(listedStatusOf('COMPLETED', null)).toBe('completed');
    // a start that reached Temporal after its admission deadline refused itself: nothing changed
    expect(listedStatusOf('FAILED', 'refused')).toBe('refused');
    expect(listedStatusOf('FAILED', null)).toBe('failed');
    expect(listedStatusOf('TERMINATED', 'completed')).toBe('cancelled');
    expect(listedStatusOf('CANCELLED', null)).toBe('cancelled');
  });

  it('maps every outcome word the ledger knows, and an unknown one to failed, never to a success by default', () => {
    for (const outcome of LEDGER_OUTCOMES) expect(OPERATION_STATUSES).toContain(statusOfOutcome(outcome));
    expect(statusOfOutcome('degraded')).toBe('completed');
    expect(statusOfOutcome('stale-plan')).toBe('refused');
    expect(statusOfOutcome('rejected')).toBe('cancelled');
    expect(statusOfOutcome('exploded')).toBe('failed');
    expect(statusOfOutcome('toString')).toBe('failed'); // an inherited property is no word
    expect(listedStatusOf('COMPLETED', 'exploded')).toBe('failed');
  });
});

describe('report links name their run', () => {
  const runId = '0a1b2c3d-0000-4000-8000-000000000002';
  it('the API\'s, the CLI\'s and the Web UI start link\'s', () => {
    expect(reportUrlOf(deps, 'scale:web', { runId })).toBe(`http://api.test:8080/v1/operations/scale%3Aweb/report?runId=${runId}`);
    expect(reportUrlOf(deps, 'scale:web', { start: 'abc' })).toBe('http://api.test:8080/v1/operations/scale%3Aweb/report?start=abc');
    expect(reportUrl('http://api.test:8080', 'scale:web', runId)).toBe(`http://api.test:8080/v1/operations/scale%3Aweb/report?runId=${runId}`);
  });
  it('the report page\'s own', () => {
    const page = renderOperationReport({ workflowId: 'scale:web', runId, reportUrl: `http://api.test:8080/v1/operations/scale%3Aweb/report?runId=${runId}`, kind: 'scaleOut', status: 'completed', phase: 'done', startedAt: '2026-12-01T00:00:00.000Z', closedAt: null, failure: null });
    expect(page).toContain(`<a class="run" href="http://api.test:8080/v1/operations/scale%3Aweb/report?runId=${runId}">${runId}</a>`);
  });
});
