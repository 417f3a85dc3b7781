// The scale-out gates' facts (issue 23, round trips): every recipient is probed at once and the
// broker read beside them, so the gates wait for the slowest fact, not for the sum. Proved by
// counting the probes in flight together, not by timing.
import { evidenceActivities } from '../../activities/evidence';
import type { ActivityDeps } from '../../activities/ports';
import { capacityFrom, evaluateScaleOutGates, GATE } from '../../domain/gates';
import { freePort } from '../../embedded/processes';
import { kafkaMetadata } from '../../lib/kafka';
import { setTimeout as sleep } from 'node:timers/promises';

const RECIPIENTS = ['rt-a', 'rt-b', 'rt-c'];

function depsWithProbes(probe: (endpoint: string) => Promise<unknown>, partitionCount?: () => Promise<number>): ActivityDeps {
  const workload = {
    name: 'orders', kind: 'consumer', replicas: 1, selector: {}, revision: 1, retired: false,
    contract: { ownership: 'partitioned', partitions: 6, state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign' },
    spec: { partitions: 6, source: { kafka: { topic: 'orders' } }, sink: 'orders_out', workMs: 0 },
  };
  return {
    stores: {
      registry: { getWorkload: async () => workload, usedSlots: async () => ({}), getPlacement: async () => null },
      runtimes: { fleet: async () => [], lostAmong: async () => new Set<string>(), agentTarget: async (id: string) => ({ endpoint: `http://${id}`, credential: 'c' }) },
    },
    agents: { probe: (target: { endpoint: string }) => probe(target.endpoint) },
    now: () => 0,
    ...(partitionCount ? { kafka: { partitionCount } } : {}),
  } as unknown as ActivityDeps;
}

describe('gatherGateFacts', () => {
  it('probes every recipient at once, beside the broker read, and answers each in order', async () => {
    let inFlight = 0;
    let most = 0;
    let release!: () => void;
    const allStarted = new Promise<void>((resolve) => (release = resolve));
    const started = () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      // all four facts in flight together: let them finish (a sequential gathering never gets here,
      // and the fallback below lets it end so that the count, not a hang, fails the test)
      if (inFlight === RECIPIENTS.length + 1) release();
    };
    const settle = async <T>(value: T): Promise<T> => {
      started();
      await Promise.race([allStarted, sleep(200)]);
      inFlight -= 1;
      return value;
    };
    const deps = depsWithProbes(
      (endpoint) => (endpoint === 'http://rt-b' ? settle(null).then(() => { throw new Error('refused'); }) : settle({ source: { ok: true, detail: endpoint }, destination: { ok: true, detail: 'sink' } })),
      () => settle(6),
    );
    const facts = await evidenceActivities(deps).gatherGateFacts({ workload: 'orders', recipientRuntimeIds: RECIPIENTS });
    expect(most).toBe(RECIPIENTS.length + 1);
    expect(facts.probes.map((p) => [p.runtimeId, p.source.ok, p.source.detail])).toEqual([
      ['rt-a', true, 'http://rt-a'], ['rt-b', false, 'probe failed: refused'], ['rt-c', true, 'http://rt-c'],
    ]);
    expect(facts.broker).toEqual({ topic: 'orders', partitions: 6 });
  });

  it('names the missing brokers when the control plane has none', async () => {
    const facts = await evidenceActivities(depsWithProbes(async () => ({ source: { ok: true, detail: '' }, destination: { ok: true, detail: '' } })))
      .gatherGateFacts({ workload: 'orders', recipientRuntimeIds: [] });
    expect(facts).toEqual({ eligible: [], probes: [], broker: { topic: 'orders', error: 'the control plane has no Kafka brokers (SCALEGATE_KAFKA_BROKERS)' } });
    const counted = await evidenceActivities(depsWithProbes(async () => ({ source: { ok: true, detail: '' }, destination: { ok: true, detail: '' } })))
      .gatherGateFacts({ workload: 'orders', recipientRuntimeIds: [], capacity: 'count' });
    expect(counted).toEqual({ capacity: { runtimesWithRoom: 0, freeSlots: 0 }, probes: [], broker: facts.broker });
  });

  it('with the broker unreachable, the ownership gate refuses with broker-unavailable, naming the topic (no hang, no pass)', async () => {
    // a port nothing listens on: every connection is refused, as from a broker that is down
    const port = await freePort();
    const metadata = kafkaMetadata(`127.0.0.1:${port}`);
    const deps = depsWithProbes(async () => ({ source: { ok: true, detail: '' }, destination: { ok: true, detail: '' } }), () => metadata.partitionCount('orders'));
    const facts = await evidenceActivities(deps).gatherGateFacts({ workload: 'orders', recipientRuntimeIds: [] });
    expect(facts.broker).toMatchObject({ topic: 'orders', error: expect.any(String) });
    const workload = await deps.stores.registry.getWorkload('orders');
    const report = evaluateScaleOutGates({ workload: workload! as never, currentReplicas: 1, targetReplicas: 3, capacity: capacityFrom(facts), probes: facts.probes, recipientRuntimeIds: [], broker: facts.broker });
    expect(report.rows.find((row) => row.gate === GATE.inputOwnership)).toMatchObject({ passed: false, detail: expect.stringMatching(/^broker-unavailable: the partition count of kafka topic orders could not be read: /) });
  }, 30_000);
});

describe('captureEvidence', () => {
  it('of a consumer that never ran (its tables not created yet) has no sink audit, rather than failing', async () => {
    const deps = depsWithProbes(async () => ({}));
    const missing = Object.assign(new Error('relation "orders_out" does not exist'), { code: '42P01' });
    const kafkaConsumer = (await deps.stores.registry.getWorkload('orders'))!;
    const tableConsumer = { ...kafkaConsumer, spec: { partitions: 6, source: 'orders_in', sink: 'orders_out', workMs: 0 } };
    Object.assign(deps.stores.registry, { getWorkload: async () => tableConsumer, getPlacement: async () => null });
    Object.assign(deps.stores, { sinkAudit: { exactlyOnce: async () => { throw missing; } } });
    const snapshot = await evidenceActivities(deps).captureEvidence({ workload: 'orders' });
    expect(snapshot).toMatchObject({ tasks: [], ready: 0, processed: 0 });
    expect(snapshot.sink).toBeUndefined();
    // any other database error still fails the capture
    Object.assign(deps.stores, { sinkAudit: { exactlyOnce: async () => { throw new Error('connection refused'); } } });
    await expect(evidenceActivities(deps).captureEvidence({ workload: 'orders' })).rejects.toThrow('connection refused');
  });
});
