// The Kubernetes runtime's pure rules (domain/kubernetes.ts) and its workload definition.
import { chooseKubernetesVictims, compareKubernetesPods, disruptionBudgetGate, drainAcknowledgements, kubernetesCapacityGate, parseQuantity, podSnapshot, type NodeFacts } from '../../domain/kubernetes';
import { WorkloadDefinitionSchema } from '../../protocol';

const node = (name: string, over: Partial<NodeFacts> = {}): NodeFacts => ({
  name, ready: true, unschedulable: false, labels: { zone: name.endsWith('a') ? 'a' : 'b' },
  allocatable: { cpuMilli: 2000, memoryBytes: 4 * 2 ** 30, pods: 110 }, requested: { cpuMilli: 0, memoryBytes: 0, pods: 0 }, ...over,
});
const requests = { cpuMilli: 500, memoryBytes: 64 * 2 ** 20 };

describe('quantities', () => {
  it('reads CPU and memory as Kubernetes writes them', () => {
    expect(parseQuantity('500m')).toBe(0.5);
    expect(parseQuantity('2')).toBe(2);
    expect(parseQuantity('128Mi')).toBe(128 * 2 ** 20);
    expect(parseQuantity('1G')).toBe(1e9);
    expect(() => parseQuantity('lots')).toThrow('not a Kubernetes quantity: "lots"');
  });
});

describe('the capacity gate', () => {
  it('counts the room on Ready nodes that match the node selector', () => {
    const row = kubernetesCapacityGate({ nodes: [node('n-a'), node('n-b')], nodeSelector: { zone: 'a' }, requests, current: 1, target: 5 });
    expect(row).toMatchObject({ gate: 'capacity', passed: true });
    expect(row.detail).toBe('4 new pod(s) of 500m CPU, 64Mi memory: room for 4 on 1 Ready node(s) matching {"zone":"a"}');
  });

  it('refuses past the room, naming what is missing, and names a NotReady node it did not count', () => {
    const row = kubernetesCapacityGate({
      nodes: [node('n-a', { requested: { cpuMilli: 1000, memoryBytes: 0, pods: 2 } }), node('n-b', { ready: false })], nodeSelector: {}, requests, current: 2, target: 6,
    });
    expect(row.passed).toBe(false);
    expect(row.detail).toBe('4 new pod(s) of 500m CPU, 64Mi memory: room for 2 on 1 Ready node(s); not counted: n-b (NotReady): 2 pod(s) without room; missing 1000m CPU');
  });
});

describe('the PodDisruptionBudget gate', () => {
  it('refuses a scale-in below minAvailable, naming the budget', () => {
    const row = disruptionBudgetGate({ budgets: [{ name: 'web-pdb', minAvailable: '60%', disruptionsAllowed: 2, expectedPods: 5 }], current: 5, target: 2 });
    expect(row).toMatchObject({ gate: 'disruption-budget', passed: false });
    expect(row.detail).toBe('scale-in 5 → 2 would break PodDisruptionBudget web-pdb (minAvailable 60%: at least 3 pod(s), 2 would be left)');
  });

  it('refuses more victims than maxUnavailable allows now, and passes within it', () => {
    const budgets = [{ name: 'web-pdb', maxUnavailable: 1, disruptionsAllowed: 1, expectedPods: 4 }];
    expect(disruptionBudgetGate({ budgets, current: 4, target: 2 }).detail).toContain('PodDisruptionBudget web-pdb (maxUnavailable 1: 1 disruption(s) allowed now, 2 pod(s) would go)');
    expect(disruptionBudgetGate({ budgets, current: 4, target: 3 })).toMatchObject({ passed: true, detail: '1 pod(s) go; web-pdb hold(s)' });
  });
});

describe('victims', () => {
  it('takes the not Ready, then the idle, then the least loaded, never the oldest; ties by name', () => {
    const pods = [
      { name: 'web-1', load: 4, ready: true }, { name: 'web-2', load: 0, ready: true }, { name: 'web-3', load: 1, ready: true },
      { name: 'web-4', load: 9, ready: false }, { name: 'web-5', load: null, ready: true }, { name: 'web-0', load: 0, ready: true },
    ];
    const choice = chooseKubernetesVictims({ pods, remove: 4, kind: 'Deployment' });
    expect(choice.victims).toEqual(['web-4', 'web-0', 'web-2', 'web-3']);
    expect(choice.reasons).toEqual({ 'web-4': 'not Ready', 'web-0': 'idle: nothing in flight', 'web-2': 'idle: nothing in flight', 'web-3': 'least loaded: 1 in flight' });
  });

  it('a StatefulSet loses its highest ordinals, its controller\'s rule', () => {
    const pods = [0, 1, 2, 3].map((ordinal) => ({ name: `db-${ordinal}`, load: ordinal === 3 ? 5 : 0, ready: true, ordinal }));
    expect(chooseKubernetesVictims({ pods, remove: 2, kind: 'StatefulSet' }).victims).toEqual(['db-3', 'db-2']);
  });
});

describe('drain acknowledgements', () => {
  const pods = [{ name: 'web-a', drained: true }, { name: 'web-b', drained: false }, { name: 'web-c', drained: false }];
  it('counts each victim that set its annotation, and says what is still awaited', () => {
    expect(drainAcknowledgements(['web-a', 'web-b'], pods, null)).toEqual({ acknowledged: ['web-a'], missing: ['web-b'], why: 'no scalegate.dev/drained on web-b' });
  });
  it('takes a declared consumer group without the victims, its partitions all owned, as every victim\'s acknowledgement', () => {
    expect(drainAcknowledgements(['web-b', 'web-c'], pods, { converged: true, detail: 'consumer group g: 1 member(s)' })).toMatchObject({ acknowledged: ['web-b', 'web-c'], missing: [] });
    expect(drainAcknowledgements(['web-b', 'web-c'], pods, { converged: false, detail: 'consumer group g on topic t: drained web-b still a member' }).why)
      .toBe('no scalegate.dev/drained on web-b, web-c; consumer group g on topic t: drained web-b still a member');
  });
});

describe('the comparison', () => {
  it('fails on a pod not Ready or one that restarted since the baseline', () => {
    const pod = (name: string, ready: boolean, restarts: number) => ({ name, node: 'n-a', uid: name, ready, restarts, load: 0 });
    const baseline = podSnapshot([pod('a', true, 0), pod('b', true, 1)], 0);
    expect(compareKubernetesPods(baseline, podSnapshot([pod('a', true, 0), pod('b', true, 1), pod('c', true, 0)], 1), 3).verdict).toBe('pass');
    const bad = compareKubernetesPods(baseline, podSnapshot([pod('a', true, 2), pod('b', true, 1), pod('c', false, 0)], 1), 3);
    expect(bad.reasons).toEqual(['pods ready: 2 of 3 pod(s) Ready', 'restarts: restarted since the baseline: a (0 → 2)']);
  });
  it('judges a declared consumer group after the change: a row that passes once it converged and fails naming why', () => {
    const pod = (name: string) => ({ name, node: 'n-a', uid: name, ready: true, restarts: 0, load: 0 });
    const baseline = podSnapshot([pod('a')], 0);
    const after = podSnapshot([pod('a'), pod('b')], 1);
    expect(compareKubernetesPods(baseline, after, 2).rows?.map((r) => r.check)).not.toContain('consumer group');
    const good = compareKubernetesPods(baseline, after, 2, { converged: true, detail: 'consumer group g on topic t: 2 member(s), 2 owning partitions, all 4 assigned; lag 0' });
    expect(good.rows?.find((r) => r.check === 'consumer group')).toMatchObject({ verdict: 'pass' });
    expect(good.verdict).toBe('pass');
    const bad = compareKubernetesPods(baseline, after, 2, { converged: false, detail: 'consumer group g on topic t: 1 member(s) for 2 replica(s) (state Stable)' });
    expect(bad.verdict).toBe('regression');
    expect(bad.reasons).toEqual(['consumer group: consumer group g on topic t: 1 member(s) for 2 replica(s) (state Stable)']);
  });
});

describe('a Kubernetes workload definition', () => {
  const runtime = { kubernetes: { cluster: 'prod', namespace: 'shop', kind: 'Deployment', name: 'web' } };
  it('names its object and needs no command', () => {
    const parsed = WorkloadDefinitionSchema.parse({ kind: 'service', replicas: 2, runtime });
    expect(parsed).toMatchObject({ kind: 'service', runtime });
  });
  it('is refused with a command, with "all", or with an unknown kind of object; a service without one still needs a command', () => {
    const issue = (body: unknown) => WorkloadDefinitionSchema.safeParse(body).error?.issues[0];
    expect(issue({ kind: 'service', replicas: 2, runtime, spec: { command: ['x'] } })).toMatchObject({ path: ['spec'], message: 'a Kubernetes workload runs its pod template: give no command or image' });
    expect(issue({ kind: 'service', replicas: 'all', runtime })).toMatchObject({ path: ['replicas'] });
    expect(issue({ kind: 'service', replicas: 2, runtime: { kubernetes: { ...runtime.kubernetes, kind: 'DaemonSet' } } })?.path).toEqual(['runtime', 'kubernetes', 'kind']);
    expect(issue({ kind: 'service', replicas: 2 })).toMatchObject({ path: ['spec', 'command'], message: 'a service runs a command or an image: give one' });
  });
});
