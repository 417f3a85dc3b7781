// Requests mean one thing (issue 33 item 4, DESIGN.md §4 "Unambiguous starts"), on a real stack:
// an Idempotency-Key answers the one operation its request started and refuses another body; a
// PUT does not turn a live service into a consumer; every start is in the API's log with its key;
// and an operation's reads and report links name their run, so an older run's link opens that run.
import path from 'node:path';
import { runCli } from '../support/cli';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload, scaleAndWait } from '../../harness/workloads';

const FIXTURE = path.join(__dirname, '..', '..', 'harness', 'fixtures', 'http-server.js');
const service = {
  kind: 'service', replicas: 1, contract: { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' },
  spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 1000 },
};
const NAME = 'keyed';

let stack: Stack;
/** The scale-out the key started (first test), and the scale-in after it (third): two runs of scale:keyed. */
let scaleOutRun: string;
let scaleInRun: string;

beforeAll(async () => {
  // info: the API's line for every start it accepts
  stack = await startStack({ env: { SCALEGATE_LOG_LEVEL: 'info' }, agents: [{ id: 'rq-a' }, { id: 'rq-b' }] });
  await defineWorkload(stack, NAME, service, 1);
});
afterAll(async () => {
  await stack?.stop();
});

const scale = (key: string, body: unknown) => fetch(`${stack.apiUrl}/v1/workloads/${NAME}/scale`, {
  method: 'POST', body: JSON.stringify(body),
  headers: { authorization: `Bearer ${stack.tokens.operator}`, 'content-type': 'application/json', 'idempotency-key': key },
}).then(async (r) => ({ status: r.status, body: await r.json() as any }));
const viewer = (urlPath: string) => stack.api('GET', urlPath, { role: 'viewer' });
const page = (url: string) => fetch(url, { headers: { authorization: `Bearer ${stack.tokens.viewer}` } }).then(async (r) => ({ status: r.status, text: await r.text() }));

it('the same Idempotency-Key and body answer the one operation they started; another body is 422 naming it; the start is logged with its key', async () => {
  const first = await scale('keyed-1', { replicas: 2, soakMs: 0 });
  expect(first.status).toBe(202);
  scaleOutRun = first.body.runId;
  // The same request again (its fields in another order, a default spelled out): the same operation.
  expect(await scale('keyed-1', { soakMs: 0, approval: 'auto', replicas: 2 })).toEqual(first);
  // Another body under the key: refused, naming what the key started; before, a 202 with the first
  // operation dropped this request without a word.
  const other = await scale('keyed-1', { replicas: 3, soakMs: 0 });
  expect(other.status).toBe(422);
  expect(other.body).toMatchObject({ error: 'idempotency-key-reused', workflowId: `scale:${NAME}`, runId: scaleOutRun, kind: 'scaleOut' });
  expect(other.body.message).toContain(`already started scaleOut scale:${NAME} (run ${scaleOutRun})`);

  expect(await stack.temporal.workflow.getHandle(first.body.workflowId, scaleOutRun).result()).toMatchObject({ outcome: 'completed' });
  expect(await scale('keyed-1', { replicas: 2, soakMs: 0 })).toEqual(first);
  expect(await scale('keyed-1', { replicas: 1 })).toMatchObject({ status: 422, body: { error: 'idempotency-key-reused', runId: scaleOutRun } });
  // Counted: one scale-out ran, at 2 replicas.
  expect((await viewer(`/v1/workloads/${NAME}`)).body.replicas).toBe(2);
  // (Temporal's visibility, which the list reads, records a close shortly after it)
  const scaleOuts = await stack.waitFor('the scale-out listed as completed', async () => {
    const { operations } = (await viewer(`/v1/operations?workload=${NAME}&kind=scaleOut`)).body;
    return operations.every((o: any) => o.status !== 'running') ? operations : null;
  });
  expect(scaleOuts.map((o: any) => [o.runId, o.status])).toEqual([[scaleOutRun, 'completed']]);

  // The API said so in its log, with the key: a start whose client gave up is recognisable.
  const logged = await stack.waitFor('the API\'s line for the start', async () => stack.logs.find((line) =>
    line.includes('"msg":"operation started"') && line.includes('"idempotencyKey":"keyed-1"') && line.includes(`"run":"${scaleOutRun}"`)));
  expect(logged).toContain(`"workflow":"scale:${NAME}"`);
  expect(logged).not.toContain(stack.tokens.operator);
});

it('a PUT that changes a live workload\'s kind is 409 kind-change naming both kinds, and writes nothing', async () => {
  const before = (await viewer(`/v1/workloads/${NAME}`)).body;
  const consumer = {
    kind: 'consumer', replicas: 1, contract: { ownership: 'partitioned', partitions: 2, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' },
    spec: { partitions: 2, source: 'keyed_in', sink: 'keyed_out' },
  };
  const put = await stack.api('PUT', `/v1/workloads/${NAME}`, { body: consumer });
  expect(put.status).toBe(409);
  expect(put.body).toMatchObject({ error: 'kind-change', kind: 'service', requested: 'consumer' });
  expect(put.body.message).toMatch(/is a live service; a PUT cannot make it a consumer\. Retire it first/);
  const after = (await viewer(`/v1/workloads/${NAME}`)).body;
  expect({ kind: after.kind, revision: after.revision, spec: after.spec }).toEqual({ kind: 'service', revision: before.revision, spec: before.spec });
});

it('two runs of scale:<workload>: each run\'s read, report link and Web UI link open that run, not the newest', async () => {
  const scaledIn = await scaleAndWait(stack, NAME, { replicas: 1 }, 'scaleIn');
  scaleInRun = scaledIn.runId;
  expect(scaleInRun).not.toBe(scaleOutRun);

  // Without a run id: the newest run. With one: exactly that run (it was ignored before).
  expect((await viewer(`/v1/operations/scale:${NAME}`)).body).toMatchObject({ runId: scaleInRun, kind: 'scaleIn' });
  const older = (await viewer(`/v1/operations/scale:${NAME}?runId=${scaleOutRun}`)).body;
  expect(older).toMatchObject({ runId: scaleOutRun, kind: 'scaleOut', status: 'completed' });
  expect(older.reportUrl).toBe(`${stack.apiUrl}/v1/operations/scale%3A${NAME}/report?runId=${scaleOutRun}`);

  // The older run's report link opens the older run.
  const olderPage = await page(older.reportUrl);
  expect(olderPage.status).toBe(200);
  expect(olderPage.text).toContain(`scaleOut scale:${NAME}`);
  expect(olderPage.text).toContain(`>${scaleOutRun}</a>`);
  const newerPage = await page(scaledIn.reportUrl);
  expect(newerPage.text).toContain(`scaleIn scale:${NAME}`);
  expect(newerPage.text).toContain(`>${scaleInRun}</a>`);

  // The Web UI's "Evidence report" link of the older run (written before Temporal named the run) opens it too.
  const details = await (await stack.temporal.workflow.getHandle(`scale:${NAME}`, scaleOutRun).describe()).staticDetails();
  const webUiLink = /\[Evidence report\]\(([^)]+)\)/.exec(details ?? '')?.[1] ?? `(no link in ${details})`;
  expect(webUiLink).toMatch(/\/report\?start=[0-9a-f-]{36}$/);
  const linked = await page(webUiLink);
  expect(linked.status).toBe(200);
  expect(linked.text).toContain(`>${scaleOutRun}</a>`);

  // A run of another workflow id is not a run of this one: 404. A run id that is no UUID: 422.
  let elsewhere: string | undefined;
  for await (const run of stack.temporal.workflow.list({ query: `WorkflowId != "scale:${NAME}"` })) {
    elsewhere = run.runId;
    break;
  }
  expect(elsewhere).toBeDefined();
  expect(await viewer(`/v1/operations/scale:${NAME}?runId=${elsewhere}`)).toMatchObject({ status: 404, body: { error: 'not-found' } });
  expect((await page(`${stack.apiUrl}/v1/operations/scale:${NAME}/report?runId=${elsewhere}`)).status).toBe(404);
  expect(await viewer(`/v1/operations/scale:${NAME}?runId=not-a-run`)).toMatchObject({ status: 422, body: { error: 'validation-failed' } });

  // The list names each run, newest first, with its own report link.
  const listed = await stack.waitFor('both runs listed as closed', async () => {
    const { operations } = (await viewer(`/v1/operations?workload=${NAME}`)).body;
    return operations.every((o: any) => o.status !== 'running') ? operations : null;
  });
  expect(listed.slice(0, 2).map((o: any) => [o.runId, o.kind, o.status])).toEqual([[scaleInRun, 'scaleIn', 'completed'], [scaleOutRun, 'scaleOut', 'completed']]);
  for (const o of listed) expect(o.reportUrl).toBe(`${stack.apiUrl}/v1/operations/scale%3A${NAME}/report?runId=${o.runId}`);
  expect((await viewer(`/v1/operations?workload=${NAME}&limit=1`)).body.operations.map((o: any) => o.runId)).toEqual([scaleInRun]);
});

it('scalegate operations list --workload W lists its past runs: workflow id, run id, kind, status, start time', async () => {
  const all = await runCli(stack, ['operations', 'list', '--workload', NAME]);
  expect(all.code).toBe(0);
  const lines = all.stdout.trim().split('\n');
  expect(lines[0]).toMatch(/^WORKFLOW\s+RUN\s+KIND\s+STATUS\s+STARTED$/);
  const rowOf = (runId: string) => lines.find((line) => line.includes(runId));
  expect(rowOf(scaleOutRun)).toMatch(new RegExp(`^scale:${NAME}\\s+${scaleOutRun}\\s+scaleOut\\s+completed\\s+\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z$`));
  expect(rowOf(scaleInRun)).toMatch(new RegExp(`^scale:${NAME}\\s+${scaleInRun}\\s+scaleIn\\s+completed\\s+`));
  expect(lines.indexOf(rowOf(scaleInRun)!)).toBeLessThan(lines.indexOf(rowOf(scaleOutRun)!)); // newest first

  const scaleIns = await runCli(stack, ['operations', 'list', '--workload', NAME, '--kind', 'scaleIn', '--json']);
  expect(JSON.parse(scaleIns.stdout).operations.map((o: any) => o.runId)).toEqual([scaleInRun]);
  const older = await runCli(stack, ['operations', 'show', `scale:${NAME}`, '--run', scaleOutRun]);
  expect(older.stdout).toMatch(/^kind:\s+scaleOut$/m);
  const bad = await runCli(stack, ['operations', 'list', '--limit', '0']);
  expect(bad.code).toBe(2);
});
