// 1,000 malformed or hostile requests against every route of the real API (issue 9): wrong types,
// huge numbers and strings, unknown fields, bad JSON, wrong roles, other runtimes' credentials,
// hostile path parameters. None may answer 5xx, every process must still be alive afterwards, and a
// refused request must leave the database exactly as it was. Requests are generated from the
// OpenAPI document, so a new route is fuzzed without touching this file; the generator is seeded,
// so a failure names the request and reproduces.
import { seededRandom } from '../../lib/seeded-random';
import { startStack, type Stack } from '../../harness/stack';
import { defineWorkload } from '../../harness/workloads';

const REQUESTS = 1000;
const SEED = 0x5ca1e;

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ agents: [{ id: 'fz-a', labels: { zone: 'a' } }, { id: 'fz-b', labels: { zone: 'b' } }] });
  await defineWorkload(stack, 'web', {
    kind: 'service', replicas: 1,
    spec: { command: ['node', '-e', 'require("http").createServer((q, s) => s.end("ok")).listen(process.env.PORT)'], readiness: { http: '/' } },
  }, 1);
});
afterAll(async () => {
  await stack?.stop();
});

interface Route {
  method: string;
  path: string;
  /** x-scalegate-role: operator, viewer, agent, runtime (the one in the path), agent-or-runtime, none */
  role: string;
  hasBody: boolean;
}

interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** what makes it hostile, for the failure message */
  why: string[];
}

/** Everything a refused request must not have changed (leases and the reconcile marker move on their own). */
async function databaseFingerprint(): Promise<string> {
  const { rows } = await stack.db.query<{ fingerprint: string }>(`
    select md5(concat_ws('|',
      (select coalesce(string_agg(name || revision || retired || definition::text, ',' order by name), '') from workloads),
      (select coalesce(string_agg(workload || fence || assignments::text, ',' order by workload), '') from placements),
      (select count(*)::text from plans),
      (select coalesce(string_agg(workload || reason || missing, ',' order by workload), '') from unplaced),
      (select count(*)::text from ledger),
      (select coalesce(string_agg(id || status || fence || endpoint || labels::text || slots, ',' order by id), '') from runtimes)
    )) as fingerprint`);
  return rows[0].fingerprint;
}

const HOSTILE_STRINGS = [
  '', ' ', 'A'.repeat(5000), '../../etc/passwd', '%00', '\u0000', '💥🔥', '<script>alert(1)</script>', "'; drop table workloads; --",
  'web\nInjected: header', '-1', '1e309', 'NaN', '__proto__', 'constructor', '{"$ne":null}',
];
const HOSTILE_VALUES: unknown[] = [
  null, true, -1, 0, 1e9, 1e308, -1e308, 3.5, Number.MAX_SAFE_INTEGER + 2, 'x'.repeat(100_000), [], [[[[[]]]]], {}, { __proto__: { polluted: 1 } },
  'all', '1', ['node'], { $gt: '' },
];
const RAW_BODIES = ['{', '[', 'null', '"text"', '{"replicas":', '{"a":1,"a":2}', '1e309', '['.repeat(5000), '{"replicas":1}garbage', '\u0000', ''];

const pathRuntime = (path: string) => path.match(/\/v1\/runtimes\/([^/?]+)/)?.[1];

function generator(routes: Route[], valid: { credentials: Record<string, string> }) {
  const random = seededRandom(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const roleTokens: Record<string, string> = { operator: stack.tokens.operator, viewer: stack.tokens.viewer, agent: stack.tokens.agent };
  const validParam: Record<string, string[]> = {
    name: ['web', 'nothing-here'], id: ['fz-a', 'fz-b', 'plan-unknown'], workflowId: ['scale:web', 'reconcile:x'],
  };
  /** A body that would pass its schema, to be broken in exactly the ways listed in `why`. */
  const baseBody = (route: Route): Record<string, unknown> => {
    if (route.path === '/v1/workloads/{name}') return { kind: 'service', replicas: 1, spec: { command: ['node', 'x.js'] } };
    if (route.path.endsWith('/heartbeat')) return { fence: 1, tasks: [] };
    if (route.path === '/v1/runtimes') return { id: 'fz-new', endpoint: 'http://127.0.0.1:9', labels: {}, slots: 1 };
    return { replicas: 2 };
  };
  const mutateBody = (body: Record<string, unknown>, why: string[]): string => {
    const keys = Object.keys(body);
    switch (Math.floor(random() * 4)) {
      case 0: {
        const key = pick(keys);
        // 'all' or '1' in place of a string field can be a valid value (a runtime named "all"): not hostile there.
        const value = pick(typeof body[key] === 'string' ? HOSTILE_VALUES.filter((v) => !(typeof v === 'string' && /^[a-z0-9]+$/.test(v))) : HOSTILE_VALUES);
        why.push(`body.${key} = ${JSON.stringify(value)?.slice(0, 40)}`);
        return JSON.stringify({ ...body, [key]: value });
      }
      case 1: {
        const key = pick(['unknownField', 'replicaz', '__proto__', 'constructor', 'x'.repeat(300)]);
        why.push(`unknown field ${key.slice(0, 20)}`);
        return JSON.stringify({ ...body, [key]: 1 });
      }
      case 2: {
        const raw = pick(RAW_BODIES);
        why.push(`raw body ${JSON.stringify(raw.slice(0, 20))}`);
        return raw;
      }
      default: {
        const value = pick(HOSTILE_VALUES);
        why.push(`body is ${JSON.stringify(value)?.slice(0, 40)}`);
        return JSON.stringify(value);
      }
    }
  };

  return (): FuzzRequest => {
    const route = pick(routes);
    const why: string[] = [];
    const mutating = route.method !== 'GET';
    const hasParams = route.path.includes('{');
    let breakPath = hasParams && random() < 0.3;
    let breakAuth = route.role !== 'none' && random() < 0.4;
    let breakBody = route.hasBody && random() < 0.5;
    // A mutating request is always broken in at least one way, so every one of them must be refused.
    if (mutating && !breakPath && !breakAuth && !breakBody) {
      if (route.hasBody) breakBody = true;
      else if (hasParams) breakPath = true;
      else breakAuth = true;
    }

    let path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (breakPath) {
        // '1e309' is a valid name (a DNS label): not hostile in a path.
        const hostile = pick(HOSTILE_STRINGS.filter((h) => !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(h)));
        why.push(`path ${name} = ${JSON.stringify(hostile.slice(0, 30))}`);
        return encodeURIComponent(hostile);
      }
      return pick(validParam[name] ?? ['x']);
    });
    if (route.path === '/v1/ledger' && random() < 0.7) {
      const limit = pick(['1e9', '-1', 'abc', '0', '1001', '%00', '9'.repeat(400)]);
      why.push(`limit=${limit.slice(0, 20)}`);
      path += `?limit=${encodeURIComponent(limit)}&workload=${encodeURIComponent(pick(HOSTILE_STRINGS))}`;
    }

    const headers: Record<string, string> = {};
    if (breakAuth) {
      const choice = pick(['none', 'garbage', 'wrong-role', 'other-runtime', 'basic', 'huge'] as const);
      why.push(`auth ${choice}`);
      if (choice === 'garbage') headers.authorization = 'Bearer not-a-token';
      if (choice === 'basic') headers.authorization = 'Basic dXNlcjpwYXNz';
      if (choice === 'huge') headers.authorization = `Bearer ${'x'.repeat(10_000)}`;
      if (choice === 'other-runtime') {
        // a real credential, but not the one of the runtime the path names
        const others = Object.entries(valid.credentials).filter(([id]) => id !== pathRuntime(path)).map(([, credential]) => credential);
        headers.authorization = `Bearer ${pick(others)}`;
      }
      if (choice === 'wrong-role') {
        const allowed = route.role === 'viewer' ? ['viewer', 'operator'] : route.role === 'agent-or-runtime' ? ['agent'] : [route.role];
        const wrong = Object.keys(roleTokens).filter((role) => !allowed.includes(role));
        headers.authorization = `Bearer ${roleTokens[pick(wrong)]}`;
      }
    } else if (route.role in roleTokens) {
      headers.authorization = `Bearer ${roleTokens[route.role]}`;
    } else if (route.role === 'agent-or-runtime') {
      headers.authorization = `Bearer ${roleTokens.agent}`;
    } else if (route.role === 'runtime') {
      headers.authorization = `Bearer ${valid.credentials[pathRuntime(path) ?? ''] ?? 'unknown'}`;
    }

    let body: string | undefined;
    if (route.hasBody) {
      body = breakBody ? mutateBody(baseBody(route), why) : JSON.stringify(baseBody(route));
      headers['content-type'] = pick(['application/json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded']);
      if (headers['content-type'] !== 'application/json') why.push(`content-type ${headers['content-type']}`);
    }
    return { method: route.method, url: `${stack.apiUrl}${path}`, headers, body, why };
  };
}

describe('fuzzing every route', () => {
  it(`answers ${REQUESTS} malformed or hostile requests without a 5xx, keeps every process alive, and changes nothing it refused`, async () => {
    const openapi = (await stack.api('GET', '/openapi.json', { role: null })).body as {
      paths: Record<string, Record<string, { 'x-scalegate-role': string; requestBody?: unknown }>>;
    };
    const routes: Route[] = Object.entries(openapi.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(), path, role: operation['x-scalegate-role'], hasBody: operation.requestBody !== undefined,
      })),
    );
    expect(routes.length).toBeGreaterThanOrEqual(18);
    const next = generator(routes, { credentials: await stack.runtimeCredentials() });

    const serverErrors: string[] = [];
    const changedWhenRefused: string[] = [];
    const acceptedMutations: string[] = [];
    const statuses: Record<number, number> = {};
    for (let i = 0; i < REQUESTS; i++) {
      const request = next();
      const before = await databaseFingerprint();
      const response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.body, signal: AbortSignal.timeout(30_000) });
      const text = await response.text();
      const after = await databaseFingerprint();
      statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      const label = `#${i} ${request.method} ${request.url.slice(stack.apiUrl.length, stack.apiUrl.length + 80)} [${request.why.join('; ')}] → ${response.status} ${text.slice(0, 160)}`;
      if (response.status >= 500) serverErrors.push(label);
      if (response.status >= 400 && after !== before) changedWhenRefused.push(label);
      if (request.method !== 'GET' && response.status < 400) acceptedMutations.push(label);
      if (response.status >= 400) expect(JSON.parse(text)).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    }

    expect(serverErrors).toEqual([]);
    expect(changedWhenRefused).toEqual([]);
    expect(acceptedMutations).toEqual([]); // every mutating request was broken in some way
    expect(Object.keys(statuses).map(Number).filter((s) => s >= 400).length).toBeGreaterThanOrEqual(4); // 400, 401, 403, 404, 422 …
    for (const service of stack.processes()) expect({ service: service.name, exitCode: service.child.exitCode, signal: service.child.signalCode }).toEqual({ service: service.name, exitCode: null, signal: null });
    expect((await stack.api('GET', '/readyz', { role: null })).status).toBe(200);
  });
});
