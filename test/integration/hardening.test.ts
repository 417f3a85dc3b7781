// Bad input and outages on the real stack (issue 9): one request never takes the control plane
// down, viewers never read secrets, and a frozen PostgreSQL is answered 503 fast, not with a hang
// or a 500, and recovered from without a restart.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres, type RunningPostgres } from '../../embedded/postgres';
import { freePort } from '../../embedded/processes';
import { startStack, Stack } from '../../harness/stack';
import { testEnv } from '../../harness/env';
import { GiveUp } from '../../harness/wait-for';

let stack: Stack;
/** This file freezes its PostgreSQL: a server of its own, so test files running beside it keep theirs. */
let postgres: RunningPostgres;

beforeAll(async () => {
  postgres = await startEmbeddedPostgres({ dataDir: fs.mkdtempSync(path.join(testEnv().tmpDir, 'pg-hardening-')), port: await freePort(), database: 'postgres', fsync: false });
  stack = await startStack({ agents: [{ id: 'hard-a', labels: { zone: 'a' } }], postgresAdminUrl: postgres.url });
});
afterAll(async () => {
  await stack?.stop();
  await postgres?.stop();
  if (postgres) fs.rmSync(postgres.dataDir, { recursive: true, force: true });
});

const service = (extra: Record<string, unknown> = {}) => ({
  kind: 'service', replicas: 1, spec: { command: ['node', '-e', 'setInterval(() => {}, 1000)'], env: { API_KEY: 'hunter2-secret' }, ...extra },
});

describe('bounds: a request is bounded before any work is done on it', () => {
  it('answers a plan for 1e9 replicas 422 naming replicas, and the API keeps serving', async () => {
    expect((await stack.api('PUT', '/v1/workloads/huge', { body: service() })).status).toBe(201);
    for (const replicas of [1e9, 20_000_000, 1e308]) {
      const plan = await stack.api('POST', '/v1/workloads/huge/plan', { body: { replicas } });
      expect(plan.status).toBe(422);
      expect(plan.body).toMatchObject({ error: 'validation-failed' });
      expect(plan.body.message).toMatch(/replicas/);
    }
    const scale = await stack.api('POST', '/v1/workloads/huge/scale', { body: { replicas: 1e9 } });
    expect(scale.status).toBe(422);
    expect((await stack.api('GET', '/healthz', { role: null })).status).toBe(200);
    const { rows } = await stack.db.query('select count(*)::int as n from plans where workload = $1', ['huge']);
    expect(rows[0].n).toBe(0); // nothing was planned
  });

  it('refuses a readiness path that is not a URL path, unknown fields and a stream job that is not source → keyed-aggregate → sink, naming the field', async () => {
    const bad = await stack.api('PUT', '/v1/workloads/spaced', { body: service({ readiness: { http: '/health z' } }) });
    expect(bad.status).toBe(422);
    expect(bad.body.message).toMatch(/spec\.readiness\.http/);
    const unknown = await stack.api('PUT', '/v1/workloads/spaced', { body: { ...service(), replicaCount: 3 } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.message).toMatch(/replicaCount/);
    const stream = await stack.api('PUT', '/v1/workloads/clicks', {
      body: { kind: 'stream', replicas: 1, spec: { source: 'clicks', sink: 'click_counts', partitions: 2, checkpointIntervalMs: 1000, operators: [{ id: 'src', kind: 'source', parallelism: 1 }] } },
    });
    expect(stream.status).toBe(422);
    expect(stream.body.message).toMatch(/spec\.operators: operators must be source → keyed-aggregate → sink, got source/);
    const sameTable = await stack.api('PUT', '/v1/workloads/loop', { body: { kind: 'consumer', replicas: 1, spec: { partitions: 2, source: 'orders', sink: 'orders' } } });
    expect(sameTable.status).toBe(422);
    expect(sameTable.body.message).toMatch(/spec\.sink/);
    const { rows } = await stack.db.query(`select count(*)::int as n from workloads where name in ('spaced', 'clicks', 'loop')`);
    expect(rows[0].n).toBe(0);
  });
});

describe('least privilege for readers', () => {
  it('shows a viewer the env keys of a workload but not their values; an operator sees them', async () => {
    expect((await stack.api('PUT', '/v1/workloads/secretive', { body: service() })).status).toBe(201);
    const asViewer = await stack.api('GET', '/v1/workloads/secretive', { role: 'viewer' });
    expect(asViewer.status).toBe(200);
    expect(Object.keys(asViewer.body.spec.env)).toEqual(['API_KEY']);
    expect(JSON.stringify(asViewer.body)).not.toContain('hunter2-secret');
    const asOperator = await stack.api('GET', '/v1/workloads/secretive', { role: 'operator' });
    expect(asOperator.body.spec.env).toEqual({ API_KEY: 'hunter2-secret' });
  });
});

describe('a frozen PostgreSQL', () => {
  /** Every process of this file's PostgreSQL: the postmaster and its backends. */
  function postgresProcesses(): number[] {
    const postgresPid = postgres.pid;
    if (!postgresPid) throw new Error('the PostgreSQL of this file has no pid');
    const children = execFileSync('pgrep', ['-P', String(postgresPid)]).toString().trim().split('\n').filter(Boolean).map(Number);
    return [postgresPid, ...children];
  }
  /** A call that must answer: a hang fails the test instead of waiting forever. */
  const answered = (path: string, role: 'viewer' | null) =>
    fetch(`${stack.apiUrl}${path}`, {
      headers: role ? { authorization: `Bearer ${stack.tokens[role]}` } : {},
      signal: AbortSignal.timeout(15_000),
    }).then(async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }));

  it('answers /readyz and the routes 503 while it is frozen, and 200 again once it resumes, without a restart', async () => {
    expect((await answered('/readyz', null)).status).toBe(200);
    const frozen = postgresProcesses();
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    try {
      const ready = await answered('/readyz', null);
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ status: 'not-ready', postgres: false });
      const state = await answered('/v1/state', 'viewer');
      expect(state.status).toBe(503);
      expect(state.body).toMatchObject({ error: 'dependency-unavailable' });
      const ledger = await answered('/v1/ledger', 'viewer');
      expect(ledger.status).toBe(503);
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
    }
    await stack.waitFor('/readyz 200 after PostgreSQL resumed', async () => (await answered('/readyz', null)).status === 200);
    expect((await answered('/v1/state', 'viewer')).status).toBe(200);
  });

  it('a worker starting while it is frozen waits for it (past its connect timeout), and serves once it resumes', async () => {
    const previous = stack.worker!;
    const frozen = postgresProcesses();
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    let starting;
    try {
      starting = await stack.startWorker();
      // said after its first attempt failed on the 5 s connect timeout: before, the worker exited there
      const worker = starting;
      await stack.waitFor('the starting worker waiting for PostgreSQL', async () => {
        if (worker.child.exitCode !== null) throw new GiveUp(`the starting worker exited (${worker.child.exitCode}):\n${stack.logs.filter((line) => line.startsWith('[worker]')).slice(-3).join('\n')}`);
        return stack.logs.some((line) => line.startsWith('[worker]') && line.includes('waiting for PostgreSQL'));
      });
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
    }
    // it polls its task queue (the SDK's identity is pid@host), and takes over from the one it joined
    const workflowPollers = async () =>
      ((await stack.temporal.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: stack.taskQueue }, taskQueueType: 1 })).pollers ?? []).map((poller) => poller.identity ?? '');
    await stack.waitFor('the new worker polling', async () => (await workflowPollers()).some((identity) => identity.startsWith(`${starting.child.pid}@`)));
    await previous.stop(10_000);
    expect(starting.child.exitCode).toBeNull();
  });

  it('an API starting while it is frozen waits for it (past its connect timeout), and answers once it resumes', async () => {
    await stack.apis[0].stop(10_000);
    const frozen = postgresProcesses();
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    let starting: Promise<unknown> | null = null;
    try {
      starting = stack.startApi(0);
      starting.catch(() => {}); // awaited below, once PostgreSQL resumed
      const api = stack.apis[0];
      // said after its first attempt failed on the 2 s connect timeout: before, the API exited there
      await stack.waitFor('the starting API waiting for PostgreSQL', async () => {
        if (api.child.exitCode !== null) throw new GiveUp(`the starting API exited (${api.child.exitCode}):\n${stack.logs.filter((line) => line.startsWith('[api]')).slice(-3).join('\n')}`);
        return stack.logs.some((line) => line.startsWith('[api]') && line.includes('waiting for PostgreSQL'));
      });
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
    }
    await starting;
    expect((await answered('/readyz', null)).status).toBe(200);
    expect((await answered('/v1/state', 'viewer')).status).toBe(200);
  });
});

describe('a frozen worker', () => {
  it('GET /v1/operations/:id of a running operation answers within its bound: running, its phase from the search attribute, the detail unknown; all of it again once the worker resumes', async () => {
    // a contract the gates take, and a second runtime for the new replica
    const contract = { ownership: 'shared-queue', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
    await stack.startAgent({ id: 'hard-b', labels: { zone: 'b' } });
    expect((await stack.api('PUT', '/v1/workloads/waiting', { body: { ...service(), contract } })).status).toBe(201);
    // placed by its first scale-out, which has ended
    await stack.waitFor('waiting placed', async () => (await stack.api('GET', '/v1/workloads/waiting', { role: 'viewer' })).body.placement?.assignments?.length === 1
      && ['completed', 'compensated', 'refused'].includes((await stack.api('GET', '/v1/operations/scale:waiting', { role: 'viewer' })).body.status));
    // approval "manual": the scale-out waits for it, running, for as long as the test needs
    const started = await stack.api('POST', '/v1/workloads/waiting/scale', { body: { replicas: 2, approval: 'manual', soakMs: 0 } });
    expect(started.status).toBe(202);
    const operationPath = `/v1/operations/${started.body.workflowId}`;
    await stack.waitFor('the scale-out awaiting its approval', async () => (await stack.api('GET', operationPath, { role: 'viewer' })).body.phase === 'awaiting-approval');
    const worker = stack.worker!.child.pid!;
    process.kill(worker, 'SIGSTOP');
    try {
      // The status query needs the worker; with it frozen, the answer comes from Temporal alone.
      const frozen = await fetch(`${stack.apiUrl}${operationPath}`, { headers: { authorization: `Bearer ${stack.tokens.viewer}` }, signal: AbortSignal.timeout(30_000) });
      expect(frozen.status).toBe(200);
      const view = (await frozen.json()) as Record<string, unknown>;
      expect(view).toMatchObject({ status: 'running', temporalStatus: 'RUNNING', phase: 'awaiting-approval', gates: null });
    } finally {
      process.kill(worker, 'SIGCONT');
    }
    const resumed = await stack.waitFor('the detail again', async () => {
      const view = (await stack.api('GET', operationPath, { role: 'viewer' })).body;
      return view.gates ? view : null;
    });
    expect(resumed).toMatchObject({ status: 'running', phase: 'awaiting-approval' });
    expect((await stack.api('POST', `${operationPath}/abort`, { body: { reason: 'test over' } })).status).toBeLessThan(300);
  });
});
