import { describeIssues, LIMITS, RuntimeId, WorkloadDefinitionSchema, WorkloadName } from '../../protocol';

describe('workload definition schema', () => {
  const service = { kind: 'service', replicas: 2, spec: { command: ['node', 'server.js'] } };

  it('defaults every contract row to unknown', () => {
    const parsed = WorkloadDefinitionSchema.parse(service);
    expect(parsed.contract).toEqual({ ownership: 'unknown', state: 'unknown', ordering: 'unknown', delivery: 'unknown', recovery: 'unknown' });
  });

  it('refuses replicas 0 with a message that says to retire or delete', () => {
    const result = WorkloadDefinitionSchema.safeParse({ ...service, replicas: 0 });
    expect(result.success).toBe(false);
    expect(describeIssues(result.error!)).toMatch(/replicas.*retire.*delete/);
  });

  it('accepts "all" and refuses other strings', () => {
    expect(WorkloadDefinitionSchema.parse({ ...service, replicas: 'all' }).replicas).toBe('all');
    expect(WorkloadDefinitionSchema.safeParse({ ...service, replicas: 'many' }).success).toBe(false);
  });

  it('takes a downstream as "none" or its limits; one without a limit is refused, saying what to write', () => {
    expect(WorkloadDefinitionSchema.parse({ ...service, contract: { downstream: 'none' } }).contract.downstream).toBe('none');
    expect(WorkloadDefinitionSchema.parse({ ...service, contract: { downstream: { maxRatePerSec: 50 } } }).contract.downstream).toEqual({ maxRatePerSec: 50 });
    const empty = WorkloadDefinitionSchema.safeParse({ ...service, contract: { downstream: {} } });
    expect(describeIssues(empty.error!)).toMatch(/contract\.downstream: .*maxReplicas, maxRatePerSec or both \("none" when there is no downstream to overload\)/);
    expect(WorkloadDefinitionSchema.safeParse({ ...service, contract: { downstream: 'unknown' } }).success).toBe(false);
  });

  it('takes requires as TCP host:port and http(s) URLs, bounded; anything else is refused naming the entry', () => {
    const requires = [{ tcp: 'db.internal:5432' }, { tcp: '10.0.0.7:9092' }, { tcp: '[::1]:80' }, { http: 'https://api.example/healthz' }];
    expect(WorkloadDefinitionSchema.parse({ ...service, requires }).requires).toEqual(requires);
    for (const bad of [{ tcp: 'db.internal' }, { tcp: 'db:70000' }, { tcp: 'a b:1' }, { http: 'ftp://x/y' }, { udp: 'x:1' }]) {
      const result = WorkloadDefinitionSchema.safeParse({ ...service, requires: [bad] });
      expect(result.success).toBe(false);
      expect(describeIssues(result.error!)).toMatch(/^requires\.0/);
    }
    expect(WorkloadDefinitionSchema.safeParse({ ...service, requires: Array.from({ length: 17 }, () => ({ tcp: 'db:1' })) }).success).toBe(false);
  });

  it('takes a service\'s own consumer group as a topic and a group id, nothing else', () => {
    const inGroup = (kafka: unknown) => WorkloadDefinitionSchema.safeParse({ ...service, spec: { ...service.spec, kafka } });
    expect(inGroup({ topic: 'orders', group: 'payments' }).success).toBe(true);
    expect(describeIssues(inGroup({ topic: 'orders' }).error!)).toMatch(/spec\.kafka\.group/);
    expect(describeIssues(inGroup({ topic: 'orders', group: 'has space' }).error!)).toMatch(/spec\.kafka\.group: consumer group ids here are/);
    expect(describeIssues(inGroup({ topic: 'orders', group: 'g', brokers: 'x' }).error!)).toMatch(/brokers/);
  });

  it('takes steps for a service\'s or a consumer\'s scale-outs, not for a stream job (it is rescaled)', () => {
    expect(WorkloadDefinitionSchema.safeParse({ ...service, steps: [1, '50%', 'rest'] }).success).toBe(true);
    expect(describeIssues(WorkloadDefinitionSchema.safeParse({ ...service, steps: ['half'] }).error!)).toMatch(/steps\.0/);
    const stream = { kind: 'stream', steps: [1], spec: { source: 's_in', sink: 's_out', partitions: 2, checkpointIntervalMs: 1000, operators: [{ id: 'src', kind: 'source', parallelism: 1 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 1 }, { id: 'out', kind: 'sink', parallelism: 1 }] } };
    expect(describeIssues(WorkloadDefinitionSchema.safeParse(stream).error!)).toMatch(/steps/);
  });

  it('requires partitions when ownership is partitioned', () => {
    const result = WorkloadDefinitionSchema.safeParse({ ...service, contract: { ownership: 'partitioned' } });
    expect(describeIssues(result.error!)).toMatch(/contract\.partitions/);
  });
});

describe('bounds: every input is bounded before work is done on it', () => {
  const service = { kind: 'service', replicas: 2, spec: { command: ['node', 'server.js'] } };
  const consumer = { kind: 'consumer', replicas: 1, spec: { partitions: 4, source: 'orders', sink: 'orders_out' } };
  const problems = (body: unknown) => {
    const result = WorkloadDefinitionSchema.safeParse(body);
    return result.success ? null : describeIssues(result.error);
  };

  it('refuses replicas above the limit, and huge numbers', () => {
    expect(problems({ ...service, replicas: LIMITS.replicas })).toBeNull();
    expect(problems({ ...service, replicas: LIMITS.replicas + 1 })).toMatch(/replicas.*at most/);
    expect(problems({ ...service, replicas: 1e9 })).toMatch(/replicas/);
    expect(problems({ ...service, replicas: 1e300 })).toMatch(/replicas/);
  });

  it('refuses unknown fields, naming them', () => {
    expect(problems({ ...service, replicaz: 3 })).toMatch(/replicaz/);
    expect(problems({ ...service, spec: { ...service.spec, cmd: ['x'] } })).toMatch(/cmd/);
    expect(problems({ ...service, contract: { ownership: 'none', owner: 'me' } })).toMatch(/owner/);
  });

  it('takes a readiness path only when it is a URL path', () => {
    const withPath = (http: string) => problems({ ...service, spec: { ...service.spec, readiness: { http } } });
    expect(withPath('/healthz')).toBeNull();
    expect(withPath('/a%20b/c')).toBeNull();
    expect(withPath('/health z')).toMatch(/readiness\.http/);
    expect(withPath('healthz')).toMatch(/readiness\.http/);
    expect(withPath('/x?y=1')).toMatch(/readiness\.http/);
  });

  it('bounds argv, env and labels', () => {
    expect(problems({ ...service, spec: { command: Array(LIMITS.argv + 1).fill('x') } })).toMatch(/spec\.command/);
    expect(problems({ ...service, spec: { command: ['x'.repeat(LIMITS.argLength + 1)] } })).toMatch(/spec\.command/);
    const env = Object.fromEntries(Array.from({ length: LIMITS.envEntries + 1 }, (_, i) => [`V${i}`, 'x']));
    expect(problems({ ...service, spec: { ...service.spec, env } })).toMatch(/spec\.env/);
    expect(problems({ ...service, spec: { ...service.spec, env: { 'BAD-NAME': 'x' } } })).toMatch(/spec\.env/);
    const selector = Object.fromEntries(Array.from({ length: LIMITS.labels + 1 }, (_, i) => [`k${i}`, 'v']));
    expect(problems({ ...service, selector })).toMatch(/selector/);
  });

  it('takes workload names and runtime ids only as DNS labels', () => {
    expect(WorkloadName.safeParse('web-1').success).toBe(true);
    expect(WorkloadName.safeParse('web-').success).toBe(false);
    expect(WorkloadName.safeParse('a'.repeat(64)).success).toBe(false);
    expect(RuntimeId.safeParse('Agent_A').success).toBe(false);
  });

  it('refuses a consumer on the control plane tables or with its source as its sink', () => {
    expect(problems(consumer)).toBeNull();
    expect(problems({ ...consumer, spec: { ...consumer.spec, sink: 'orders' } })).toMatch(/spec\.sink.*different/);
    expect(problems({ ...consumer, spec: { ...consumer.spec, source: 'workloads' } })).toMatch(/spec\.source.*control-plane/);
    expect(problems({ ...consumer, spec: { ...consumer.spec, sink: 'scalegate_consumer_offsets' } })).toMatch(/spec\.sink/);
    expect(problems({ ...consumer, spec: { ...consumer.spec, source: 'pg_authid' } })).toMatch(/spec\.source/);
  });
});

describe('stream job definitions', () => {
  const operators = [
    { id: 'src', kind: 'source', parallelism: 2 },
    { id: 'agg', kind: 'keyed-aggregate', parallelism: 3 },
    { id: 'out', kind: 'sink', parallelism: 1 },
  ];
  const stream = { kind: 'stream', spec: { source: 'clicks', sink: 'click_counts', partitions: 4, checkpointIntervalMs: 1000, maxParallelism: 8, operators } };
  const withSpec = (spec: Record<string, unknown>) => ({ ...stream, spec: { ...stream.spec, ...spec } });
  const withOperator = (index: number, change: Record<string, unknown>) => withSpec({ operators: operators.map((op, i) => (i === index ? { ...op, ...change } : op)) });
  const problems = (body: unknown) => {
    const result = WorkloadDefinitionSchema.safeParse(body);
    return result.success ? null : describeIssues(result.error);
  };

  it('derives replicas from the operators and ignores an explicit replicas', () => {
    expect(WorkloadDefinitionSchema.parse(stream).replicas).toBe(6);
    expect(WorkloadDefinitionSchema.parse({ ...stream, replicas: 40 }).replicas).toBe(6);
    expect(WorkloadDefinitionSchema.parse({ ...stream, replicas: 'all' }).replicas).toBe(6);
  });

  it('defaults maxParallelism to 128', () => {
    const { maxParallelism: _omitted, ...spec } = stream.spec;
    const parsed = WorkloadDefinitionSchema.parse({ ...stream, spec });
    expect(parsed.kind === 'stream' && parsed.spec.maxParallelism).toBe(128);
  });

  it('refuses operators that are not source → keyed-aggregate → sink, naming spec.operators', () => {
    expect(problems(withSpec({ operators: [operators[0], operators[2], operators[1]] }))).toMatch(/spec\.operators: operators must be source → keyed-aggregate → sink, got source → sink → keyed-aggregate/);
    expect(problems(withSpec({ operators: [operators[0], operators[2]] }))).toMatch(/spec\.operators: operators must be/);
    expect(problems(withSpec({ operators: [] }))).toMatch(/spec\.operators/);
    expect(problems(withOperator(1, { kind: 'map' }))).toMatch(/spec\.operators\.1\.kind/);
  });

  it('refuses a parallelism above maxParallelism, naming that operator', () => {
    expect(problems(withOperator(1, { parallelism: 8 }))).toBeNull();
    expect(problems(withOperator(1, { parallelism: 9 }))).toMatch(/spec\.operators\.1\.parallelism: parallelism 9 of "agg" is above maxParallelism 8/);
    expect(problems(withOperator(2, { parallelism: 0 }))).toMatch(/spec\.operators\.2\.parallelism/);
  });

  it('refuses a source parallelism above the partitions it reads', () => {
    expect(problems(withOperator(0, { parallelism: 4 }))).toBeNull();
    expect(problems(withOperator(0, { parallelism: 5 }))).toMatch(/spec\.operators\.0\.parallelism: source parallelism 5 is above the 4 partitions/);
  });

  it('refuses an operator id used twice, naming the second', () => {
    expect(problems(withOperator(2, { id: 'src' }))).toMatch(/spec\.operators\.2\.id: operator id "src" is used twice/);
    expect(problems(withOperator(2, { id: 'Out_1' }))).toMatch(/spec\.operators\.2\.id: operator ids are DNS labels/);
  });

  it('refuses its source as its sink, and control-plane tables', () => {
    expect(problems(withSpec({ sink: 'clicks' }))).toMatch(/spec\.sink: source and sink must be different tables/);
    expect(problems(withSpec({ source: 'scalegate_stream_jobs' }))).toMatch(/spec\.source/);
  });

  it('reads a Kafka topic where a table can stand; a topic name Kafka would refuse is refused', () => {
    expect(problems(withSpec({ source: { kafka: { topic: 'clicks.v1' } } }))).toBeNull();
    expect(problems(withSpec({ source: { kafka: { topic: 'no spaces' } } }))).toMatch(/spec\.source/);
    expect(problems(withSpec({ source: { kafka: { topic: 'clicks', group: 'g' } } }))).toMatch(/spec\.source/);
  });

  it('refuses unknown spec fields and bounds checkpointIntervalMs', () => {
    expect(problems(withSpec({ parallel: 2 }))).toMatch(/parallel/);
    expect(problems(withSpec({ checkpointIntervalMs: 1 }))).toMatch(/spec\.checkpointIntervalMs/);
  });
});
