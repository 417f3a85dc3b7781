// Kubernetes as a runtime (issue 37), on a real control plane: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler 1.36.1, two kwok nodes (zone a and b). The stack's
// worker reaches the cluster through SCALEGATE_KUBECONFIG; the fixture test/fixtures/kube-drain.js
// plays the pods' app (load reports, drain acknowledgements).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { stopChild } from '../../embedded/processes';
import { CLUSTER, PROXIED, startApiProxy, startKubernetes, type ApiProxy, type KubernetesControlPlane } from '../support/kubernetes';
import { openBrowser } from '../support/browser';
import { runCli, temporalCancel } from '../support/cli';
import { ensureTopic } from '../../store/kafka-feed';
import { kafkaClient, readConsumerGroup } from '../../lib/kafka';
import { testEnv } from '../../harness/env';
import { startStack, type Stack } from '../../harness/stack';
import { failedGates, scaleAndWait } from '../../harness/workloads';

let kube: KubernetesControlPlane;
let proxy: ApiProxy;
let stack: Stack;
const fixtures: ChildProcess[] = [];

const CONTRACT = { ownership: 'none', state: 'none', ordering: 'none', delivery: 'at-least-once', recovery: 'restart', downstream: 'none' };
const MARKS = ['scalegate.dev/drain-requested', 'scalegate.dev/drained', 'controller.kubernetes.io/pod-deletion-cost'];

beforeAll(async () => {
  kube = await startKubernetes();
  proxy = await startApiProxy(kube);
  stack = await startStack({ agents: [], env: { SCALEGATE_KUBECONFIG: proxy.kubeconfig } });
});
afterAll(async () => {
  await Promise.all(fixtures.map((child) => stopChild(child, 2_000)));
  await stack?.stop();
  await proxy?.stop();
  await kube?.stop();
});

const deployments = '/apis/apps/v1/namespaces/default/deployments';
async function createDeployment(name: string, replicas: number, cpu: string): Promise<void> {
  await kube.client.request('POST', deployments, {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name },
    spec: {
      replicas, selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
          containers: [{ name: 'app', image: 'fake/app:1', resources: { requests: { cpu, memory: '64Mi' } } }],
        },
      },
    },
  });
  await waitForPods(name, replicas);
}
const podsOf = async (app: string): Promise<any[]> =>
  (await kube.client.request('GET', `/api/v1/namespaces/default/pods?labelSelector=app%3D${app}`)).items;
const readyPods = async (app: string) => (await podsOf(app)).filter((p) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'));
const waitForPods = (app: string, count: number) => stack.waitFor(`${count} Ready pod(s) of ${app}`, async () => {
  const pods = await podsOf(app);
  return pods.length === count && (await readyPods(app)).length === count;
});
const names = (pods: any[]) => pods.map((p) => p.metadata.name as string).sort();

/** The fixture app for the pods of `app`: acknowledges drains after `delayMs`, or never; with `kafka`, as each pod's consumer group member leaving the group. */
function startFixture(app: string, ack: { delayMs: number } | 'never', kafka?: { brokers: string; topic: string; group: string }): ChildProcess {
  const child = spawn(process.execPath, [
    path.join(__dirname, '../fixtures/kube-drain.js'), '--server', kube.server, '--token', 'scalegate-test-admin-token',
    '--namespace', 'default', '--selector', `app=${app}`, ...(ack === 'never' ? ['--never'] : ['--delay-ms', String(ack.delayMs)]),
    ...(kafka ? ['--kafka', kafka.brokers, '--topic', kafka.topic, '--group', kafka.group] : []),
  ], { stdio: 'ignore' });
  fixtures.push(child);
  return child;
}

async function defineKubernetesWorkload(name: string, replicas: number, kind: 'Deployment' | 'StatefulSet' = 'Deployment', cluster = CLUSTER, spec?: Record<string, unknown>): Promise<void> {
  const response = await stack.api('PUT', `/v1/workloads/${name}`, {
    body: { kind: 'service', replicas, contract: CONTRACT, runtime: { kubernetes: { cluster, namespace: 'default', kind, name } }, ...(spec ? { spec } : {}) },
  });
  expect(response.status).toBe(201);
}

describe('a Deployment through the gates', () => {
  it('scales 2 → 5 → 2: the gates read the nodes, the scale-in marks 3 victims, waits for their acknowledgements, and the ReplicaSet controller deletes exactly them', async () => {
    await createDeployment('web', 2, '250m');
    await defineKubernetesWorkload('web', 2);
    startFixture('web', { delayMs: 200 });

    const out = await scaleAndWait(stack, 'web', { replicas: 5, soakMs: 0 }, 'scaleOut');
    expect(out).toMatchObject({ status: 'completed', kubernetes: { object: `Deployment default/web on ${CLUSTER}` } });
    const capacity = out.gates.rows.find((row: any) => row.gate === 'capacity');
    expect(capacity).toMatchObject({ passed: true });
    expect(capacity.detail).toMatch(/3 new pod\(s\) of 250m CPU, 64Mi memory: room for \d+ on 2 Ready node\(s\)/);
    expect(out.evidence.comparison).toMatchObject({ verdict: 'pass' });
    await waitForPods('web', 5);

    // Three pods say they went idle; the two others keep work in flight (the fixture reported 1).
    await stack.waitFor('every pod reported its load', async () => (await podsOf('web')).every((p) => p.metadata.annotations?.['scalegate.dev/in-flight'] === '1'));
    const before = names(await podsOf('web'));
    const idle = [before[0], before[2], before[4]];
    for (const pod of idle) {
      await kube.client.request('PATCH', `/api/v1/namespaces/default/pods/${pod}`, { metadata: { annotations: { 'scalegate.dev/in-flight': '0' } } }, 'application/merge-patch+json');
    }

    const back = await scaleAndWait(stack, 'web', { replicas: 2, drainTimeoutMs: 30_000 }, 'scaleIn');
    expect(back).toMatchObject({ status: 'completed', evidenceGap: null });
    expect([...back.kubernetes.victims].sort()).toEqual(idle);
    expect([...back.kubernetes.acknowledged].sort()).toEqual(idle);
    expect(back.kubernetes.missing).toEqual([]);
    expect(back.kubernetes.deleted).toEqual(idle);
    for (const pod of idle) expect(back.kubernetes.reasons[pod]).toBe('idle: nothing in flight');
    const after = await podsOf('web');
    expect(names(after)).toEqual(before.filter((name) => !idle.includes(name)));
    const deployment = await kube.client.request('GET', `${deployments}/web`);
    expect(deployment.spec.replicas).toBe(2);

    // the CLI shows it like any other operation, naming the object
    const shown = await runCli(stack, ['operations', 'show', 'scale:web']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^deleted:\\s+${idle.join(', ')}$`, 'm'));
    expect(shown.stdout).toMatch(/^object:\s+Deployment default\/web on scalegate-test$/m);

    // the Web UI's details line names the object and the outcome
    const metadata = await stack.temporal.workflow.getHandle('scale:web').query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/^scale web \(Deployment default\/web on scalegate-test\) 5 → 2: \*\*completed\*\*/);

    // the desired state and the ledger follow
    expect((await stack.api('GET', '/v1/workloads/web', { role: 'viewer' })).body.replicas).toBe(2);
    const ledger = (await stack.api('GET', '/v1/ledger?workload=web', { role: 'viewer' })).body;
    const rows = ledger.events as any[];
    expect(rows.map((row) => [row.kind, row.outcome, row.fromReplicas, row.toReplicas])).toEqual(
      expect.arrayContaining([['scale-out', 'completed', 2, 5], ['scale-in', 'completed', 5, 2]]),
    );
  });

  it('the Web UI shows it like any other operation: its summary, details and activities name the object', async () => {
    const uiUrl = testEnv().temporalUiUrl;
    if (!uiUrl) throw new Error('the shared Temporal dev server was started without its Web UI (test/support/global-setup.ts)');
    const { runId } = await stack.temporal.workflow.getHandle('scale:web').describe();
    const url = `${uiUrl}/namespaces/default/workflows/${encodeURIComponent('scale:web')}/${runId}`;
    const ui = await openBrowser();
    try {
      // The summary the API gave the run and the details line the workflow keeps both name it.
      const summary = `scale web (Deployment default/web on ${CLUSTER}) 5 → 2`;
      const page = await ui.openUntil(`${url}/user-metadata`, [`${summary}\n`, `${summary}: completed`], 'web-ui-kubernetes-details.png');
      expect(page.split(summary).length - 1).toBeGreaterThanOrEqual(2);
      await ui.openUntil(`${url}/history`, [
        'scaleIn', 'kubernetesMarkVictims', 'kubernetesAwaitDrained',
        new RegExp(`kubernetesScale\\s*•\\s*scale web to 2 at resourceVersion \\d+ \\(Deployment default/web on ${CLUSTER}\\)`),
      ], 'web-ui-kubernetes-history.png');
    } finally {
      await ui.close();
    }
  });

  it('a Deployment whose pods are a Kafka consumer group: each victim\'s drain is acknowledged by its member leaving the group (read from the broker), then exactly the victims are deleted; a scale-out converges with the group and judges it', async () => {
    const brokers = testEnv().kafkaBrokers;
    if (!brokers) throw new Error(`the shared Kafka broker is not running: ${testEnv().kafkaOff}`);
    const kafka = { brokers, topic: 'k8s-payments', group: 'k8s-payments' };
    const admin = kafkaClient(brokers).admin();
    await admin.connect();
    try {
      await ensureTopic(admin, kafka.topic, 4);
      await createDeployment('payments', 3, '100m');
      await defineKubernetesWorkload('payments', 3, 'Deployment', CLUSTER, { kafka: { topic: kafka.topic, group: kafka.group } });
      startFixture('payments', { delayMs: 300 }, kafka);
      const before = names(await podsOf('payments'));
      // every pod's member in the group, the group settled
      await stack.waitFor('3 members of k8s-payments, stable', async () => {
        const group = await readConsumerGroup(admin, kafka.group, kafka.topic);
        return group.state === 'Stable' && group.members.length === 3 && group.unassigned.length === 0;
      }, 60_000);

      const back = await scaleAndWait(stack, 'payments', { replicas: 1, drainTimeoutMs: 30_000 }, 'scaleIn');
      expect(back).toMatchObject({ status: 'completed' });
      const victims = [...back.kubernetes.victims].sort();
      expect(victims).toHaveLength(2);
      expect([...back.kubernetes.acknowledged].sort()).toEqual(victims);
      expect(back.kubernetes.deleted).toEqual(victims);
      const after = await podsOf('payments');
      expect(names(after)).toEqual(before.filter((name) => !victims.includes(name)));
      // No pod said it drained: the acknowledgements were the members leaving, read from the broker,
      // and the survivor owns every partition.
      for (const pod of after) expect(pod.metadata.annotations?.['scalegate.dev/drained']).toBeUndefined();
      const group = await readConsumerGroup(admin, kafka.group, kafka.topic);
      expect(group.members.map((m) => m.clientId)).toEqual(names(after));
      expect(group.members[0]!.partitions.length).toBe(4);

      // Out again: converged once the new pod's member joined, and the comparison judges the group.
      const out = await scaleAndWait(stack, 'payments', { replicas: 2, soakMs: 0 }, 'scaleOut');
      expect(out).toMatchObject({ status: 'completed' });
      const row = out.evidence.comparison.rows.find((r: { check: string }) => r.check === 'consumer group');
      expect(row).toMatchObject({ verdict: 'pass', detail: expect.stringMatching(/^consumer group k8s-payments on topic k8s-payments: 2 member\(s\), 2 owning partitions, all 4 assigned/) });
      expect((await readConsumerGroup(admin, kafka.group, kafka.topic)).members).toHaveLength(2);
    } finally {
      await admin.disconnect();
    }
  });

  it('judges the metrics its contract names, read from each pod through the API server\'s pod proxy: new pods serving errors take the scale-out back, naming the metric; figures held, it completes; a pod not answering refuses it before any change', async () => {
    await createDeployment('metered', 2, '100m');
    const response = await stack.api('PUT', '/v1/workloads/metered', {
      body: {
        kind: 'service', replicas: 2,
        contract: { ...CONTRACT, metrics: [{ name: 'app_errors_total', better: 'lower' }, { name: 'app_served_total', better: 'higher' }] },
        runtime: { kubernetes: { cluster: CLUSTER, namespace: 'default', kind: 'Deployment', name: 'metered', metrics: { port: 9102, windowMs: 1000 } } },
      },
    });
    expect(response.status).toBe(201);
    const original = names(await podsOf('metered'));
    // Each pod's counters grow from when it was first read, at its own rates: what its app serves.
    const firstRead = new Map<string, number>();
    let errorsPerSecond = (pod: string) => (original.includes(pod) ? 1 : 25);
    let answering = (_pod: string) => true;
    kube.pods.metricsOf = ({ name }) => {
      if (!answering(name)) return null;
      if (!firstRead.has(name)) firstRead.set(name, Date.now());
      const seconds = (Date.now() - firstRead.get(name)!) / 1000;
      return { app_errors_total: errorsPerSecond(name) * seconds, app_served_total: 100 * seconds };
    };

    // 2 → 4, the two new pods serving 25 errors a second where the old serve 1: taken back.
    const bad = await scaleAndWait(stack, 'metered', { replicas: 4, soakMs: 0 }, 'scaleOut');
    expect(bad).toMatchObject({ status: 'compensated' });
    const errorsRow = bad.evidence.comparison.rows.find((row: { check: string }) => row.check === 'metric app_errors_total');
    expect(errorsRow).toMatchObject({ verdict: 'regression', baseline: expect.closeTo(1, 0) });
    expect(errorsRow.after).toBeGreaterThan(10);
    expect(bad.evidence.comparison.rows.find((row: { check: string }) => row.check === 'metric app_served_total')).toMatchObject({ verdict: 'pass' });
    expect(bad.compensation.reason).toContain('metric app_errors_total');
    expect(bad.kubernetes.metrics.baseline.pods.map((p: { pod: string }) => p.pod)).toEqual(original);
    expect(bad.kubernetes.metrics.after.pods).toHaveLength(4);
    // read through the API server's proxy: it opened its tunnels to the pods' addresses
    expect(kube.pods.connects.length).toBeGreaterThanOrEqual(2);
    expect((await kube.client.request('GET', `${deployments}/metered`)).spec.replicas).toBe(2);
    await waitForPods('metered', 2);

    // The same scale with new pods that hold the old ones' figures: completed, each row judged.
    errorsPerSecond = () => 1;
    const good = await scaleAndWait(stack, 'metered', { replicas: 3, soakMs: 0 }, 'scaleOut');
    expect(good).toMatchObject({ status: 'completed' });
    expect(good.evidence.comparison.rows.filter((row: { check: string }) => row.check.startsWith('metric ')).map((row: { verdict: string }) => row.verdict)).toEqual(['pass', 'pass']);
    await waitForPods('metered', 3);

    // A pod that does not answer: the baseline cannot be read, so nothing after could be judged: refused, nothing written.
    const silent = names(await readyPods('metered'))[0];
    answering = (pod) => pod !== silent;
    const refused = await scaleAndWait(stack, 'metered', { replicas: 4, soakMs: 0 }, 'scaleOut');
    expect(refused).toMatchObject({ status: 'refused' });
    expect(refused.evidenceGap).toMatch(new RegExp(`^the metrics the contract names could not be read before the change: ${silent}: GET /api/v1/namespaces/default/pods/${silent}:9102/proxy/metrics on cluster ${CLUSTER}: 50[23] `));
    expect((await kube.client.request('GET', `${deployments}/metered`)).spec.replicas).toBe(3);
    kube.pods.metricsOf = () => null;
  });

  it('a cancel from the temporal CLI while the metrics are read: before the write it ends cancelled with the object untouched; after the write the size goes back', async () => {
    await createDeployment('measured', 2, '100m');
    const response = await stack.api('PUT', '/v1/workloads/measured', {
      body: {
        kind: 'service', replicas: 2, contract: { ...CONTRACT, metrics: [{ name: 'app_served_total', better: 'higher' }] },
        runtime: { kubernetes: { cluster: CLUSTER, namespace: 'default', kind: 'Deployment', name: 'measured', metrics: { port: 9102, windowMs: 3000 } } },
      },
    });
    expect(response.status).toBe(201);
    const started = Date.now();
    kube.pods.metricsOf = () => ({ app_served_total: (Date.now() - started) / 10 });
    const replicas = async () => (await kube.client.request('GET', `${deployments}/measured`)).spec.replicas as number;
    /** Starts 2 → 3, cancels it once `when` holds while kubernetesPodMetrics runs, and answers how it ended. */
    const cancelWhileReading = async (when: () => Promise<boolean>) => {
      const start = await stack.api('POST', '/v1/workloads/measured/scale', { body: { replicas: 3, soakMs: 0 } });
      expect(start.status).toBe(202);
      const handle = stack.temporal.workflow.getHandle(start.body.workflowId, start.body.runId);
      await stack.waitFor('kubernetesPodMetrics running', async () => {
        const pending = (await handle.describe()).raw.pendingActivities ?? [];
        return pending.some((a) => a.activityType?.name === 'kubernetesPodMetrics') && (await when());
      });
      temporalCancel(start.body.workflowId);
      await handle.result().catch(() => null);
      return (await stack.api('GET', `/v1/operations/${encodeURIComponent(start.body.workflowId)}?runId=${start.body.runId}`, { role: 'viewer' })).body;
    };

    const before = await cancelWhileReading(async () => (await replicas()) === 2);
    expect(before).toMatchObject({ status: 'cancelled' });
    expect(await replicas()).toBe(2);
    expect(names(await podsOf('measured'))).toHaveLength(2);

    const after = await cancelWhileReading(async () => (await replicas()) === 3);
    expect(after).toMatchObject({ status: 'compensated', compensation: { replicas: 2 } });
    expect(after.compensation.reason).toContain('cancellation requested through Temporal');
    expect(await replicas()).toBe(2);
    await waitForPods('measured', 2);
    const ledger = (await stack.db.query(`select outcome from ledger where workload = 'measured' and kind = 'scale-out' order by id`)).rows.map((r) => r.outcome);
    expect(ledger).toEqual(['cancelled', 'compensated']);
    kube.pods.metricsOf = () => null;
  });

  it('refuses a scale-in that would break the PodDisruptionBudget, naming it, and changes nothing', async () => {
    await createDeployment('guarded', 3, '100m');
    await kube.client.request('POST', '/apis/policy/v1/namespaces/default/poddisruptionbudgets', {
      apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name: 'guarded-budget' },
      spec: { minAvailable: 3, selector: { matchLabels: { app: 'guarded' } } },
    });
    await defineKubernetesWorkload('guarded', 3);
    const before = names(await podsOf('guarded'));

    const refused = await scaleAndWait(stack, 'guarded', { replicas: 2 }, 'scaleIn');
    expect(refused).toMatchObject({ status: 'refused' });
    expect(failedGates(refused)).toEqual(['disruption-budget']);
    expect(refused.evidenceGap).toContain('PodDisruptionBudget guarded-budget (minAvailable 3: at least 3 pod(s), 2 would be left)');
    const pods = await podsOf('guarded');
    expect(names(pods)).toEqual(before);
    for (const pod of pods) for (const mark of MARKS) expect(pod.metadata.annotations?.[mark]).toBeUndefined();
  });

  it('ends compensated when a victim never acknowledges its drain: every pod still there, no mark left', async () => {
    await createDeployment('stubborn', 3, '100m');
    await defineKubernetesWorkload('stubborn', 3);
    startFixture('stubborn', 'never');
    const before = names(await podsOf('stubborn'));

    const operation = await scaleAndWait(stack, 'stubborn', { replicas: 1, drainTimeoutMs: 1_500 }, 'scaleIn');
    expect(operation).toMatchObject({ status: 'compensated' });
    expect(operation.kubernetes.marked).toHaveLength(2);
    expect([...operation.kubernetes.missing].sort()).toEqual([...operation.kubernetes.victims].sort());
    expect([...operation.kubernetes.unmarked].sort()).toEqual([...operation.kubernetes.victims].sort());
    expect(operation.kubernetes.deleted).toEqual([]);
    expect(operation.compensation.reason).toContain('no drain acknowledgement by the deadline');
    const pods = await podsOf('stubborn');
    expect(names(pods)).toEqual(before);
    for (const pod of pods) for (const mark of MARKS) expect(pod.metadata.annotations?.[mark]).toBeUndefined();
    expect((await kube.client.request('GET', `${deployments}/stubborn`)).spec.replicas).toBe(3);
    expect((await stack.api('GET', '/v1/workloads/stubborn', { role: 'viewer' })).body.replicas).toBe(3);

    // The same request with force: lowered anyway, and the ledger says which pods were not drained.
    const forced = await scaleAndWait(stack, 'stubborn', { replicas: 1, drainTimeoutMs: 500, force: true }, 'scaleIn');
    expect(forced).toMatchObject({ status: 'completed' });
    expect(forced.kubernetes.forced).toEqual(forced.kubernetes.victims);
    expect(forced.kubernetes.deleted).toEqual([...forced.kubernetes.victims].sort());
    expect(names(await podsOf('stubborn'))).toEqual(before.filter((name) => !forced.kubernetes.victims.includes(name)));
    const row = (await stack.db.query(`select reason, inputs from ledger where workload = 'stubborn' and kind = 'scale-in' order by id desc limit 1`)).rows[0];
    expect(row.reason).toContain(`forced past 2 unacknowledged drain(s): ${forced.kubernetes.victims.join(', ')}`);
    expect(row.inputs.forced).toEqual(forced.kubernetes.victims);
  });

  it('refuses a scale past the nodes\' allocatable room, naming what is missing, and counts no NotReady node', async () => {
    await createDeployment('big', 1, '1');
    await defineKubernetesWorkload('big', 1);
    // a node no kubelet (nor kwok) heartbeats for: never Ready, with room it must not be counted for
    await kube.client.request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'silent-c', labels: { 'topology.kubernetes.io/zone': 'c' } } });
    await kube.client.request('PATCH', '/api/v1/nodes/silent-c/status', { status: { allocatable: { cpu: '64', memory: '64Gi', pods: '110' } } }, 'application/merge-patch+json');

    const refused = await scaleAndWait(stack, 'big', { replicas: 10 }, 'scaleOut');
    await kube.client.request('DELETE', '/api/v1/nodes/silent-c');
    expect(refused).toMatchObject({ status: 'refused' });
    expect(failedGates(refused)).toEqual(['capacity']);
    expect(refused.evidenceGap).toMatch(/9 new pod\(s\) of 1000m CPU, 64Mi memory: room for [0-3] on 2 Ready node\(s\); not counted: silent-c \(NotReady\): \d pod\(s\) without room; missing \d+m CPU/);
    expect((await kube.client.request('GET', `${deployments}/big`)).spec.replicas).toBe(1);
    expect(await podsOf('big')).toHaveLength(1);
    // the NotReady node is evidence, recorded once (a second operation's gates see the same episode)
    await kube.client.request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'silent-c' } }).catch(() => null);
    expect(await scaleAndWait(stack, 'big', { replicas: 10 }, 'scaleOut')).toMatchObject({ status: 'refused' });
    await kube.client.request('DELETE', '/api/v1/nodes/silent-c');
    const state = (await stack.api('GET', '/v1/state', { role: 'viewer' })).body;
    const recorded = (state.runtimeEvents as { type: string; subject: string; detail: Record<string, unknown> }[]).filter((e) => e.type === 'kubernetes.node-not-ready');
    expect(recorded).toEqual([expect.objectContaining({ subject: 'silent-c', detail: expect.objectContaining({ cluster: CLUSTER, since: null, seenBy: 'big' }) })]);
  });

  it('follows a tier\'s signals up and down through the same gates and drain', async () => {
    await createDeployment('tiered', 1, '100m');
    await defineKubernetesWorkload('tiered', 1);
    startFixture('tiered', { delayMs: 100 });
    const policy = {
      workloads: ['tiered'], minReplicas: 1, maxReplicas: 4, targets: { qpsPerInstance: 100 }, tolerance: 0.1,
      scaleUpStabilizationMs: 0, scaleDownStabilizationMs: 0, cooldownMs: 0, maxStep: 4, soakMs: 0, drainTimeoutMs: 30_000,
    };
    expect((await stack.api('PUT', '/v1/tiers/kube/policy', { body: policy })).status).toBeLessThan(300);
    const replicas = async () => (await kube.client.request('GET', `${deployments}/tiered`)).spec.replicas as number;
    const idle = async () => {
      const described = await stack.temporal.workflow.getHandle('scale:tiered').describe().catch(() => null);
      return described === null || described.status.name !== 'RUNNING';
    };

    expect((await stack.api('POST', '/v1/tiers/kube/signals', { body: { qps: 300 } })).status).toBe(202);
    await stack.waitFor('tiered at 3 replicas, idle', async () => (await replicas()) === 3 && (await idle()), 60_000);
    await waitForPods('tiered', 3);
    expect((await stack.api('POST', '/v1/tiers/kube/signals', { body: { qps: 100 } })).status).toBe(202);
    await stack.waitFor('tiered back at 1 replica, idle', async () => (await replicas()) === 1 && (await idle()), 60_000);
    await waitForPods('tiered', 1);

    const rows = (await stack.db.query(`select kind, outcome, from_replicas, to_replicas from ledger where workload = 'tiered' and kind in ('scale-out', 'scale-in') order by id`)).rows;
    expect(rows.map((r) => [r.kind, r.outcome, r.from_replicas, r.to_replicas])).toEqual([['scale-out', 'completed', 1, 3], ['scale-in', 'completed', 3, 1]]);
  });

  it('scales a StatefulSet in by its highest ordinals, each drained first', async () => {
    await kube.client.request('POST', '/apis/apps/v1/namespaces/default/statefulsets', {
      apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'db' },
      spec: {
        replicas: 2, serviceName: 'db', podManagementPolicy: 'Parallel', selector: { matchLabels: { app: 'db' } },
        template: {
          metadata: { labels: { app: 'db' } },
          spec: {
            tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
            containers: [{ name: 'db', image: 'fake/db:1', resources: { requests: { cpu: '100m', memory: '64Mi' } } }],
          },
        },
      },
    });
    await waitForPods('db', 2);
    await defineKubernetesWorkload('db', 2, 'StatefulSet');
    startFixture('db', { delayMs: 100 });

    expect(await scaleAndWait(stack, 'db', { replicas: 3, soakMs: 0 }, 'scaleOut')).toMatchObject({ status: 'completed', kubernetes: { object: `StatefulSet default/db on ${CLUSTER}` } });
    await waitForPods('db', 3);
    const back = await scaleAndWait(stack, 'db', { replicas: 1, drainTimeoutMs: 30_000 }, 'scaleIn');
    expect(back).toMatchObject({ status: 'completed', kubernetes: { victims: ['db-2', 'db-1'], acknowledged: ['db-2', 'db-1'], deleted: ['db-1', 'db-2'] } });
    expect(back.kubernetes.reasons['db-2']).toBe('ordinal 2: a StatefulSet removes its highest ordinals');
    expect(names(await podsOf('db'))).toEqual(['db-0']);
  });

  it('a scale write that meets a moved object (a real 409 from the API server) reads again: it writes on the new resourceVersion while the size it decided from holds, and is refused, naming the move, when it does not', async () => {
    await createDeployment('racy', 1, '100m');
    await defineKubernetesWorkload('racy', 1, 'Deployment', PROXIED);
    const scaleWrite = (request: { method: string; path: string }) => request.method === 'PUT' && request.path.startsWith(`${deployments}/racy/scale`);
    /** Once, just before the operation's scale write reaches the API server: `change` the Deployment first. */
    const beforeTheWrite = (change: () => Promise<unknown>) => {
      let done = false;
      proxy.beforeForward = async (request) => {
        if (done || !scaleWrite(request)) return;
        done = true;
        await change();
      };
    };
    // Another writer touches the object (an annotation: its resourceVersion moves, its size does not).
    beforeTheWrite(() => kube.client.request('PATCH', `${deployments}/racy`, { metadata: { annotations: { 'test/touched': 'yes' } } }, 'application/merge-patch+json'));
    const out = await scaleAndWait(stack, 'racy', { replicas: 2, soakMs: 0 }, 'scaleOut');
    expect(out).toMatchObject({ status: 'completed', kubernetes: { conflicts: 1 } });
    expect((await kube.client.request('GET', `${deployments}/racy`)).spec.replicas).toBe(2);
    await waitForPods('racy', 2);

    // Another writer resizes it (to 4) while this operation decided 2 → 3: refused, its size left as the other writer set it.
    beforeTheWrite(async () => {
      const scale = await kube.client.request('GET', `${deployments}/racy/scale`);
      await kube.client.request('PUT', `${deployments}/racy/scale`, { ...scale, spec: { replicas: 4 } });
    });
    const moved = await scaleAndWait(stack, 'racy', { replicas: 3, soakMs: 0 }, 'scaleOut');
    proxy.beforeForward = null;
    expect(moved).toMatchObject({ status: 'refused', kubernetes: { conflicts: 1 } });
    expect(moved.evidenceGap).toMatch(/Deployment default\/racy on scalegate-test-proxied moved while this operation decided: it now asks 4 replica\(s\), not 2/);
    expect((await kube.client.request('GET', `${deployments}/racy`)).spec.replicas).toBe(4);
  });

  it('a manual scale-out waits after its gates for an operator: approved, it writes the size; rejected, the object is untouched', async () => {
    await createDeployment('gated', 1, '100m');
    await defineKubernetesWorkload('gated', 1);
    const awaiting = async () => {
      const started = await stack.api('POST', '/v1/workloads/gated/scale', { body: { replicas: 3, approval: 'manual', soakMs: 0 } });
      expect(started).toMatchObject({ status: 202, body: { workflowId: 'scale:gated', kind: 'scaleOut' } });
      const view = await stack.waitFor('awaiting approval', async () => {
        const op = (await stack.api('GET', '/v1/operations/scale:gated', { role: 'viewer' })).body;
        return op.phase === 'awaiting-approval' ? op : null;
      });
      expect(view.gates).toMatchObject({ passed: true });
      expect((await kube.client.request('GET', `${deployments}/gated`)).spec.replicas).toBe(1);
      return started.body;
    };
    const first = await awaiting();
    // The reject Update, as `temporal workflow update execute --name reject` sends it
    await stack.temporal.workflow.getHandle('scale:gated', first.runId).executeUpdate('reject', { args: [{ by: 'kubernetes.test' }] });
    const ended = await stack.temporal.workflow.getHandle('scale:gated', first.runId).result() as { outcome: string };
    expect(ended.outcome).toBe('rejected');
    expect((await kube.client.request('GET', `${deployments}/gated`)).spec.replicas).toBe(1);

    const second = await awaiting();
    const approved = await runCli(stack, ['operations', 'approve', 'scale:gated']);
    expect(approved.code).toBe(0);
    const done = await stack.temporal.workflow.getHandle('scale:gated', second.runId).result() as { outcome: string; approval: unknown };
    expect(done).toMatchObject({ outcome: 'completed', approval: { mode: 'manual', decision: 'approved' } });
    expect((await kube.client.request('GET', `${deployments}/gated`)).spec.replicas).toBe(3);
    await waitForPods('gated', 3);
  });

  it('refuses a bad definition with 422, and fails a scale on a cluster the kubeconfig does not name, before any change', async () => {
    const bad = await stack.api('PUT', '/v1/workloads/daemons', {
      body: { kind: 'service', replicas: 2, contract: CONTRACT, runtime: { kubernetes: { cluster: CLUSTER, namespace: 'default', kind: 'DaemonSet', name: 'daemons' } } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: expect.any(String), message: expect.stringContaining('runtime.kubernetes.kind') });
    const withCommand = await stack.api('PUT', '/v1/workloads/daemons', {
      body: { kind: 'service', replicas: 2, contract: CONTRACT, spec: { command: ['node'] }, runtime: { kubernetes: { cluster: CLUSTER, namespace: 'default', kind: 'Deployment', name: 'web' } } },
    });
    expect(withCommand).toMatchObject({ status: 422, body: { message: expect.stringContaining('a Kubernetes workload runs its pod template: give no command or image') } });

    // metrics the contract names with nowhere to read them: refused, naming the field
    const unreadable = await stack.api('PUT', '/v1/workloads/daemons', {
      body: { kind: 'service', replicas: 2, contract: { ...CONTRACT, metrics: [{ name: 'app_errors_total', better: 'lower' }] }, runtime: { kubernetes: { cluster: CLUSTER, namespace: 'default', kind: 'Deployment', name: 'web' } } },
    });
    expect(unreadable).toMatchObject({ status: 422, body: { message: expect.stringContaining('contract.metrics are read from a Kubernetes workload\'s pods') } });

    const plan = await stack.api('POST', '/v1/workloads/web/plan', { body: { replicas: 4 } });
    expect(plan).toMatchObject({ status: 422, body: { error: 'unsupported-kind', message: expect.stringContaining('the cluster places its pods') } });

    const response = await stack.api('PUT', '/v1/workloads/elsewhere', {
      body: { kind: 'service', replicas: 2, contract: CONTRACT, runtime: { kubernetes: { cluster: 'nowhere', namespace: 'default', kind: 'Deployment', name: 'web' } } },
    });
    expect(response.status).toBe(201);
    const started = await stack.api('POST', '/v1/workloads/elsewhere/scale', { body: { replicas: 3 } });
    expect(started.status).toBe(202);
    await stack.temporal.workflow.getHandle(started.body.workflowId, started.body.runId).result().catch(() => null);
    const operation = (await stack.api('GET', `/v1/operations/${encodeURIComponent(started.body.workflowId)}`, { role: 'viewer' })).body;
    expect(operation).toMatchObject({ status: 'failed' });
    expect(operation.failure).toContain(`no Kubernetes cluster "nowhere" in ${proxy.kubeconfig}: its contexts are ${CLUSTER}, ${PROXIED}`);
    expect((await kube.client.request('GET', `${deployments}/web`)).spec.replicas).toBe(2);
  });
});
