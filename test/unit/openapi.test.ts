// The OpenAPI document (GET /openapi.json) as built from the route declarations, without a running
// stack: every operation named and typed, request bodies and answers from protocol/ schemas, errors
// in the one Error shape. `npm run lint:openapi` lints the same document (redocly.yaml).
import { offlineApiDocument } from '../../api/server';

type Schema = { $ref?: string; type?: string; properties?: Record<string, Schema>; required?: string[]; oneOf?: Schema[]; anyOf?: Schema[]; allOf?: Schema[]; enum?: string[] };
interface Operation {
  operationId?: string;
  tags?: string[];
  security: unknown[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: Schema }> }>;
}

const doc = offlineApiDocument({});
const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
  Object.entries(item as Record<string, Operation>).map(([method, operation]) => ({ where: `${method.toUpperCase()} ${path}`, operation })));
const operationAt = (method: string, path: string) => (doc.paths[path] as Record<string, Operation>)[method];

/** A `#/components/...` reference, followed; anything else as it is. */
function resolve<T extends { $ref?: string }>(node: T): T {
  if (!node.$ref) return node;
  const target = node.$ref.replace(/^#\//, '').split('/').reduce<unknown>((at, key) => (at as Record<string, unknown>)?.[key], doc);
  if (!target) throw new Error(`unresolved ${node.$ref}`);
  return resolve(target as T);
}

/** A schema that says what the body is: properties, alternatives, or a scalar type; never just `{type: object}`. */
const typed = (schema: Schema) =>
  Boolean(schema.properties && Object.keys(schema.properties).length) || Boolean(schema.oneOf ?? schema.anyOf ?? schema.allOf) || (schema.type !== undefined && schema.type !== 'object');

describe('the OpenAPI document', () => {
  it('lists every route of DESIGN.md §6', () => {
    expect(operations.map((o) => o.where).sort()).toEqual([
      'DELETE /v1/workloads/{name}',
      'GET /healthz', 'GET /metrics', 'GET /openapi.json', 'GET /readyz',
      'GET /v1/jobs', 'GET /v1/jobs/{job}', 'GET /v1/ledger', 'GET /v1/operations', 'GET /v1/operations/{workflowId}', 'GET /v1/operations/{workflowId}/report', 'GET /v1/state', 'GET /v1/tiers', 'GET /v1/tiers/{tier}', 'GET /v1/workloads/{name}',
      'POST /v1/jobs/{job}/operators/{op}/rescale',
      'POST /v1/operations/{workflowId}/abort', 'POST /v1/operations/{workflowId}/approve',
      'POST /v1/plans/{id}/apply',
      'POST /v1/runtimes', 'POST /v1/runtimes/{id}/cordon', 'POST /v1/runtimes/{id}/heartbeat', 'POST /v1/runtimes/{id}/recover', 'POST /v1/runtimes/{id}/uncordon',
      'POST /v1/tiers/{tier}/signals',
      'POST /v1/workloads/{name}/plan', 'POST /v1/workloads/{name}/rollout', 'POST /v1/workloads/{name}/scale',
      'PUT /v1/tiers/{tier}/policy', 'PUT /v1/workloads/{name}',
    ].sort());
  });

  it('names every operation once, in camelCase', () => {
    const ids = operations.map((o) => o.operation.operationId);
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(operationAt('post', '/v1/workloads/{name}/scale').operationId).toBe('scaleWorkload');
    expect(operationAt('get', '/v1/operations/{workflowId}').operationId).toBe('getOperation');
  });

  it('types the success answer of every operation with its protocol/ schema', () => {
    for (const { where, operation } of operations) {
      const successes = Object.entries(operation.responses).filter(([status]) => /^2\d\d$/.test(status));
      expect([where, successes.length > 0]).toEqual([where, true]);
      for (const [status, response] of successes) {
        const media = Object.values(response.content ?? {});
        expect([where, status, media.length]).toEqual([where, status, 1]);
        expect([where, status, typed(resolve(media[0].schema))]).toEqual([where, status, true]);
      }
    }
    const scale = operationAt('post', '/v1/workloads/{name}/scale').responses['202'].content!['application/json'].schema;
    expect(scale).toEqual({ $ref: '#/components/schemas/StartedOperation' });
    expect(resolve(scale).required).toEqual(expect.arrayContaining(['workflowId', 'runId', 'kind', 'uiUrl']));
    expect(Object.keys(operationAt('put', '/v1/workloads/{name}').responses)).toEqual(expect.arrayContaining(['200', '201']));
  });

  it('gives the workload and tier policy PUTs their real request bodies', () => {
    const workload = operationAt('put', '/v1/workloads/{name}').requestBody!.content['application/json'].schema;
    expect(workload.oneOf?.map((kind) => kind.properties?.kind)).toEqual([{ type: 'string', const: 'service' }, { type: 'string', const: 'consumer' }, { type: 'string', const: 'stream' }]);
    for (const kind of workload.oneOf!) expect(Object.keys(kind.properties!)).toEqual(expect.arrayContaining(['kind', 'replicas', 'selector', 'contract', 'spec']));
    const policy = operationAt('put', '/v1/tiers/{tier}/policy').requestBody!.content['application/json'].schema;
    expect(Object.keys(policy.properties!)).toEqual(expect.arrayContaining(['workloads', 'minReplicas', 'maxReplicas', 'targets', 'tolerance', 'changeWindows']));
    // defaults are not required of a request
    expect(policy.required).toEqual(['workloads', 'targets']);
  });

  it('answers errors in the one Error shape, by status, where a route can produce them', () => {
    const error = doc.components.schemas.Error as Schema;
    expect(error.required).toEqual(['error', 'message']);
    expect(error.properties!.error.enum).toEqual(expect.arrayContaining(['validation-failed', 'operation-in-progress', 'stale-plan', 'unauthorized']));
    for (const { where, operation } of operations) {
      const statuses = Object.keys(operation.responses);
      if (operation.security.length) expect([where, statuses]).toEqual([where, expect.arrayContaining(['401', '403', '503'])]);
      for (const status of statuses.filter((s) => /^4/.test(s))) {
        expect(resolve(resolve(operation.responses[status]).content!['application/json'].schema)).toBe(error);
      }
    }
    expect(Object.keys(operationAt('post', '/v1/workloads/{name}/scale').responses)).toEqual(expect.arrayContaining(['400', '404', '409', '415', '422']));
    expect(Object.keys(operationAt('post', '/v1/plans/{id}/apply').responses)).toEqual(expect.arrayContaining(['404', '409']));
    // /readyz's 503 is its own body, not an error
    expect(operationAt('get', '/readyz').responses['503'].content!['application/json'].schema).toEqual({ $ref: '#/components/schemas/Readiness' });
  });

  it('documents the answers any request can get before a route runs: 405 with Allow, 431, 414 on a path parameter, 413 on a body', () => {
    for (const { where, operation } of operations) {
      const statuses = Object.keys(operation.responses);
      expect([where, statuses]).toEqual([where, expect.arrayContaining(['405', '431'])]);
      if (where.includes('{')) expect([where, statuses]).toEqual([where, expect.arrayContaining(['414'])]);
      if (operation.requestBody) expect([where, statuses]).toEqual([where, expect.arrayContaining(['413'])]);
    }
    expect(Object.keys(operationAt('get', '/v1/tiers/{tier}').responses)).toEqual(expect.arrayContaining(['414']));
    const responses = doc.components.responses as Record<string, { headers?: Record<string, unknown>; description: string }>;
    expect(Object.keys(responses.MethodNotAllowed.headers!)).toEqual(['Allow']);
    expect(responses.MethodNotAllowed.description).toMatch(/method-not-allowed/);
    expect(responses.HeadersTooLarge.description).toMatch(/headers-too-large/);
    expect(responses.UriTooLong.description).toMatch(/uri-too-long/);
    expect(responses.PayloadTooLarge.description).toMatch(/body-too-large/);
  });

  it('states the refinements the API enforces, so a request valid by the document is not refused as malformed', () => {
    const body = (method: string, path: string) => operationAt(method, path).requestBody!.content['application/json'].schema as Record<string, any>;
    // replicas: 0 is refused on scale, plan and a workload's definition; "all" is no scale's
    expect(body('post', '/v1/workloads/{name}/scale').properties.replicas).toEqual({ type: 'integer', minimum: 1, maximum: 10_000 });
    expect(body('post', '/v1/workloads/{name}/plan').properties.replicas.anyOf).toEqual([{ type: 'string', const: 'all' }, { type: 'integer', minimum: 1, maximum: 10_000 }]);
    for (const kind of body('put', '/v1/workloads/{name}').oneOf) expect(kind.properties.replicas.anyOf).toContainEqual(expect.objectContaining({ type: 'integer', minimum: 1 }));
    // a signal carries at least one figure; a policy at least one target, each workload once
    expect(body('post', '/v1/tiers/{tier}/signals').anyOf.map((a: any) => a.required)).toEqual([['qps'], ['activeUsers'], ['cpuUtilization'], ['queueDepth']]);
    const policy = body('put', '/v1/tiers/{tier}/policy');
    expect(policy.properties.targets.minProperties).toBe(1);
    expect(policy.properties.workloads.uniqueItems).toBe(true);
    expect(policy.dependentSchemas.observe.properties.targets.required).toEqual(['queueDepthPerInstance']);
    expect(policy.description).toMatch(/minReplicas ≤ maxReplicas/);
    // a partitioned contract names its partitions; no control-plane table as a source or sink; bounded labels
    const consumer = body('put', '/v1/workloads/{name}').oneOf[1];
    expect(consumer.properties.contract.then.required).toEqual(['partitions']);
    expect(JSON.stringify(consumer.properties.spec)).toContain('"not":{"anyOf":[{"enum":[');
    expect(consumer.properties.selector.maxProperties).toBeGreaterThan(0);
    // no NUL in a request's strings or keys (http/route.ts refuses them)
    expect(body('post', '/v1/workloads/{name}/scale').properties.reason.pattern).toBe('^[^\\u0000]*$');
    expect(new RegExp(body('post', '/v1/workloads/{name}/scale').properties.reason.pattern).test('a\u0000b')).toBe(false);
  });

  it('documents the Idempotency-Key of every route that starts an operation', () => {
    const starts = [['post', '/v1/workloads/{name}/scale'], ['delete', '/v1/workloads/{name}'], ['post', '/v1/plans/{id}/apply'], ['post', '/v1/runtimes/{id}/recover'], ['post', '/v1/jobs/{job}/operators/{op}/rescale']];
    for (const [method, path] of starts) {
      expect((operationAt(method, path) as Operation & { parameters: unknown[] }).parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header' }));
      // the key reused on another request is idempotency-key-reused, a 422 (issue 33)
      expect(Object.keys(operationAt(method, path).responses)).toEqual(expect.arrayContaining(['409', '422']));
    }
    expect(JSON.stringify(doc.components.responses.ValidationFailed)).toContain('idempotency-key-reused');
    expect(Object.keys(operationAt('put', '/v1/workloads/{name}').responses)).toContain('409');
    expect(JSON.stringify(doc.components.responses.Conflict)).toContain('kind-change');
  });

  it('reads a named run of an operation, and lists runs by workload and kind', () => {
    for (const path of ['/v1/operations/{workflowId}', '/v1/operations/{workflowId}/report']) {
      expect((operationAt('get', path) as Operation & { parameters: unknown[] }).parameters).toContainEqual(expect.objectContaining({ name: 'runId', in: 'query' }));
    }
    const list = operationAt('get', '/v1/operations') as Operation & { parameters: { name: string }[] };
    expect(list.parameters.map((p) => p.name).sort()).toEqual(['kind', 'limit', 'workload']);
    expect(resolve(list.responses['200'].content!['application/json'].schema).required).toEqual(['operations']);
  });

  it('names its server, from SCALEGATE_API_URL or the listen address', () => {
    expect(doc.servers).toEqual([{ url: 'http://127.0.0.1:8080', description: 'this API' }]);
    expect(offlineApiDocument({ SCALEGATE_API_URL: 'https://scalegate.internal/' }).servers[0].url).toBe('https://scalegate.internal');
    expect(offlineApiDocument({ SCALEGATE_API_HOST: '0.0.0.0', SCALEGATE_API_PORT: '9090' }).servers[0].url).toBe('http://127.0.0.1:9090');
  });

  it('declares every tag it uses, and every reference resolves', () => {
    const declared = doc.tags.map((t) => t.name);
    for (const { operation } of operations) expect(declared).toEqual(expect.arrayContaining(operation.tags!));
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of refs) expect(() => resolve({ $ref: JSON.parse(`{${ref}}`).$ref })).not.toThrow();
  });
});
