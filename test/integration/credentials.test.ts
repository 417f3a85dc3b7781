// Per-runtime credentials on the real stack (issue 9 item 2, DESIGN.md §3 "Credentials"): the
// shared agent token only registers new or lapsed runtimes and commands no agent; a live runtime
// resumes only with its own credential, keeping its fence and its tasks; a heartbeat needs that
// runtime's own credential; the credential lives mode 600 in the agent's state folder and nowhere
// it could be read (state, answers, logs). The agents connect to PostgreSQL as the data-plane role
// (issue 21 item 9): a consumer runs with it, and it can neither read nor write a control-plane table.
import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { DATA_PLANE_ROLE } from '../../protocol/data-plane';
import { CONTROL_PLANE_TABLES } from '../../protocol/workload';
import { runLoad } from '../../store/source-feed';
import { verifyExactlyOnce } from '../../store/sink-audit';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload } from '../../harness/workloads';

let stack: Stack;
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');

beforeAll(async () => {
  stack = await startStack({
    agents: [
      { id: 'cred-a', labels: { zone: 'a', pool: 'main' } },
      { id: 'cred-b', labels: { zone: 'b', pool: 'main' } },
      // hosts nothing (no pool label): the agent restarted below
      { id: 'cred-c', labels: { zone: 'c' } },
    ],
  });
  // One task on each of cred-a and cred-b, for the tests that prove nothing was stopped.
  await defineWorkload(stack, 'keep', {
    kind: 'service', replicas: 'all', selector: { pool: 'main' },
    spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' }, graceMs: 2000 },
  }, 2);
});
afterAll(async () => {
  await stack?.stop();
});

const row = async (id: string) =>
  (await stack.db.query(`select fence::int as fence, credential, endpoint, labels, slots, status, tasks, lease_expires_at, last_heartbeat_at, now() as db_now
                           from runtimes where id = $1`, [id])).rows[0];
/** The incarnation and state of each task of `keep` on runtime `id`, as its agent reports them. */
const incarnationsOn = async (id: string) => {
  const { body } = await stack.agentApi(id, 'GET', '/v1/tasks');
  return Object.fromEntries(body.tasks.filter((t: any) => t.workload === 'keep').map((t: any) => [t.taskId, { incarnation: t.incarnation, state: t.state }]));
};
/** Waits for a heartbeat of `id` that the API accepted after the instant `after` (database time). */
const acceptedHeartbeatAfter = (id: string, after: Date) =>
  stack.waitFor(`a heartbeat of ${id} accepted after ${after.toISOString()}`, async () => {
    const r = await row(id);
    return r.last_heartbeat_at > after ? r : null;
  });

describe('the shared agent token commands no agent', () => {
  it('answers 401 to the agent token (and to other runtimes\' credentials) on an agent\'s /v1/tasks, and starts nothing', async () => {
    const marker = path.join(stack.agents['cred-a'].stateDir, '..', 'started-by-the-agent-token');
    const start = {
      workload: 'evil', kind: 'service', index: 0, generation: 1, placementFence: 1,
      spec: { command: [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran'); setInterval(() => {}, 1000)`] },
    };
    for (const token of [stack.tokens.agent, stack.tokens.operator, await stack.credentialOf('cred-b')]) {
      const put = await stack.agentApi('cred-a', 'PUT', '/v1/tasks/evil-0-g1', start, { token });
      expect(put.status).toBe(401);
      expect(put.body).toMatchObject({ error: 'invalid-credential', message: expect.stringContaining('cred-a') });
      expect(JSON.stringify(put.body)).not.toContain(token);
      for (const [method, urlPath] of [['GET', '/v1/tasks'], ['GET', '/v1/health'], ['DELETE', '/v1/tasks/keep-0-g1']] as const) {
        expect((await stack.agentApi('cred-a', method, urlPath, undefined, { token })).status).toBe(401);
      }
    }
    expect((await stack.agentApi('cred-a', 'GET', '/v1/tasks', undefined, { token: null })).body).toMatchObject({ error: 'unauthorized' });
    // The runtime's own credential (what the control plane presents) is served.
    const listed = await stack.agentApi('cred-a', 'GET', '/v1/tasks');
    expect(listed.status).toBe(200);
    expect(listed.body.tasks.map((t: { workload: string }) => t.workload)).not.toContain('evil');
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('an agent that has not registered yet answers 503 to any bearer, 401 without one', async () => {
    // Its control plane is unreachable, so it never registers (nothing listens on port 1).
    const orphan = await stack.startAgent({ id: 'cred-orphan', labels: { zone: 'o' }, apiUrl: 'http://127.0.0.1:1', waitReady: false });
    try {
      for (const token of [stack.tokens.agent, 'x'.repeat(43)]) {
        const health = await stack.agentApi('cred-orphan', 'GET', '/v1/health', undefined, { token });
        expect(health).toMatchObject({ status: 503, body: { error: 'unavailable' } });
        const put = await stack.agentApi('cred-orphan', 'PUT', '/v1/tasks/x-0-g1', { workload: 'x', kind: 'service', index: 0, generation: 1, placementFence: 1, spec: {} }, { token });
        expect(put.status).toBe(503);
      }
      expect((await stack.agentApi('cred-orphan', 'GET', '/v1/tasks', undefined, { token: null })).status).toBe(401);
    } finally {
      await orphan.process.stop(5000);
      delete stack.agents['cred-orphan'];
    }
  });
});

describe('registration', () => {
  it('issues a new runtime a credential (≥ 32 random bytes, base64url) once, in the 201 answer', async () => {
    const { status, body } = await stack.api('POST', '/v1/runtimes', { role: 'agent', body: { id: 'cred-new', endpoint: 'http://127.0.0.1:9', labels: { zone: 'nowhere' }, slots: 1 } });
    expect(status).toBe(201);
    expect(body).toMatchObject({ id: 'cred-new', fence: 1, resumed: false });
    expect(body.credential).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(Buffer.from(body.credential, 'base64url').length).toBeGreaterThanOrEqual(32);
    expect((await row('cred-new')).credential).toBe(body.credential);
    // another runtime's credential is different
    expect(body.credential).not.toBe(await stack.credentialOf('cred-a'));
  });

  it('refuses to re-register a live runtime with the agent token (409 runtime-live) and disturbs nothing', async () => {
    const before = await row('cred-a');
    const tasksBefore = await incarnationsOn('cred-a');
    expect(Object.keys(tasksBefore)).toHaveLength(1);

    const hijack = { id: 'cred-a', endpoint: 'http://127.0.0.1:9', labels: { zone: 'evil' }, slots: 64 };
    const { status, body } = await stack.api('POST', '/v1/runtimes', { role: 'agent', body: hijack });
    expect(status).toBe(409);
    expect(body.error).toBe('runtime-live');
    expect(body.message).toMatch(/credential/);
    expect(body.credential).toBeUndefined();

    const after = await row('cred-a');
    expect({ fence: after.fence, credential: after.credential, endpoint: after.endpoint, labels: after.labels, slots: after.slots })
      .toEqual({ fence: before.fence, credential: before.credential, endpoint: before.endpoint, labels: before.labels, slots: before.slots });
    // Its own heartbeats go on being accepted (a bumped fence would have them refused and every task revoked) …
    await acceptedHeartbeatAfter('cred-a', after.db_now);
    // … and its task runs on in the same incarnation.
    expect(await incarnationsOn('cred-a')).toEqual(tasksBefore);
  });

  it('resumes a live runtime that re-registers with its own credential: same fence and credential, updated labels and slots, nothing stopped', async () => {
    const before = await row('cred-b');
    const tasksBefore = await incarnationsOn('cred-b');
    expect(Object.keys(tasksBefore)).toHaveLength(1);

    const again = { id: 'cred-b', endpoint: stack.agents['cred-b'].url, labels: { zone: 'b', pool: 'main', rack: 'r7' }, slots: 6 };
    const { status, body } = await stack.api('POST', '/v1/runtimes', { token: before.credential, body: again });
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: 'cred-b', fence: before.fence, resumed: true, labels: again.labels, slots: 6 });
    expect(body.credential).toBeUndefined(); // returned once, at issue

    const after = await row('cred-b');
    expect({ fence: after.fence, credential: after.credential, slots: after.slots, labels: after.labels })
      .toEqual({ fence: before.fence, credential: before.credential, slots: 6, labels: again.labels });
    expect(after.lease_expires_at.getTime()).toBeGreaterThan(before.lease_expires_at.getTime());
    await acceptedHeartbeatAfter('cred-b', after.db_now);
    expect(await incarnationsOn('cred-b')).toEqual(tasksBefore);
  });

  it('refuses a registration with another runtime\'s credential, or an unknown one, 401 invalid-credential', async () => {
    const before = await row('cred-b');
    const body = { id: 'cred-b', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 1 };
    for (const token of [await stack.credentialOf('cred-a'), 'A'.repeat(43)]) {
      const answer = await stack.api('POST', '/v1/runtimes', { token, body });
      expect(answer.status).toBe(401);
      expect(answer.body.error).toBe('invalid-credential');
    }
    const after = await row('cred-b');
    expect({ fence: after.fence, endpoint: after.endpoint, credential: after.credential }).toEqual({ fence: before.fence, endpoint: before.endpoint, credential: before.credential });
  });

  it('an agent restarted with its state folder resumes with its credential: same fence, same credential', async () => {
    const agent = stack.agents['cred-c'];
    const credentialFile = path.join(agent.stateDir, 'credential.json');
    expect(JSON.parse(fs.readFileSync(credentialFile, 'utf8')).credential).toBe(await stack.credentialOf('cred-c'));
    await agent.process.stop(5000);
    // Restarted within its lease: the lease is held open here so that how long a restart takes cannot matter.
    await stack.db.query(`update runtimes set lease_expires_at = now() + interval '5 minutes' where id = 'cred-c'`);
    const before = await row('cred-c');

    await stack.startAgent({ id: 'cred-c', labels: { zone: 'c' } });
    const after = await row('cred-c');
    expect({ fence: after.fence, credential: after.credential, status: after.status }).toEqual({ fence: before.fence, credential: before.credential, status: 'READY' });
    expect(stack.logs.some((line) => line.startsWith('[agent:cred-c]') && line.includes('"event":"resumed"'))).toBe(true);
    expect((await stack.agentApi('cred-c', 'GET', '/v1/health')).body).toMatchObject({ id: 'cred-c', fence: before.fence });
  });
});

describe('heartbeats', () => {
  /** A runtime no agent heartbeats for, so nothing but the request under test can touch its lease. */
  const idle = async (id: string) => {
    const { status, body } = await stack.api('POST', '/v1/runtimes', { role: 'agent', body: { id, endpoint: 'http://127.0.0.1:9', labels: { zone: 'idle' }, slots: 1 } });
    expect(status).toBe(201);
    return body as { fence: number; credential: string };
  };
  const report = { taskId: 'forged-0-g1', workload: 'forged', incarnation: 'i1', state: 'ready' };

  it('refuses a heartbeat with another runtime\'s credential (401) or a role token (403), leaving that runtime\'s lease as it was', async () => {
    const { fence } = await idle('cred-idle-1');
    const before = await row('cred-idle-1');
    const attempts = [
      { token: await stack.credentialOf('cred-a'), status: 401, error: 'invalid-credential' },
      { token: stack.tokens.agent, status: 403, error: 'forbidden' },
      { token: stack.tokens.operator, status: 403, error: 'forbidden' },
    ];
    for (const attempt of attempts) {
      const answer = await stack.api('POST', '/v1/runtimes/cred-idle-1/heartbeat', { token: attempt.token, body: { fence, tasks: [report] } });
      expect({ status: answer.status, error: answer.body.error }).toEqual({ status: attempt.status, error: attempt.error });
      expect(JSON.stringify(answer.body)).not.toContain(attempt.token);
    }
    const after = await row('cred-idle-1');
    expect(after.lease_expires_at).toEqual(before.lease_expires_at);
    expect(after.last_heartbeat_at).toEqual(before.last_heartbeat_at);
    expect(after.tasks).toEqual([]);
  });

  it('accepts a heartbeat with the runtime\'s own credential and renews its lease', async () => {
    const { fence, credential } = await idle('cred-idle-2');
    const before = await row('cred-idle-2');
    const answer = await stack.api('POST', '/v1/runtimes/cred-idle-2/heartbeat', { token: credential, body: { fence, tasks: [report] } });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ fence, revoked: ['forged-0-g1'] }); // reported but placed nowhere
    expect((await row('cred-idle-2')).lease_expires_at.getTime()).toBeGreaterThan(before.lease_expires_at.getTime());
  });
});

describe('where the credential is kept, and where it never shows', () => {
  it('keeps it in the agent\'s state folder mode 600 (folder 700), and never in state, answers or logs', async () => {
    for (const id of ['cred-a', 'cred-b']) {
      const { stateDir } = stack.agents[id];
      const file = path.join(stateDir, 'credential.json');
      expect((fs.statSync(file).mode & 0o777).toString(8)).toBe('600');
      expect((fs.statSync(stateDir).mode & 0o777).toString(8)).toBe('700');
      expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ runtimeId: id, credential: await stack.credentialOf(id) });
    }
    const credentials = Object.values(await stack.runtimeCredentials());
    expect(credentials.length).toBeGreaterThanOrEqual(3);

    const reads = [
      await stack.api('GET', '/v1/state', { role: 'viewer' }),
      await stack.api('GET', '/v1/state', { role: 'operator' }),
      await stack.api('GET', '/v1/workloads/keep', { role: 'operator' }),
      await stack.api('GET', '/v1/ledger', { role: 'viewer' }),
      await stack.api('GET', '/metrics', { role: null }),
      await stack.api('GET', '/openapi.json', { role: null }),
      await stack.api('POST', '/v1/runtimes/cred-c/cordon', { role: 'operator' }),
      await stack.api('POST', '/v1/runtimes/cred-c/uncordon', { role: 'operator' }),
      await stack.agentApi('cred-a', 'GET', '/v1/health'),
      await stack.agentApi('cred-a', 'GET', '/v1/tasks'),
    ];
    for (const read of reads) expect(read.status).toBe(200);
    const state = reads[0].body;
    expect(state.runtimes.map((r: { id: string }) => r.id)).toEqual(expect.arrayContaining(['cred-a', 'cred-b', 'cred-c']));
    for (const runtime of state.runtimes) expect(Object.keys(runtime)).not.toContain('credential');

    const everything = reads.map((read) => JSON.stringify(read.body)).join('\n');
    const logs = stack.logs.join('\n');
    expect(logs).toMatch(/\[agent:cred-a\]/); // the agents did log (registration, heartbeats)
    for (const credential of credentials) {
      expect(everything).not.toContain(credential);
      expect(logs).not.toContain(credential);
    }
  });
});

describe("the agents' database role", () => {
  /** What the agents' credentials get from `sql`: "ok", or the SQLSTATE it was refused with. */
  const asAgent = async (sql: string): Promise<string> => {
    const client = new Client({ connectionString: stack.agentDatabaseUrl });
    await client.connect();
    try {
      await client.query(sql);
      return 'ok';
    } catch (error) {
      return (error as { code?: string }).code ?? (error as Error).message;
    } finally {
      await client.end();
    }
  };

  it('runs a consumer: the agent creates and writes the data-plane tables as scalegate_agent, every record once', async () => {
    const load = await runLoad({ databaseUrl: stack.databaseUrl, source: 'creds_in', partitions: 2, ratePerSec: 500, count: 200 });
    await defineWorkload(stack, 'creds', {
      kind: 'consumer', replicas: 1, selector: { pool: 'main' },
      contract: { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none', partitions: 2 },
      spec: { partitions: 2, source: 'creds_in', sink: 'creds_out', workMs: 0 },
    }, 1);
    await stack.waitFor('every record in the sink', async () => (await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'creds_in', sink: 'creds_out' })).missing === 0);
    expect(await verifyExactlyOnce({ databaseUrl: stack.databaseUrl, source: 'creds_in', sink: 'creds_out' }))
      .toMatchObject({ sourceCount: load.written, sinkCount: load.written, missing: 0, duplicates: 0, extra: 0 });
    // the sink is the agent's own (it created it); the source and the offsets the producer's feed
    // created (the control plane's role here) are the agents' to read and write too
    const { rows } = await stack.db.query<{ tableowner: string }>(`select tableowner from pg_tables where tablename = 'creds_out'`);
    expect(rows).toEqual([{ tableowner: DATA_PLANE_ROLE }]);
    expect((await stack.db.query(`select tableowner from pg_tables where tablename = 'creds_in'`)).rows[0].tableowner).not.toBe(DATA_PLANE_ROLE);
    expect(await asAgent(`update scalegate_consumer_offsets set committed_offset = committed_offset where workload = 'creds'`)).toBe('ok');
    expect(await asAgent('select count(*) from creds_in')).toBe('ok');
  });

  it('can neither read nor write any control-plane table: placements, fences, credentials, the ledger', async () => {
    const reads = Object.fromEntries(await Promise.all(CONTROL_PLANE_TABLES.map(async (table) => [table, await asAgent(`select * from ${table} limit 1`)])));
    // 42501: insufficient_privilege, for every one of them
    expect(reads).toEqual(Object.fromEntries(CONTROL_PLANE_TABLES.map((table) => [table, '42501'])));
    expect(await asAgent(`update placements set fence = fence + 1`)).toBe('42501');
    expect(await asAgent(`update runtimes set credential = 'taken'`)).toBe('42501');
    expect(await asAgent(`insert into ledger (workload, kind, outcome) values ('x', 'x', 'x')`)).toBe('42501');
    expect(await asAgent(`delete from workloads`)).toBe('42501');
    expect(await asAgent(`drop table runtimes`)).toBe('42501');
    expect(await asAgent(`alter role ${DATA_PLANE_ROLE} superuser`)).toBe('42501');
    // nothing changed underneath
    expect((await stack.db.query(`select count(*)::int as n from runtimes where credential = 'taken'`)).rows[0].n).toBe(0);
  });
});
