import { WorkloadDefinitionSchema, describeIssues } from '../../protocol';

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

  it('requires partitions when ownership is partitioned', () => {
    const result = WorkloadDefinitionSchema.safeParse({ ...service, contract: { ownership: 'partitioned' } });
    expect(describeIssues(result.error!)).toMatch(/contract\.partitions/);
  });
});
