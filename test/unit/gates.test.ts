import {
  GATE,
  GATE_ORDER,
  capacityFrom,
  capacityOf,
  roomOf,
  evaluateScaleOutGates,
  formatEvidenceGap,
  smallestIncrease,
  type GateName,
  type GateReport,
  type ScaleOutGateInput,
  unreadyBaselineTasks,
  type BaselineTask,
  type EligibleRuntime,
} from '../../domain/gates';
import { UNKNOWN_CONTRACT, type Contract } from '../../protocol';
import { expectedRateAt } from '../../domain/evidence';

// A consumer that passes every gate: 8 partitions, going 2 → 4 replicas onto rt-c and rt-d
// (rt-a and rt-b already host it, rt-e is full).
const passingContract: Contract = {
  ownership: 'partitioned',
  partitions: 8,
  state: 'checkpointed',
  ordering: 'per-partition',
  delivery: 'at-least-once',
  recovery: 'replay-from-checkpoint',
  downstream: { maxReplicas: 10, maxRatePerSec: 5000 },
};

const okProbe = (runtimeId: string) => ({ runtimeId, source: { ok: true }, destination: { ok: true } });

const ELIGIBLE: readonly EligibleRuntime[] = [
  { id: 'rt-a', freeSlots: 2, alreadyHostsWorkload: true },
  { id: 'rt-b', freeSlots: 2, alreadyHostsWorkload: true },
  { id: 'rt-c', freeSlots: 1, alreadyHostsWorkload: false },
  { id: 'rt-d', freeSlots: 3, alreadyHostsWorkload: false },
  { id: 'rt-e', freeSlots: 0, alreadyHostsWorkload: false },
];

function passingInput(): ScaleOutGateInput {
  return {
    workload: {
      name: 'orders',
      kind: 'consumer',
      contract: { ...passingContract },
      spec: { partitions: 8, source: 'orders_in', sink: 'orders_out', workMs: 1 },
    },
    currentReplicas: 2,
    targetReplicas: 4,
    capacity: capacityOf(ELIGIBLE),
    probes: ['rt-a', 'rt-b', 'rt-c', 'rt-d', 'rt-e'].map(okProbe),
    // the runtimes not hosting the consumer with a free slot
    recipientRuntimeIds: ['rt-c', 'rt-d'],
    baseline: { ok: true },
    expectedRatePerSec: 4000,
  };
}

function withContract(patch: Partial<Contract>): ScaleOutGateInput {
  const input = passingInput();
  input.workload = { ...input.workload, contract: { ...passingContract, ...patch } } as ScaleOutGateInput['workload'];
  return input;
}

const failedGates = (report: GateReport): GateName[] => report.rows.filter((r) => !r.passed).map((r) => r.gate);
const row = (report: GateReport, gate: GateName) => report.rows.find((r) => r.gate === gate)!;

/** The gate fails alone, names its missing evidence, and the gap report has exactly its line. */
function expectOnlyFailure(report: GateReport, gate: GateName, detail: RegExp, missing: RegExp): void {
  expect(failedGates(report)).toEqual([gate]);
  expect(report.passed).toBe(false);
  expect(report.rows.map((r) => r.gate)).toEqual(GATE_ORDER);
  expect(row(report, gate).detail).toMatch(detail);
  expect(row(report, gate).missingEvidence).toMatch(missing);
  const gap = formatEvidenceGap(report).split('\n');
  expect(gap).toHaveLength(1);
  expect(gap[0]).toMatch(new RegExp(`^${gate}: `));
  expect(gap[0]).toContain(row(report, gate).missingEvidence!);
}

describe('evaluateScaleOutGates', () => {
  it('passes every row, in checklist order, when all evidence is present', () => {
    const report = evaluateScaleOutGates(passingInput());
    expect(report.passed).toBe(true);
    expect(report.rows.map((r) => r.gate)).toEqual([
      'baseline',
      'input-ownership',
      'state',
      'ordering',
      'delivery',
      'recovery',
      'capacity',
      'connectivity',
      'downstream',
    ]);
    expect(report.rows.every((r) => r.passed && r.missingEvidence === undefined)).toBe(true);
    expect(formatEvidenceGap(report)).toBe('');
  });

  it('turns the all-unknown default contract into a failure naming every unknown row', () => {
    const input = passingInput();
    input.workload = { ...input.workload, contract: UNKNOWN_CONTRACT };
    const report = evaluateScaleOutGates(input);
    expect(report.passed).toBe(false);
    expect(failedGates(report)).toEqual(['input-ownership', 'state', 'ordering', 'delivery', 'recovery', 'downstream']);
    // every row is still evaluated and reported
    expect(report.rows).toHaveLength(GATE_ORDER.length);
    expect(formatEvidenceGap(report).split('\n')).toHaveLength(6);
    for (const r of report.rows.filter((x) => !x.passed)) expect(r.missingEvidence).toBeTruthy();
  });

  describe('baseline', () => {
    it('fails alone when the baseline is unhealthy', () => {
      const input = passingInput();
      input.baseline = { ok: false, detail: 'error rate 12%' };
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.baseline, /not healthy.*error rate 12%/, /healthy baseline/);
    });

    it('is not judged when no baseline is supplied', () => {
      const input = passingInput();
      delete input.baseline;
      const report = evaluateScaleOutGates(input);
      expect(report.passed).toBe(true);
      expect(row(report, GATE.baseline).detail).toMatch(/no baseline supplied/);
    });

    // Supervision (DESIGN.md §3): a crash-looping or unready task of the workload refuses a scale-out, named.
    const task = (taskId: string, state: string, extra: Partial<BaselineTask> = {}): BaselineTask => ({ taskId, runtimeId: 'rt-a', state, ...extra });

    it('fails alone, naming it, while a task crash-loops, even one whose current run is ready', () => {
      const input = passingInput();
      input.baselineTasks = [task('web-0-g1', 'ready'), task('web-1-g1', 'ready', { crashLooping: true, restarts: 6 })];
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.baseline, /task web-1-g1 on rt-a is crash-looping \(restarted 6 time\(s\)\), ready/, /none crash-looping/);
    });

    it('fails naming every task not ready: restarting, starting, absent', () => {
      const input = passingInput();
      input.baselineTasks = [task('web-0-g1', 'restarting', { restarts: 1 }), task('web-1-g1', 'ready'), task('web-2-g1', 'absent')];
      const detail = row(evaluateScaleOutGates(input), GATE.baseline).detail;
      expect(detail).toContain('task web-0-g1 on rt-a is restarting, not ready (restarted 1 time(s))');
      expect(detail).toContain('task web-2-g1 on rt-a is absent, not ready');
      expect(detail).not.toContain('web-1-g1');
    });

    it('names what the evidence says of a task not ready too: not measured, its agent did not answer', () => {
      const input = passingInput();
      input.baselineTasks = [task('web-0-g1', 'absent')];
      input.baseline = { ok: false, detail: 'baseline not healthy: 1 of 1 task(s) not ready or not measured: web-0-g1 on rt-a not measured: its agent did not answer' };
      const detail = row(evaluateScaleOutGates(input), GATE.baseline).detail;
      expect(detail).toContain('task web-0-g1 on rt-a is absent, not ready');
      expect(detail).toContain('web-0-g1 on rt-a not measured: its agent did not answer');
    });

    it('passes tasks that are all ready and not crash-looping, restarted or not', () => {
      expect(unreadyBaselineTasks([task('web-0-g1', 'ready', { restarts: 3 }), task('web-1-g1', 'ready', { crashLooping: false })])).toEqual([]);
      const input = passingInput();
      input.baselineTasks = [task('web-0-g1', 'ready', { restarts: 3 })];
      expect(evaluateScaleOutGates(input).passed).toBe(true);
    });
  });

  describe('input ownership', () => {
    it('fails alone when ownership is unknown and names the broker/connector contract', () => {
      const report = evaluateScaleOutGates(withContract({ ownership: 'unknown', partitions: undefined, ordering: 'none' }));
      expectOnlyFailure(
        report,
        GATE.inputOwnership,
        /^input ownership unknown: need the broker\/connector contract for partition or record assignment$/,
        /broker\/connector contract/,
      );
    });

    it('fails alone when the target is above the partition count', () => {
      const input = withContract({ partitions: 4 });
      input.workload = { ...input.workload, spec: { partitions: 4, source: 'orders_in', sink: 'orders_out', workMs: 1 } } as ScaleOutGateInput['workload'];
      input.currentReplicas = 4;
      input.targetReplicas = 6;
      const report = evaluateScaleOutGates(input);
      expectOnlyFailure(
        report,
        GATE.inputOwnership,
        /^target 6 above 4 partitions would leave replicas idle or competing$/,
        /partitions/,
      );
    });

    it('accepts a target equal to the partition count', () => {
      const input = withContract({ partitions: 4 });
      input.workload = { ...input.workload, spec: { partitions: 4, source: 'orders_in', sink: 'orders_out', workMs: 1 } } as ScaleOutGateInput['workload'];
      expect(evaluateScaleOutGates(input).passed).toBe(true);
    });

    it('fails alone when the contract and the consumer spec disagree on partitions', () => {
      const report = evaluateScaleOutGates(withContract({ partitions: 16 }));
      expectOnlyFailure(report, GATE.inputOwnership, /contract declares 16 partitions but the consumer spec reads 8/, /partition count/);
    });

    describe('a Kafka source: the broker\'s partition count, not a declaration, decides', () => {
      // declared 3 partitions (contract and spec), from 2 replicas to `target` (4 fits the capacity)
      const kafkaInput = (brokerPartitions: number | null, target: number) => {
        const input = withContract({ partitions: 3 });
        input.workload = { ...input.workload, spec: { partitions: 3, source: { kafka: { topic: 'orders' } }, sink: 'orders_out', workMs: 1 } } as ScaleOutGateInput['workload'];
        input.currentReplicas = 2;
        input.targetReplicas = target;
        input.broker = brokerPartitions === null ? { topic: 'orders', error: 'connect ECONNREFUSED 127.0.0.1:9092' } : { topic: 'orders', partitions: brokerPartitions };
        return input;
      };
      it('passes a target within the broker\'s partitions', () => {
        expect(evaluateScaleOutGates(kafkaInput(3, 3)).passed).toBe(true);
      });
      it('refuses a target past them, naming the broker\'s figure', () => {
        expectOnlyFailure(evaluateScaleOutGates(kafkaInput(3, 4)), GATE.inputOwnership, /^target 4 above the 3 partitions kafka topic orders has on the broker/, /more partitions of topic orders/);
      });
      it('refuses a declaration the broker disagrees with', () => {
        expectOnlyFailure(evaluateScaleOutGates(kafkaInput(4, 3)), GATE.inputOwnership, /kafka topic orders has 4 partitions on the broker; the contract declares 3/, /the broker's/);
      });
      it('refuses with broker-unavailable when the broker cannot be read', () => {
        expectOnlyFailure(evaluateScaleOutGates(kafkaInput(null, 3)), GATE.inputOwnership, /^broker-unavailable: .*ECONNREFUSED/, /partition count/);
      });
    });

    it('accepts a shared queue', () => {
      const report = evaluateScaleOutGates(withContract({ ownership: 'shared-queue', partitions: undefined, ordering: 'none' }));
      expect(report.passed).toBe(true);
    });

    it('accepts ownership "none" for a stateless service', () => {
      const input = withContract({ ownership: 'none', partitions: undefined, state: 'none', ordering: 'none' });
      input.workload = { name: 'web', kind: 'service', contract: input.workload.contract, spec: { command: ['node', 'server.js'], env: {}, graceMs: 5000 } };
      expect(evaluateScaleOutGates(input).passed).toBe(true);
    });

    it('fails alone for ownership "none" on a service with shared state', () => {
      const input = withContract({ ownership: 'none', partitions: undefined, state: 'shared', ordering: 'none' });
      input.workload = { name: 'web', kind: 'service', contract: input.workload.contract, spec: { command: ['node', 'server.js'], env: {}, graceMs: 5000 } };
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.inputOwnership, /only safe for a stateless service/, /broker\/connector contract/);
    });

    it('fails alone for ownership "none" on a stateless consumer (it still reads an input)', () => {
      const report = evaluateScaleOutGates(withContract({ ownership: 'none', partitions: undefined, state: 'none', ordering: 'none' }));
      expectOnlyFailure(report, GATE.inputOwnership, /consumer/, /broker\/connector contract/);
    });
  });

  describe('state', () => {
    it('fails alone when state is unknown', () => {
      expectOnlyFailure(evaluateScaleOutGates(withContract({ state: 'unknown' })), GATE.state, /unknown/, /checkpoint location/);
    });

    it('fails alone for local state on a replica increase', () => {
      expectOnlyFailure(
        evaluateScaleOutGates(withContract({ state: 'local' })),
        GATE.state,
        /^local state cannot be split across replicas$/,
        /shared\/durable storage/,
      );
    });

    it.each(['none', 'shared', 'checkpointed'] as const)('passes for %s state', (state) => {
      expect(evaluateScaleOutGates(withContract({ state })).passed).toBe(true);
    });
  });

  describe('ordering', () => {
    it('fails alone when ordering is unknown', () => {
      expectOnlyFailure(evaluateScaleOutGates(withContract({ ordering: 'unknown' })), GATE.ordering, /unknown/, /ordering scope/);
    });

    it('fails alone for global ordering with more than one replica', () => {
      expectOnlyFailure(evaluateScaleOutGates(withContract({ ordering: 'global' })), GATE.ordering, /global ordering allows a single replica; target is 4/, /narrower ordering scope/);
    });

    it.each(['per-key', 'per-partition'] as const)('fails alone for %s ordering without partitioned ownership', (ordering) => {
      const report = evaluateScaleOutGates(withContract({ ordering, ownership: 'shared-queue', partitions: undefined }));
      expectOnlyFailure(report, GATE.ordering, new RegExp(`${ordering} ordering needs partitioned ownership, but ownership is "shared-queue"`), /partitioned input contract/);
    });

    it.each(['per-key', 'per-partition', 'none'] as const)('passes %s ordering with partitioned ownership', (ordering) => {
      expect(evaluateScaleOutGates(withContract({ ordering })).passed).toBe(true);
    });
  });

  describe('delivery and recovery', () => {
    it('fails alone when delivery is unknown', () => {
      expectOnlyFailure(evaluateScaleOutGates(withContract({ delivery: 'unknown' })), GATE.delivery, /unknown/, /ack, retry, duplicate and loss/);
    });

    it('records which delivery semantics passed', () => {
      const report = evaluateScaleOutGates(withContract({ delivery: 'exactly-once' }));
      expect(report.passed).toBe(true);
      expect(row(report, GATE.delivery).detail).toMatch(/^exactly-once/);
    });

    it('fails alone when recovery is unknown', () => {
      expectOnlyFailure(evaluateScaleOutGates(withContract({ recovery: 'unknown' })), GATE.recovery, /unknown/, /restart, reassignment and scale-in\/drain/);
    });
  });

  describe('capacity', () => {
    it('fails alone when too few runtimes not hosting the consumer have a free slot', () => {
      const input = passingInput();
      // rt-d now hosts it: only rt-c can take a new task, the increase needs two
      input.capacity = capacityOf(ELIGIBLE.map((r) => (r.id === 'rt-d' ? { ...r, alreadyHostsWorkload: true } : r)));
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.capacity, /needs 2 new replica\(s\); 1 eligible runtime/, /1 more fresh READY runtime/);
    });

    it('counts free slots, including on hosting runtimes, for a stream job', () => {
      const input = passingInput();
      input.workload = {
        name: 'clicks',
        kind: 'stream',
        contract: { ...passingContract },
        spec: { source: 'clicks', sink: 'click_counts', partitions: 8, checkpointIntervalMs: 1000, maxParallelism: 128, operators: [{ id: 'src', kind: 'source', parallelism: 2 }] },
      };
      // only hosting runtimes have room: 2 + 1 free slots for 2 new subtasks
      input.capacity = capacityOf([
        { id: 'rt-a', freeSlots: 2, alreadyHostsWorkload: true },
        { id: 'rt-b', freeSlots: 1, alreadyHostsWorkload: true },
      ]);
      const report = evaluateScaleOutGates(input);
      expect(report.passed).toBe(true);
      expect(row(report, GATE.capacity).detail).toBe('needs 2 new replica(s); 3 free slots');

      input.targetReplicas = 6; // 4 new subtasks, 3 slots
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.capacity, /needs 4 new replica\(s\); 3 free slots/, /1 more/);
    });
  });

  describe('the room counted', () => {
    it('counts runtimes with a free slot not hosting the workload, and every free slot', () => {
      expect(capacityOf(ELIGIBLE)).toEqual({ runtimesWithRoom: 2, freeSlots: 8 });
      expect(capacityOf([])).toEqual({ runtimesWithRoom: 0, freeSlots: 0 });
    });

    it('takes from each runtime\'s slots the other workloads\' replicas and the workload\'s own, however many', () => {
      const rows = roomOf([{ id: 'rt-a', slots: 4 }, { id: 'rt-b', slots: 2 }, { id: 'rt-c', slots: 1 }], { 'rt-a': 1, 'rt-b': 2 }, [{ runtimeId: 'rt-a' }, { runtimeId: 'rt-a' }, { runtimeId: 'rt-c' }]);
      expect(rows).toEqual([
        { id: 'rt-a', freeSlots: 1, alreadyHostsWorkload: true },
        { id: 'rt-b', freeSlots: 0, alreadyHostsWorkload: false },
        { id: 'rt-c', freeSlots: 0, alreadyHostsWorkload: true },
      ]);
      expect(capacityOf(rows)).toEqual({ runtimesWithRoom: 0, freeSlots: 1 });
    });

    it('prefers the plan\'s count, and will not judge facts with no room at all', () => {
      const probes = ['rt-c', 'rt-d'].map(okProbe);
      const planned = { runtimesWithRoom: 7, freeSlots: 9 };
      expect(capacityFrom({ capacity: capacityOf(ELIGIBLE), probes }, planned)).toEqual(planned);
      expect(capacityFrom({ probes }, planned)).toEqual(planned);
      expect(() => capacityFrom({ probes })).toThrow(/no plan that counted it/);
    });

    it('judges facts recorded as a row per runtime (before the count) as it judges the count', () => {
      const probes = ['rt-c', 'rt-d'].map(okProbe);
      expect(capacityFrom({ eligible: [...ELIGIBLE], probes })).toEqual(capacityFrom({ capacity: capacityOf(ELIGIBLE), probes }));
      const input = passingInput();
      const fromRows = evaluateScaleOutGates({ ...input, capacity: capacityFrom({ eligible: [...ELIGIBLE], probes }) });
      expect(fromRows).toEqual(evaluateScaleOutGates(input));
      expect(row(fromRows, GATE.capacity).detail).toBe('needs 2 new replica(s); 2 eligible runtimes with a free slot not already hosting it');
    });
  });

  describe('connectivity', () => {
    it('fails alone naming each runtime with a failing or missing probe', () => {
      const input = passingInput();
      input.probes = [
        okProbe('rt-a'),
        { runtimeId: 'rt-d', source: { ok: true }, destination: { ok: false, detail: 'sink refused credentials' } },
      ];
      const report = evaluateScaleOutGates(input);
      expectOnlyFailure(
        report,
        GATE.connectivity,
        /^rt-c: no probe result; rt-d: destination unreachable \(sink refused credentials\)$/,
        /rt-c, rt-d/,
      );
    });

    it('fails when any of several probes of one runtime fails', () => {
      const input = passingInput();
      input.probes.push({ runtimeId: 'rt-c', source: { ok: false }, destination: { ok: true } });
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.connectivity, /^rt-c: source unreachable$/, /rt-c/);
    });

    it('names the runtime that cannot reach a required endpoint, and the endpoint', () => {
      const input = passingInput();
      const reached = (endpoint: string) => ({ endpoint, ok: true, detail: 'connected' });
      input.probes = [
        { ...okProbe('rt-c'), requirements: [reached('tcp db.internal:5432'), reached('http https://api.example/healthz')] },
        { ...okProbe('rt-d'), requirements: [reached('tcp db.internal:5432'), { endpoint: 'http https://api.example/healthz', ok: false, detail: 'ECONNREFUSED' }] },
      ];
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.connectivity, /^rt-d: cannot reach required http https:\/\/api\.example\/healthz \(ECONNREFUSED\)$/, /rt-d$/);
      input.probes[1].requirements![1] = reached('http https://api.example/healthz');
      expect(row(evaluateScaleOutGates(input), GATE.connectivity)).toMatchObject({ passed: true, detail: 'sources, destinations and 2 required endpoint(s) reachable from rt-c, rt-d' });
    });

    it('checks only the planned recipients when they are given', () => {
      const input = passingInput();
      input.probes = [okProbe('rt-d')];
      input.recipientRuntimeIds = ['rt-d'];
      expect(evaluateScaleOutGates(input).passed).toBe(true);
      input.recipientRuntimeIds = ['rt-c', 'rt-d'];
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.connectivity, /rt-c: no probe result/, /rt-c$/);
    });

    it('is unproven (and fails) when no runtime could receive a replica', () => {
      const input = passingInput();
      input.capacity = capacityOf([]);
      input.recipientRuntimeIds = [];
      const report = evaluateScaleOutGates(input);
      expect(failedGates(report)).toEqual(['capacity', 'connectivity']);
    });
  });

  describe('downstream', () => {
    it('fails alone when the target is above downstream maxReplicas', () => {
      expectOnlyFailure(
        evaluateScaleOutGates(withContract({ downstream: { maxReplicas: 3 } })),
        GATE.downstream,
        /target 4 above downstream maxReplicas 3/,
        /downstream capacity/,
      );
    });

    it('fails alone when the expected rate is above downstream maxRatePerSec', () => {
      const input = passingInput();
      input.expectedRatePerSec = 6000;
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.downstream, /expected 6000\/s at 4 above downstream maxRatePerSec 5000/, /downstream capacity/);
    });

    it('refuses maxRatePerSec with no rate to compare with as unknown, naming what would close it', () => {
      const input = passingInput();
      delete input.expectedRatePerSec;
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.downstream, /maxRatePerSec 5000 declared, but no rate is known to compare with/, /a measured rate .*accept: \["downstream"\]/);
    });

    it('refuses an undeclared downstream as unknown, saying what to declare', () => {
      expectOnlyFailure(
        evaluateScaleOutGates(withContract({ downstream: undefined })),
        GATE.downstream,
        /^downstream unknown: the contract does not say what the output lands on$/,
        /contract\.downstream: its limits .* or "none" when nothing downstream can be overloaded, or accept the unknown for this request: accept: \["downstream"\]/,
      );
    });

    it('passes "none", a declaration that nothing downstream can be overloaded', () => {
      const report = evaluateScaleOutGates(withContract({ downstream: 'none' }));
      expect(report.passed).toBe(true);
      expect(row(report, GATE.downstream).detail).toBe('declared: no downstream to overload');
    });

    it('passes an unknown the request accepts, and says so in the row (the ledger keeps the rows)', () => {
      const input = withContract({ downstream: undefined });
      input.accepted = ['downstream'];
      const report = evaluateScaleOutGates(input);
      expect(report.passed).toBe(true);
      expect(row(report, GATE.downstream).detail).toMatch(/^downstream unknown: .*; accepted by the request \(accept: \["downstream"\]\)$/);
      const unmeasured = passingInput();
      delete unmeasured.expectedRatePerSec;
      unmeasured.accepted = ['downstream'];
      expect(row(evaluateScaleOutGates(unmeasured), GATE.downstream)).toMatchObject({ passed: true, detail: expect.stringMatching(/no rate is known.*accepted by the request/) });
    });

    it('a known rate within the limit passes, naming both figures; accept never passes a known excess', () => {
      const input = passingInput();
      input.expectedRatePerSec = 4000.25;
      expect(row(evaluateScaleOutGates(input), GATE.downstream).detail).toBe('target 4 ≤ downstream maxReplicas 10; expected 4000.3/s at 4 ≤ downstream maxRatePerSec 5000');
      input.expectedRatePerSec = 6000;
      input.accepted = ['downstream'];
      expectOnlyFailure(evaluateScaleOutGates(input), GATE.downstream, /expected 6000\/s at 4 above downstream maxRatePerSec 5000/, /downstream capacity/);
    });

    it('runs recorded before unknowns were refused are judged as then: an unknown passed', () => {
      const input = withContract({ downstream: undefined });
      input.unknownDownstreamPasses = true;
      expect(row(evaluateScaleOutGates(input), GATE.downstream)).toMatchObject({ passed: true, detail: 'no downstream limit declared' });
      const unmeasured = passingInput();
      delete unmeasured.expectedRatePerSec;
      unmeasured.unknownDownstreamPasses = true;
      expect(row(evaluateScaleOutGates(unmeasured), GATE.downstream).detail).toMatch(/maxRatePerSec 5000 declared; not checked without an expected rate/);
    });
  });

  it('reports every failed row at once', () => {
    const input = withContract({ state: 'local', delivery: 'unknown', downstream: { maxReplicas: 2 } });
    input.baseline = { ok: false };
    input.probes = [];
    const report = evaluateScaleOutGates(input);
    expect(failedGates(report)).toEqual(['baseline', 'state', 'delivery', 'connectivity', 'downstream']);
    expect(formatEvidenceGap(report).split('\n').map((line) => line.split(':')[0])).toEqual([
      'baseline',
      'state',
      'delivery',
      'connectivity',
      'downstream',
    ]);
  });
});

describe('expectedRateAt: what the downstream should expect after a scale-out', () => {
  const measured = { atMs: 0, tasks: [], ready: 2, processed: 900, ratePerSec: 300, latencyP50Ms: null, latencyP95Ms: null, backlog: 0, errors: 0 };
  it('grows the measured rate with the replicas (the most the new ones can add)', () => {
    expect(expectedRateAt('consumer', measured, 2, 5)).toBe(750);
    expect(expectedRateAt('stream', measured, 3, 3)).toBe(300);
  });
  it('is unknown for a service (it counts no records) and from no replica', () => {
    expect(expectedRateAt('service', measured, 2, 4)).toBeUndefined();
    expect(expectedRateAt('consumer', measured, 0, 2)).toBeUndefined();
  });
});

describe('smallestIncrease', () => {
  it('is the replicas added, never negative', () => {
    expect(smallestIncrease(2, 5)).toBe(3);
    expect(smallestIncrease(5, 5)).toBe(0);
    expect(smallestIncrease(5, 3)).toBe(0);
  });
});
