// cli/watch.ts: what --wait prints for an operation's progress, and how it exits; cli/format.ts's tables fit 120 columns.
import { UNKNOWN_SCALE_STATUS } from '../../api/routes/operations';
import { OperationAnswerSchema, type OperationAnswer } from '../../cli/answers';
import { table, TABLE_WIDTH } from '../../cli/format';
import { renderJobList, renderOperation, renderOperationList, renderState, renderTierList } from '../../cli/main';
import { exitCodeOf, followOperation, outcomeReason, progressLine, workloadOf } from '../../cli/watch';

/** The fields a test needs of an answer, typed as the answer (cli/answers.ts) the renderer takes. */
const answer = <T>(fields: unknown): T => fields as T;
const running = (fields: Record<string, unknown>) => answer<OperationAnswer>({ workflowId: 'scale:web', kind: 'scaleOut', status: 'running', phase: 'starting', ...fields });

describe('progressLine', () => {
  test('gates, plan, tasks ready and the soak countdown, as far as the operation got', () => {
    const gates = { rows: [{ gate: 'baseline', passed: true }, { gate: 'ownership', passed: true }] };
    const plan = { starts: [{}, {}], stops: [], moves: [] };
    expect(progressLine(running({ phase: 'gating', gates }), null, 0).text).toBe('gating: gates 2/2 passed');
    const converging = progressLine(running({ phase: 'converging', gates, plan }), { placed: 4, ready: 3 }, 0);
    expect(converging.text).toBe('converging: gates 2/2 passed · plan +2 −0 · tasks ready 3/4');
    const soakEndsAt = new Date(10_000).toISOString();
    const soaking = progressLine(running({ phase: 'soaking', gates, plan, soakEndsAt }), { placed: 4, ready: 4 }, 2_500);
    expect(soaking.text).toMatch(/soak 8 s left$/);
    // The countdown is the same step (rewritten in place on a terminal), a new phase is not.
    expect(progressLine(running({ phase: 'soaking', gates, plan, soakEndsAt }), { placed: 4, ready: 4 }, 5_000).key).toBe(soaking.key);
    expect(converging.key).not.toBe(soaking.key);
  });

  test('a failed gate is named', () => {
    const gates = { rows: [{ gate: 'baseline', passed: true }, { gate: 'contract', passed: false }] };
    expect(progressLine(running({ phase: 'refused', gates }), null, 0).text).toBe('refused: gates 1/2 passed (failed: contract)');
  });
});

test('outcomeReason and exit codes', () => {
  expect(outcomeReason(answer({ status: 'refused', evidenceGap: 'declare the contract' }))).toBe('declare the contract');
  expect(outcomeReason(answer({ status: 'failed', failure: 'boom' }))).toBe('boom');
  expect(outcomeReason(answer({ status: 'completed', result: {} }))).toBeNull();
  expect(['completed', 'failed', 'refused', 'compensated', 'cancelled', 'something'].map(exitCodeOf)).toEqual([0, 1, 3, 4, 5, 1]);
  expect([workloadOf('scale:web'), workloadOf('rescale:clicks'), workloadOf('recover:agent-a')]).toEqual(['web', 'clicks', null]);
});

describe('followOperation', () => {
  const views = [
    running({ phase: 'gating' }),
    running({ phase: 'converging', plan: { starts: [{}], stops: [], moves: [] } }),
    running({ phase: 'converging', plan: { starts: [{}], stops: [], moves: [] } }),
    { ...running({ phase: 'done' }), status: 'compensated', compensation: { reason: 'the converge missed its deadline' } },
  ];
  const follow = async (tty: boolean, ready: number[]) => {
    let call = 0;
    let readyCall = 0;
    let written = '';
    let clock = 0;
    const ended = await followOperation('scale:web', {
      get: async (path) => answer(path === '/v1/state' ? { workloads: [{ name: 'web', placed: 2, ready: ready[Math.min(readyCall++, ready.length - 1)] }] } : views[Math.min(call++, views.length - 1)]),
      write: (text) => { written += text; },
      tty, now: () => clock, sleep: async (ms) => { clock += ms; },
    });
    return { ended, written };
  };

  test('off a terminal: a plain line per change, then the outcome and its reason', async () => {
    const { ended, written } = await follow(false, [0, 1, 1]);
    expect(ended.status).toBe('compensated');
    expect(written.split('\n').filter(Boolean)).toEqual([
      '[  0.0 s] gating: tasks ready 0/2',
      '[  0.5 s] converging: plan +1 −0 · tasks ready 1/2',
      '[  1.5 s] done',
      'compensated: the converge missed its deadline (scale:web, 1.5 s)',
    ]);
    expect(written).not.toMatch(/[\r\x1b]/);
  });

  test('on a terminal: a changed figure rewrites its line in place', async () => {
    const { written } = await follow(true, [0, 1, 2]);
    expect(written).toContain('\r\x1b[K[  1.0 s] converging: plan +1 −0 · tasks ready 2/2');
    expect(written.endsWith('\ncompensated: the converge missed its deadline (scale:web, 1.5 s)\n')).toBe(true);
  });

  test('a ready count never runs ahead of the steps: the state is read before the operation (cli.test --wait race)', async () => {
    // The world moves on at every read: from the second read on, the operation has passed its gates
    // and planned, and the placements it then wrote show 2 tasks. A follower that read the operation
    // first and the state second would print 'gating: tasks ready 1/2' before the gates.
    let reads = 0;
    const gates = { rows: [{ gate: 'baseline', passed: true }] };
    const plan = { starts: [{}], stops: [], moves: [] };
    let written = '';
    await followOperation('scale:web', {
      get: async (path) => {
        reads++;
        const moved = reads >= 2;
        if (path === '/v1/state') return answer({ workloads: [{ name: 'web', placed: moved ? 2 : 1, ready: 1 }] });
        return answer(reads >= 6 ? { ...running({ phase: 'done', gates, plan }), status: 'completed' } : running(moved ? { phase: 'converging', gates, plan } : { phase: 'gating' }));
      },
      write: (text) => { written += text; }, tty: false, now: () => 0, sleep: async () => {},
    });
    const lines = written.split('\n').filter(Boolean);
    const firstWith = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line));
    expect(firstWith(/gates 1\/1 passed/)).toBeGreaterThanOrEqual(0);
    expect(firstWith(/tasks ready \d\/2/)).toBeGreaterThanOrEqual(firstWith(/gates 1\/1 passed/));
  });

  test('an API that does not answer for a while is said once, and followed through', async () => {
    let call = 0;
    let written = '';
    const ended = await followOperation('recover:agent-a', {
      get: async () => {
        call++;
        if (call <= 2) throw new Error('fetch failed');
        return answer({ workflowId: 'recover:agent-a', kind: 'recoverRuntime', status: 'completed', phase: 'done', result: {} });
      },
      write: (text) => { written += text; }, tty: false, now: () => 0, sleep: async () => {},
    });
    expect(ended.status).toBe('completed');
    expect(written.match(/still trying/g)).toHaveLength(1);
  });
});

describe('table', () => {
  test('a row with a long reason is cut to 120 columns, the short columns whole; line breaks become spaces', () => {
    const reason = `refused: ${'the downstream gate could not read a rate '.repeat(20)}`;
    const printed = table(['id', 'kind', 'reason', 'workflow'], [[1, 'scale-out', reason, 'scale:web'], [2, 'apply', 'line one\nline two', 'scale:web']]);
    const lines = printed.split('\n');
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThanOrEqual(TABLE_WIDTH);
    expect(lines[1]).toMatch(/^1\s+scale-out\s+refused: the downstream.*…\s+scale:web$/);
    expect(lines[2]).toMatch(/^2\s+apply\s+line one line two\s+scale:web$/);
  });
});

describe('operations show renders every kind', () => {
  const base = { runId: 'r1', status: 'completed', phase: 'done', startedAt: '2030-01-01T00:00:00.000Z', closedAt: '2030-01-01T00:00:09.000Z', failure: null };
  test('a rescale: operator, parallelism, hot, checkpoint, added and retired subtasks', () => {
    const printed = renderOperation(answer({ ...base, workflowId: 'rescale:clicks', kind: 'rescaleOperator', result: {
      kind: 'rescaleOperator', job: 'clicks', operator: 'agg', from: 2, to: 4, phase: 'done', outcome: 'completed', hot: true, reason: null,
      checkpoint: 42, added: ['clicks-5-g1', 'clicks-6-g1'], retired: [], retiredCounts: {}, compensation: null, error: null,
    } }));
    expect(printed).toMatch(/^RESCALE\noperator:\s+agg\nparallelism:\s+2 → 4\noutcome:\s+completed\nhot:\s+yes: cut over at a checkpoint barrier\ncheckpoint:\s+42\nadded:\s+clicks-5-g1, clicks-6-g1$/m);
    expect(printed).not.toMatch(/[{}]/);
  });
  test('a recovery: the loss, the timings and one row per workload decided', () => {
    const printed = renderOperation(answer({ ...base, workflowId: 'recover:agent-b', kind: 'recoverRuntime', result: {
      kind: 'recoverRuntime', runtime: 'agent-b', by: 'lease-sweeper', reason: 'lease expired', phase: 'done', outcome: 'completed',
      lost: { outcome: 'declared', fence: 4, lostAt: '2030-01-01T00:00:01.000Z' },
      decisions: [{ workload: 'web', kind: 'service', fromReplicas: 3, toReplicas: 3, phase: 'converged', applied: 'converged', attempts: 1, error: null }],
      compensation: null, error: null, timings: { startedAt: '2030-01-01T00:00:00.000Z', lostAt: null, decidedAt: '2030-01-01T00:00:02.000Z', convergedAt: null, endedAt: null },
    } }));
    expect(printed).toMatch(/^lost:\s+declared \(fence 4, at 2030-01-01T00:00:01.000Z\)$/m);
    expect(printed).toMatch(/^DECISIONS\nWORKLOAD\s+KIND\s+FROM→TO\s+PHASE\s+APPLIED\s+ATTEMPTS\s+ERROR\nweb\s+service\s+3→3\s+converged\s+converged\s+1\s+-$/m);
  });
  test('a Kubernetes scale-in: the object, the victims and why, acknowledgements, the marks removed', () => {
    const printed = renderOperation(answer({ ...base, workflowId: 'scale:web', kind: 'scaleIn', status: 'compensated', phase: 'compensated',
      gates: { passed: true, rows: [{ gate: 'disruption-budget', passed: true, detail: 'no PodDisruptionBudget covers the pods' }] },
      scaleIn: { victims: [], reasons: {} },
      compensation: { reason: 'no drain acknowledgement by the deadline from web-7d-x', replicas: 3, outcome: null },
      kubernetes: {
        object: 'Deployment shop/web on prod', resourceVersion: '812', conflicts: 0, victims: ['web-7d-x'], reasons: { 'web-7d-x': 'idle: nothing in flight' },
        marked: ['web-7d-x'], acknowledged: [], missing: ['web-7d-x'], forced: [], unmarked: ['web-7d-x'], deleted: [],
      },
    }));
    expect(printed).toMatch(/^KUBERNETES\nobject:\s+Deployment shop\/web on prod\nresourceVersion:\s+812\nvictims:\s+web-7d-x \(idle: nothing in flight\)\nmarked:\s+web-7d-x\nnot acknowledged:\s+web-7d-x\nmarks removed:\s+web-7d-x$/m);
    expect(printed).toMatch(/^outcome:\s+compensated: Deployment shop\/web on prod at 3$/m);
    expect(printed).not.toMatch(/VICTIMS/);
  });
  test('a running scale-out whose status query no worker answered in time (the API sends each detail field null): its status and phase, nothing else', () => {
    // read as the CLI reads an answer (its schema), not cast
    const view = OperationAnswerSchema.parse({
      ...base, workflowId: 'scale:web', kind: 'scaleOut', status: 'running', temporalStatus: 'RUNNING', reportUrl: 'http://127.0.0.1:8080/v1/operations/scale%3Aweb/report?runId=r1',
      phase: 'awaiting-approval', closedAt: null, ...UNKNOWN_SCALE_STATUS,
    });
    const printed = renderOperation(view);
    expect(printed).toMatch(/^status:\s+running$/m);
    expect(printed).toMatch(/^phase:\s+awaiting-approval$/m);
    expect(printed).not.toMatch(/GATES|PLAN|approval:/);
  });
  test('any other kind: its fields, one per line, lists joined', () => {
    const printed = renderOperation(answer({ ...base, workflowId: 'scale:web', kind: 'retireWorkload', result: { stopped: ['web-0-g1', 'web-1-g1'], unreachable: [] } }));
    expect(printed).toMatch(/^RESULT\nstopped:\s+web-0-g1, web-1-g1\nunreachable:\s+\(none\)$/m);
  });
});

describe('followOperation of a started run', () => {
  it('reads that run (?runId=), not the newest of the id', async () => {
    const asked: string[] = [];
    const ended = await followOperation('scale:web', {
      runId: 'r-1', tty: false, write: () => {}, sleep: async () => {},
      get: async (path) => { asked.push(path); return answer({ ...running({ phase: 'done' }), status: 'completed' }); },
    });
    expect(ended.status).toBe('completed');
    expect(asked.filter((path) => path.startsWith('/v1/operations'))).toEqual(['/v1/operations/scale%3Aweb?runId=r-1']);
  });
});

describe('a rollout followed', () => {
  it('says the revisions, the step it is at and how the steps before were judged', () => {
    const rollout = (steps: { role: string; outcome: string }[]) => answer<OperationAnswer>({
      kind: 'rollout', status: 'running', phase: 'soaking', result: { fromRevision: 'r-old', toRevision: 'r-new', steps, soakEndsAt: new Date(Date.now() + 2_000).toISOString() },
    });
    expect(progressLine(rollout([{ role: 'canary', outcome: 'pending' }, { role: 'batch', outcome: 'pending' }]), null, Date.now()).text)
      .toMatch(/^soaking: r-old → r-new: step 1\/2 · soak \d s left$/);
    const second = progressLine(rollout([{ role: 'canary', outcome: 'good' }, { role: 'batch', outcome: 'pending' }]), null, Date.now());
    expect(second.text).toMatch(/^soaking: r-old → r-new: step 2\/2 \(canary good\)/);
    expect(second.key).not.toBe(progressLine(rollout([{ role: 'canary', outcome: 'pending' }, { role: 'batch', outcome: 'pending' }]), null, Date.now()).key);
  });
});

describe('operations list', () => {
  it('prints one row per run, its run id whole however long the workflow id', () => {
    const runId = '0a1b2c3d-0000-4000-8000-000000000003';
    const workflowId = `scale:${'w'.repeat(63)}`;
    const printed = renderOperationList(answer([{ workflowId, runId, kind: 'stopTheWorldReplan', status: 'compensated', startedAt: '2026-12-01T10:00:00.000Z' }])).split('\n');
    expect(printed[0]).toMatch(/^WORKFLOW\s+RUN\s+KIND\s+STATUS\s+STARTED$/);
    expect(printed[1]).toContain(` ${runId} `);
    expect(printed[1]).toMatch(/stopTheWorldReplan\s+compensated\s+2026-12-01T10:00:00.000Z$/);
    expect(renderOperationList([])).toBe('(no operations)');
  });
});

describe('state shows desired, placed and ready per workload', () => {
  const workload = (name: string, fields: Record<string, unknown>) => ({
    name, kind: 'service', replicas: 2, desired: 2, placed: 2, ready: 2, status: 'placed',
    placement: { fence: 3, generation: 1, assignments: [{ runtimeId: 'agent-a', index: 0, taskId: `${name}-0-g1` }, { runtimeId: 'agent-b', index: 1, taskId: `${name}-1-g1` }] },
    ...fields,
  });
  const state = (workloads: unknown[]) => answer<Parameters<typeof renderState>[0]>({ runtimes: [], workloads, unplaced: [], operations: [], operationsAvailable: true, reconcile: { at: null, skipped: false, passes: 0, skips: 0 } });

  test('a workload whose task failed reads as not ready, with its counts', () => {
    const printed = renderState(state([workload('web', {}), workload('api', { ready: 1 }), workload('all', { replicas: 'all', desired: 3, placed: 2, ready: 0, status: 'degraded' })]));
    expect(printed).toMatch(/^NAME\s+KIND\s+DESIRED\s+PLACED\s+READY\s+STATUS\s+RUNTIMES\s+FENCE$/m);
    expect(printed).toMatch(/^web\s+service\s+2\s+2\s+2\s+placed\s+agent-a,agent-b\s+3$/m);
    expect(printed).toMatch(/^api\s+service\s+2\s+2\s+1\s+placed, 1 not ready\s+/m);
    expect(printed).toMatch(/^all\s+service\s+all \(3\)\s+2\s+0\s+degraded, 2 not ready\s+/m);
  });

  test('each task shows the revision it runs, an old one marked (mid-rollout)', () => {
    const tasks = [
      { taskId: 'web-0-g1-f4', runtimeId: 'agent-a', index: 0, state: 'ready', restarts: 0, crashLooping: false, revision: 'r-new' },
      { taskId: 'web-1-g1', runtimeId: 'agent-b', index: 1, state: 'ready', restarts: 0, crashLooping: false, revision: 'r-old' },
    ];
    const printed = renderState(state([workload('web', { runs: 'r-new', tasks })]));
    expect(printed).toMatch(/^WORKLOAD\s+TASK\s+RUNTIME\s+STATE\s+RESTARTS\s+CRASH-LOOPING\s+REVISION$/m);
    expect(printed).toMatch(/^web\s+web-0-g1-f4\s+agent-a\s+ready\s+0\s+no\s+r-new$/m);
    expect(printed).toMatch(/^web\s+web-1-g1\s+agent-b\s+ready\s+0\s+no\s+r-old \(old\)$/m);
  });

  test('a pending workload has nothing placed and nothing to call unready', () => {
    const printed = renderState(state([workload('new', { placement: null, placed: 0, ready: 0, status: 'pending' })]));
    expect(printed).toMatch(/^new\s+service\s+2\s+0\s+0\s+pending\s+-\s+-$/m);
  });
});

test('jobs and tiers with no argument list them all', () => {
  const jobs = renderJobList({ jobs: [{ job: 'clicks', generation: 2, operators: [{ id: 'src', kind: 'source', parallelism: 2 }, { id: 'agg', kind: 'keyed-aggregate', parallelism: 4 }, { id: 'out', kind: 'sink', parallelism: 1 }], desired: 7, placed: 7, ready: 6 }] });
  expect(jobs).toMatch(/^JOB\s+OPERATORS\s+GENERATION\s+DESIRED\s+PLACED\s+READY\nclicks\s+src 2 → agg 4 → out 1\s+2\s+7\s+7\s+6$/m);
  expect(renderJobList({ jobs: [] })).toBe('(none)');
  const tiers = renderTierList(answer({ tiers: [{ tier: 'demo', revision: 3, updatedAt: new Date().toISOString(), workflowId: 'autoscale:demo', policy: { workloads: ['demo-web'], minReplicas: 1, maxReplicas: 6, targets: { qpsPerInstance: 100 } } }] }));
  expect(tiers).toMatch(/^TIER\s+WORKLOADS\s+REPLICAS\s+TARGETS\s+REVISION\s+UPDATED\ndemo\s+demo-web\s+1–6\s+qpsPerInstance 100\s+3\s+/m);
});
