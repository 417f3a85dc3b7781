// Replay (determinism) tests over the COMMITTED histories in test/workflow/histories/: each was
// recorded once from a real run (`npm run record:histories`, scenarios in record-histories.ts) and is
// replayed here against the current workflow bundle. A change that alters the command sequence of a
// workflow already running in production fails here, where replaying a history the same code just
// produced never could. No Temporal server or database is involved: replay runs in-process, on the
// workflow bundle the jest global setup made once per run (harness/shared-servers.ts), the one
// every worker of the run executes. A deliberately reordered applyPlan shows the check can fail.
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import * as workflows from '../../workflows';
import { testEnv } from '../../harness/env';
import { historyFromJSON, type History } from '../../harness/histories/history-json';
import { HISTORIES_DIR } from '../../harness/histories/record-histories';
import { historyFiles } from '../../harness/histories/history-versions';

interface Committed {
  file: string;
  /** the events as committed (ProtoJSON) */
  json: { events: Array<Record<string, any>> };
  history: History;
  workflowType: string | undefined;
  workflowId: string;
}

function loadCommitted(): Committed[] {
  return historyFiles(HISTORIES_DIR).map((file) => {
    try {
      const json = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8'));
      const started = json.events?.[0]?.workflowExecutionStartedEventAttributes;
      return {
        file, json, history: historyFromJSON(json), workflowType: started?.workflowType?.name,
        workflowId: started?.workflowId ?? path.basename(file, '.json'), // a workflow may read its own id
      };
    } catch (error) {
      throw new Error(`${path.join(HISTORIES_DIR, file)} is not a workflow history: ${(error as Error).message}`);
    }
  });
}

const committed = loadCommitted();
const bundle = { code: fs.readFileSync(testEnv().workflowBundlePath, 'utf8') };

beforeAll(() => {
  // The teeth test's determinism violation is expected: keep SDK Core's warning about it out of the output.
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: { core: 'ERROR' }, forward: {} } } });
});

describe('committed histories', () => {
  it('are there, and each is a whole history: non-empty, opened by WorkflowExecutionStarted', () => {
    expect(committed.length).toBeGreaterThan(0);
    expect(committed.filter((c) => !(c.history.events && c.history.events.length > 1)).map((c) => c.file)).toEqual([]);
    expect(committed.filter((c) => c.json.events[0].eventType !== 'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED').map((c) => c.file)).toEqual([]);
  });

  it('cover every workflow type exported by workflows/index.ts', () => {
    const exported = Object.entries(workflows).filter(([, value]) => typeof value === 'function').map(([name]) => name).sort();
    const recorded = new Set(committed.map((c) => c.workflowType));
    expect(exported.length).toBeGreaterThan(0);
    // a new workflow needs a scenario in record-histories.ts and a recorded history
    expect(exported.filter((name) => !recorded.has(name))).toEqual([]);
  });

  it('every one replays against the current workflow bundle without a determinism violation', async () => {
    const results = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: bundle, replayName: 'committed-histories' },
      committed.map(({ history, workflowId }) => ({ history, workflowId })),
    )) {
      results.push(result);
    }
    expect(results).toHaveLength(committed.length);
    const failures = results.flatMap((result, i) =>
      result.error ? [`${committed[i].file}: ${result.error.name}: ${result.error.message}`] : []);
    expect(failures).toEqual([]);
  });
});

describe('the replay check has teeth', () => {
  it('a reordered applyPlan fails to replay the committed apply-plan history', async () => {
    const applyPlan = committed.find((c) => c.file === 'apply-plan.json');
    expect(applyPlan).toBeDefined();
    const changed = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, 'fixtures', 'changed-apply-plan.ts'),
      logger: new DefaultLogger('WARN'),
    });
    // positive control first: the same history replays cleanly against the real bundle
    await expect(Worker.runReplayHistory({ workflowBundle: bundle }, applyPlan!.history, applyPlan!.workflowId)).resolves.toBeUndefined();
    await expect(Worker.runReplayHistory({ workflowBundle: changed }, applyPlan!.history, applyPlan!.workflowId)).rejects.toMatchObject({
      name: 'DeterminismViolationError',
      message: expect.stringMatching(/nondeterminism/i),
    });
  });
});
