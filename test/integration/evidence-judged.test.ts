// Evidence is a judgment (DESIGN.md §3, issue 33 item 2), on the real stack: a scale-in whose drain
// is deliberately broken (SCALEGATE_TEST_BREAK=drain-skips-commit: the victim's last batch reaches
// the sink, its offset commit does not) fails its destination receipts row, naming the partition,
// and the operation ends `compensated` by the replan with that row in its reason. A task whose
// agent does not answer is `not measured` and the scale-out's baseline gate refuses, naming it.
import { runLoad } from '../../store/source-feed';
import { verifyExactlyOnce } from '../../store/sink-audit';
import { startStack, Stack } from '../../harness/stack';
import { defineWorkload, scaleAndWait, tasksOf } from '../../harness/workloads';

let stack: Stack;
const CONTRACT = { ownership: 'partitioned', state: 'none', ordering: 'per-partition', delivery: 'exactly-once', recovery: 'reassign', downstream: 'none' };
const consumer = (name: string, replicas: number, partitions: number, selector: Record<string, string>) => ({
  kind: 'consumer', replicas, contract: { ...CONTRACT, partitions }, selector,
  spec: { partitions, source: `${name}_in`, sink: `${name}_out`, workMs: 5 },
});

beforeAll(async () => {
  stack = await startStack({
    leaseTtlMs: 3000,
    agents: [
      // the broken build: every drain on these skips its commit
      ...['a', 'b', 'c'].map((zone) => ({ id: `broken-${zone}`, labels: { zone, build: 'broken' }, env: { SCALEGATE_TEST_BREAK: 'drain-skips-commit' } })),
      ...['a', 'b'].map((zone) => ({ id: `sound-${zone}`, labels: { zone, build: 'sound' } })),
    ],
  });
});
afterAll(async () => {
  await stack?.stop();
});

describe('a scale-in whose drain skipped its commit', () => {
  it('fails its receipts row, naming the partition, and ends compensated with that row named', async () => {
    await defineWorkload(stack, 'leaky', consumer('leaky', 3, 6, { build: 'broken' }), 3);
    const databaseUrl = stack.databaseUrl;
    // Records keep arriving through the drain, so the victim has a last batch to flush without its commit.
    // The load runs until the scale-in (and its compensation) has ended, then stops: nothing after it needs more records.
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'leaky_in', partitions: 6, ratePerSec: 300, count: 6000, signal: stopLoad.signal });
    await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: 'leaky_in', sink: 'leaky_out' })).sinkCount > 300);

    const operation = await scaleAndWait(stack, 'leaky', { replicas: 2, drainTimeoutMs: 30_000 }, 'scaleIn');
    stopLoad.abort();
    await load;
    // a scale-in that ended before its drain (refused by a gate on a loaded machine) says why
    if (!operation.scaleIn) throw new Error(`the scale-in never drained: ${JSON.stringify({ status: operation.status, phase: operation.phase, failure: operation.failure, compensation: operation.compensation, gates: operation.gates?.rows?.filter((r: { passed: boolean }) => !r.passed) })}`);
    const victims = operation.scaleIn.victims as { taskId: string; partitions: number[] }[];
    expect(victims).toHaveLength(1);
    const receipts = operation.evidence.comparison.rows.find((row: { check: string }) => row.check === 'destination receipts');
    // The victim's flushed batch is in the sink above its partition's committed offset.
    expect(receipts.verdict).toBe('regression');
    const named = [...String(receipts.detail).matchAll(/partition (\d+): \d+ sink row\(s\) above its committed offset/g)].map((m) => Number(m[1]));
    expect(named.length).toBeGreaterThan(0);
    expect(victims[0].partitions).toEqual(expect.arrayContaining(named));
    expect(operation.status).toBe('compensated');
    expect(operation.compensation.reason).toMatch(/^regression after scale-in: .*destination receipts do not balance: partition \d+: \d+ sink row\(s\) above its committed offset/);
    expect(operation.compensation.outcome).toMatchObject({ generation: expect.any(Number) });
    const ledger = (await stack.api('GET', '/v1/ledger?workload=leaky', { role: 'viewer' })).body.events;
    expect(ledger.map((e: any) => `${e.kind}:${e.outcome}`)).toEqual(expect.arrayContaining(['scale-in:compensated', 'replan:completed']));
  });
});

describe('a sound scale-in', () => {
  it('balances its receipts per partition and completes', async () => {
    await defineWorkload(stack, 'tight', consumer('tight', 2, 4, { build: 'sound' }), 2);
    const databaseUrl = stack.databaseUrl;
    // under load through the scale-in; stopped once it has ended
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'tight_in', partitions: 4, ratePerSec: 300, count: 3000, signal: stopLoad.signal });
    await stack.waitFor('load flowing', async () => (await verifyExactlyOnce({ databaseUrl, source: 'tight_in', sink: 'tight_out' })).sinkCount > 300);
    const operation = await scaleAndWait(stack, 'tight', { replicas: 1, drainTimeoutMs: 30_000 }, 'scaleIn');
    stopLoad.abort();
    await load;
    expect(operation.status).toBe('completed');
    const receipts = operation.evidence.comparison.rows.find((row: { check: string }) => row.check === 'destination receipts');
    expect(receipts).toMatchObject({ verdict: 'pass', detail: expect.stringMatching(/^every one of 4 partition\(s\) balances and is owned: over the window \d+ record\(s\) left the source/) });
  });
});

describe('a scale-in of a consumer that is behind (patch throughput-tested)', () => {
  it('processes half the records per second in its soak: the throughput row fails, naming its test, and the operation is compensated; every record reaches the sink once', async () => {
    // workMs 5 in batches of 100: about 200 records/s per replica, 400 for two, under 500 offered: behind and falling further behind while it is offered.
    // Behind from its first batch (every baseline sample at capacity): the records come before the
    // consumer, 300 at once and then 500/s until the scale-in's soak begins. Through the soak the one
    // replica left works off a backlog of 1,500 or more (over 7 s of its work, 5 s of it soaked), behind throughout.
    const databaseUrl = stack.databaseUrl;
    const burst = runLoad({ databaseUrl, source: 'behind_in', partitions: 4, ratePerSec: 50_000, count: 300 });
    const stopLoad = new AbortController();
    const load = runLoad({ databaseUrl, source: 'behind_in', partitions: 4, ratePerSec: 500, count: 20_000, signal: stopLoad.signal });
    await defineWorkload(stack, 'behind', consumer('behind', 2, 4, { build: 'sound' }), 2);
    // The baseline's throughput test needs its samples: 10 or more (5 s) from each task.
    await stack.waitFor('a backlog of 1,500 or more, and 5 s of throughput samples at capacity', async () => {
      const audit = await verifyExactlyOnce({ databaseUrl, source: 'behind_in', sink: 'behind_out' });
      const tasks = await tasksOf(stack, 'behind');
      return audit.sourceCount - audit.sinkCount >= 1_500 && tasks.length === 2
        && tasks.every((t) => (t.throughputSamples as [number, number][] ?? []).filter(([, records]) => records > 0).length >= 10);
    });
    const scaleIn = scaleAndWait(stack, 'behind', { replicas: 1, drainTimeoutMs: 30_000, soakMs: 5_000 }, 'scaleIn');
    let ended = false;
    scaleIn.then(() => { ended = true; }, () => { ended = true; });
    // The soak begins as the one replica left owns every partition (read from the agents: a GET of the
    // operation sent as the scale-in starts was seen to answer only once it had ended).
    await stack.waitFor('the reduced placement converged (or the scale-in ended)', async () => {
      if (ended) return true;
      const running = (await tasksOf(stack, 'behind')).filter((t) => t.state !== 'stopped');
      return running.length === 1 && running[0].partitions?.length === 4;
    });
    stopLoad.abort();
    const written = (await burst).written + (await load).written;
    const operation = await scaleIn;
    const throughput = operation.evidence?.comparison?.rows.find((row: { check: string }) => row.check === 'throughput');
    // a scale-in that never compared (refused on a loaded machine) says where it ended
    if (!throughput) throw new Error(`no throughput row: ${JSON.stringify({ status: operation.status, failure: operation.failure, rows: operation.evidence?.comparison?.rows })}`);
    expect(throughput).toMatchObject({ verdict: 'regression', detail: expect.stringMatching(/records\/s; worse beyond the margin: Mann-Whitney U = [\d.]+, p = [\d.e-]+ for after < baseline × 0.9/) });
    expect(throughput.after).toBeLessThan(throughput.baseline * 0.75);
    expect(operation.status).toBe('compensated');
    expect(operation.compensation.reason).toMatch(/^regression after scale-in: .*throughput worse beyond the margin/);
    const audit = await stack.waitFor('the sink caught up', async () => {
      const a = await verifyExactlyOnce({ databaseUrl, source: 'behind_in', sink: 'behind_out' });
      return a.sinkCount >= written ? a : null;
    }, 120_000);
    expect(audit).toMatchObject({ sourceCount: written, sinkCount: written, missing: 0, duplicates: 0 });
  });
});

describe('a task whose agent does not answer', () => {
  it('is not measured, and the scale-out\'s baseline gate refuses, naming it', async () => {
    await defineWorkload(stack, 'mute', consumer('mute', 1, 2, { build: 'sound' }), 1);
    const [task] = await tasksOf(stack, 'mute');
    // Killed: its runtime is still READY (the lease has seconds to run) and the task still placed there.
    stack.agents[task.runtimeId].process.kill('SIGKILL');
    {
      const operation = await scaleAndWait(stack, 'mute', { replicas: 2, accept: ['downstream'] }, 'scaleOut');
      expect(operation.status).toBe('refused');
      const baseline = operation.gates.rows.find((row: { gate: string }) => row.gate === 'baseline');
      expect(baseline.passed).toBe(false);
      expect(baseline.detail).toContain(`${task.taskId} on ${task.runtimeId} not measured: its agent did not answer`);
      const measured = operation.evidence.baseline.tasks.find((t: { taskId: string }) => t.taskId === task.taskId);
      expect(measured).toMatchObject({ state: 'absent', unmeasured: expect.stringContaining('its agent did not answer') });
    }
  });
});
