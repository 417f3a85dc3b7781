// The scalegate CLI as a person runs it (`node cli/bin.js ...`, `npx scalegate`, a linked
// `scalegate`, with SCALEGATE_API_URL and the tokens in the environment) against a real stack: every current route, readable tables by
// default, the API's JSON with --json, and a non-zero exit with the server's message on an error.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startStack, Stack } from '../../harness/stack';
import { waitForApply } from '../../harness/workloads';

let stack: Stack;
let dir: string;
const BIN = path.resolve(__dirname, '../../cli/bin.js');
const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with the operator and viewer tokens unless `env` says otherwise; never throws. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], {
      env: {
        PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_API_URL: stack.apiUrl,
        SCALEGATE_OPERATOR_TOKEN: stack.tokens.operator, SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer, SCALEGATE_HOME: dir, ...env,
      },
    }, (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}
const ok = async (args: string[], env?: Record<string, string>) => {
  const run = await cli(args, env);
  if (run.code !== 0) throw new Error(`scalegate ${args.join(' ')} exited ${run.code}: ${run.stderr}${run.stdout}`);
  return run.stdout;
};
const json = async (args: string[]) => JSON.parse(await ok([...args, '--json']));
const finished = (workflowId: string) =>
  stack.waitFor(`${workflowId} finished`, async () => {
    const op = await json(['operations', 'show', workflowId]);
    return op.status !== 'running' ? op : null;
  });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-cli-'));
  stack = await startStack({
    agents: [{ id: 'cli-a', labels: { zone: 'a', pool: 'cli' } }, { id: 'cli-b', labels: { zone: 'b', pool: 'cli' } }],
  });
});
afterAll(async () => {
  await stack?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const SPEC = `
  command: ["${process.execPath}", "${FIXTURE}"]
  readiness: { http: /healthz }
  graceMs: 500`;

describe('workloads', () => {
  it('applies two workloads from one YAML file (two documents) and one from a JSON file', async () => {
    fs.writeFileSync(path.join(dir, 'web.yaml'), `# two services
name: cli-web
kind: service
replicas: 1
selector: { pool: cli }
contract: { ownership: shared-queue, state: none, ordering: none, delivery: at-least-once, recovery: restart, downstream: none }
spec:${SPEC}
---
name: cli-other
kind: service
replicas: 1
selector: { pool: cli }
spec:${SPEC}
`);
    const out = await ok(['workloads', 'apply', '-f', path.join(dir, 'web.yaml')]);
    expect(out).toMatch(/^workload cli-web saved at revision \d+ \(service, replicas 1\)$/m);
    expect(out).toMatch(/^workload cli-other saved at revision \d+ \(service, replicas 1\)$/m);

    fs.writeFileSync(path.join(dir, 'json.json'), JSON.stringify({ name: 'cli-json', kind: 'service', replicas: 1, selector: { pool: 'cli' }, spec: { command: ['node', '-e', 'setInterval(() => {}, 60000)'] } }));
    expect((await json(['workloads', 'apply', '-f', path.join(dir, 'json.json')])).name).toBe('cli-json');
    await Promise.all(['cli-web', 'cli-other', 'cli-json'].map((name) => waitForApply(stack, name)));
  });

  it('refuses a bad file before calling the API, naming the field (exit 2)', async () => {
    fs.writeFileSync(path.join(dir, 'bad.yaml'), 'name: cli-bad\nkind: service\nreplicas: 0\nspec: { command: [x] }\n');
    const bad = await cli(['workloads', 'apply', '-f', path.join(dir, 'bad.yaml')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid workload cli-bad in .*bad\.yaml: replicas/);
    fs.writeFileSync(path.join(dir, 'broken.yaml'), 'name: [unclosed\n');
    expect((await cli(['workloads', 'apply', '-f', path.join(dir, 'broken.yaml')])).stderr).toMatch(/neither YAML nor JSON/);
    expect((await cli(['workloads', 'apply'])).stderr).toMatch(/missing the file/);
  });

  it('gets one workload and lists them as tables', async () => {
    const web = await ok(['workloads', 'get', 'cli-web']);
    expect(web).toMatch(/^name:\s+cli-web$/m);
    expect(web).toMatch(/^contract:\s+.*\bownership=shared-queue\b/m);
    expect(web).toMatch(/^INDEX\s+TASK\s+RUNTIME\s+PORTS\s+PARTITIONS$/m);
    // A replica moved by a recovery (a lease lapsed on a loaded machine) keeps its index with an -rN suffix.
    expect(web).toMatch(/^0\s+cli-web-0-g1(-r\d+)?\s+cli-[ab]\s+\d+\/\d+/m);
    const list = await ok(['workloads', 'list']);
    expect(list).toMatch(/^NAME\s+KIND\s+DESIRED\s+PLACED\s+READY\s+STATUS\s+RUNTIMES$/m);
    expect(list).toMatch(/^cli-web\s+service\s+1\s+1\s+1\s+placed\s+cli-[ab]$/m);
  });
});

describe('as installed', () => {
  const ROOT = path.resolve(__dirname, '../..');
  const run = (file: string, args: string[]) => new Promise<Run>((resolve) => {
    execFile(file, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_API_URL: stack.apiUrl, SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer, SCALEGATE_HOME: dir },
    }, (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });

  it('npx scalegate and a linked scalegate run the CLI (not only node cli/bin.js)', async () => {
    const viaNpx = await run('npx', ['--no-install', 'scalegate', 'state']);
    expect(viaNpx).toMatchObject({ code: 0 });
    expect(viaNpx.stdout).toMatch(/^RUNTIMES$/m);
    // a `scalegate` on PATH is a symlink to cli/bin.js, as npm link and the .bin folder make it
    const link = path.join(dir, 'bin', 'scalegate');
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(BIN, link);
    const viaLink = await run(link, ['--help']);
    expect(viaLink).toMatchObject({ code: 0 });
    expect(viaLink.stdout).toMatch(/^usage: scalegate <command>/m);
  });
});

describe('the compiled CLI', () => {
  // cli/bundle.js: plain JavaScript, so the test reads the same module bin.js runs
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const bundle = require('../../cli/bundle.js') as { BUNDLE: string; INPUTS: string; isFresh(): boolean };

  it('runs the bundle, built again once a source it was built from is newer than it (an edit never runs stale code)', async () => {
    expect(await ok(['--help'])).toMatch(/^usage: scalegate <command>/m);
    expect(bundle.isFresh()).toBe(true);
    const recorded = JSON.parse(fs.readFileSync(bundle.INPUTS, 'utf8')) as { builtMs: number; inputs: string[] };
    expect(recorded.inputs).toEqual(expect.arrayContaining(['cli/main.ts', 'cli/format.ts', 'protocol/api.ts']));
    // as an edit after the build leaves it: cli/format.ts newer than the bundle
    const edited = fs.statSync(path.resolve(__dirname, '../../cli/format.ts')).mtimeMs;
    fs.writeFileSync(bundle.INPUTS, JSON.stringify({ ...recorded, builtMs: edited - 1 }));
    expect(bundle.isFresh()).toBe(false);
    expect(await ok(['--help'])).toMatch(/^usage: scalegate <command>/m);
    expect(bundle.isFresh()).toBe(true);
    expect((JSON.parse(fs.readFileSync(bundle.INPUTS, 'utf8')) as { builtMs: number }).builtMs).toBeGreaterThanOrEqual(edited);
  });
});

describe('state', () => {
  it('prints tables by default and the API\'s JSON with --json', async () => {
    const state = await ok(['state']);
    expect(state).toMatch(/^RUNTIMES\nID\s+STATUS\s+LABELS\s+SLOTS\s+TASKS\s+LEASE\s+FENCE$/m);
    expect(state).toMatch(/^cli-a\s+READY\s+pool=cli,zone=a\s+4\s+\d+\s+in \d+s\s+\d+$/m);
    expect(state).toMatch(/^WORKLOADS\nNAME\s+KIND\s+DESIRED\s+PLACED\s+READY\s+STATUS\s+RUNTIMES\s+FENCE$/m);
    expect(state).toMatch(/^cli-web\s+service\s+1\s+1\s+1\s+placed\s+cli-[ab]\s+\d+$/m);
    expect(state).toMatch(/^OPERATIONS$/m);
    expect(state).toMatch(/^reconcile: last pass/m);
    const parsed = await json(['state']);
    expect(parsed.runtimes.map((r: any) => r.id).sort()).toEqual(['cli-a', 'cli-b']);
    // desired and placed side by side
    expect(parsed.workloads.find((w: any) => w.name === 'cli-web')).toMatchObject({ desired: 1, placed: 1, replicas: 1 });
  });
});

describe('plan, apply, scale and operations', () => {
  it('plans 1 → 2, applies the plan (a raising plan is a scale-out: the same gates) and follows the operation', async () => {
    const plan = await ok(['plan', 'cli-web', '2']);
    expect(plan).toMatch(/^replicas:\s+1 → 2$/m);
    // a new replica of a generation already placed carries the fence its placement write takes (task identity)
    expect(plan).toMatch(/^CHANGES\nCHANGE\s+TASK\s+FROM\s+TO\nstart\s+cli-web-1-g1-f\d+\s+-\s+cli-[ab]$/m);
    expect(plan).toMatch(/^apply it with: scalegate apply \S+$/m);
    const planId = (await json(['plan', 'cli-web', '2'])).id;
    const applied = await ok(['apply', planId]);
    expect(applied).toMatch(/^applying:\s+scaleOut scale:cli-web$/m);
    expect(applied).toMatch(/^follow it with: scalegate operations watch scale:cli-web$/m);
    expect((await finished('scale:cli-web')).kind).toBe('scaleOut');
    const show = await ok(['operations', 'show', 'scale:cli-web']);
    expect(show).toMatch(/^kind:\s+scaleOut$/m);
    expect(show).toMatch(new RegExp(`^id:\\s+${planId}$`, 'm')); // the reviewed plan is the one applied
    expect(show).toMatch(/^status:\s+completed$/m);
    // The report link names the run shown (an older run's link keeps opening that run).
    const runId = /^run:\s+(\S+)$/m.exec(show)![1];
    const reportUrl = `${stack.apiUrl}/v1/operations/scale%3Acli-web/report?runId=${runId}`;
    expect(show.split('\n').find((line) => line.startsWith('report:'))?.replace(/^report:\s+/, '')).toBe(reportUrl);
    // Its evidence page, saved: the same HTML the API serves, with the baseline and after charted.
    const file = path.join(dir, 'cli-web.html');
    const saved = await ok(['operations', 'report', 'scale:cli-web', '--out', file]);
    expect(saved.trim()).toBe(`report of scale:cli-web (run ${runId}) written to ${file} (${fs.statSync(file).size} bytes); served at ${reportUrl}`);
    const html = fs.readFileSync(file, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html.match(/<figure class="chart"/g)).toHaveLength(8);
    expect(html).toContain('data-point="baseline"');
    expect(html).toContain('data-point="after"');
  });

  it('scales in 2 → 1 and shows the operation with its victim', async () => {
    const started = await ok(['scale', 'cli-web', '1', '--drain-timeout-ms', '2000', '--reason', 'cli test']);
    expect(started).toMatch(/^started:\s+scaleIn scale:cli-web$/m);
    await finished('scale:cli-web');
    const show = await ok(['operations', 'show', 'scale:cli-web']);
    expect(show).toMatch(/^status:\s+completed$/m);
    expect(show).toMatch(/^VICTIMS\nTASK\s+RUNTIME\s+WHY\ncli-web-\d-g1(-f\d+)?\s+cli-[ab]\s+\S/m);
  });

  it('scales out with manual approval, approves it, and aborts another one', async () => {
    expect(await ok(['scale', 'cli-web', '2', '--approval', 'manual', '--soak-ms', '0'])).toMatch(/^started:\s+scaleOut scale:cli-web$/m);
    await stack.waitFor('awaiting approval', async () => (await json(['operations', 'show', 'scale:cli-web'])).phase === 'awaiting-approval');
    const waiting = await ok(['operations', 'show', 'scale:cli-web']);
    expect(waiting).toMatch(/^approval:\s+manual$/m);
    expect(waiting).toMatch(/^GATES\nGATE\s+PASSED\s+DETAIL\nbaseline\s+yes\s+/m);
    expect(await ok(['operations', 'approve', 'scale:cli-web'])).toMatch(/^approved scale:cli-web: phase \S+, approval approved by operator$/m);
    expect((await finished('scale:cli-web')).status).toBe('completed');

    expect(await ok(['scale', 'cli-web', '1', '--drain-timeout-ms', '2000'])).toMatch(/scaleIn scale:cli-web/);
    await finished('scale:cli-web');
    await ok(['scale', 'cli-web', '2', '--approval', 'manual']);
    await stack.waitFor('awaiting approval', async () => (await json(['operations', 'show', 'scale:cli-web'])).phase === 'awaiting-approval');
    expect(await ok(['operations', 'abort', 'scale:cli-web'])).toMatch(/^abort requested for scale:cli-web/);
    expect((await finished('scale:cli-web')).status).toBe('cancelled');
  });

  it('prints the ledger as a table, filtered', async () => {
    const ledger = await ok(['ledger', '--workload', 'cli-web', '--limit', '20']);
    expect(ledger).toMatch(/^ID\s+AT\s+KIND\s+WORKLOAD\s+FROM→TO\s+OUTCOME\s+REASON\s+WORKFLOW$/m);
    expect(ledger).toMatch(/^\d+\s+\S+\s+scale-in\s+cli-web\s+2→1\s+completed\s+cli test\s+scale:cli-web$/m);
    expect(ledger).toMatch(/\s+scale-out\s+cli-web\s+1→2\s+cancelled\s+aborted via API\s+scale:cli-web$/m);
    expect((await json(['ledger', '--kind', 'apply'])).events.every((e: any) => e.kind === 'apply')).toBe(true);
  });

  it('--wait follows a scale to its end, a plain line per step, and exits by the outcome (0 completed, 3 refused)', async () => {
    const run = await cli(['scale', 'cli-web', '2', '--soak-ms', '1500', '--wait']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^started scaleOut scale:cli-web \(web ui: http/);
    // The steps in their order: gates, the plan, tasks ready n/m, the soak countdown, the comparison.
    const firstIndex = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line));
    const steps = [/gates \d+\/\d+ passed/, /plan \+1 −0/, /tasks ready \d\/2/, /^\[\s*[\d.]+ s\] soaking: .*soak \d+ s left/, /comparison pass/].map(firstIndex);
    expect(steps.every((index) => index > 0)).toBe(true);
    expect([...steps].sort((x, y) => x - y)).toEqual(steps);
    expect(lines[lines.length - 1]).toMatch(/^completed \(scale:cli-web, [\d.]+ s\)$/);
    // Off a terminal: no control characters, no line rewritten in place.
    expect(run.stdout).not.toMatch(/[\r\x1b]/);

    // cli-other declares no contract: the scale-out gates refuse it, and --wait exits 3 with the reason.
    const refused = await cli(['scale', 'cli-other', '2', '--wait']);
    expect(refused.code).toBe(3);
    expect(refused.stdout).toMatch(/^refused: .*contract/m);
    // operations watch on an ended operation prints its end and exits the same way; --json prints the final view.
    expect(await cli(['operations', 'watch', 'scale:cli-other'])).toMatchObject({ code: 3, stdout: expect.stringMatching(/^refused: /m) });
    const watched = await cli(['operations', 'watch', 'scale:cli-web', '--json']);
    expect(watched.code).toBe(0);
    expect(JSON.parse(watched.stdout)).toMatchObject({ workflowId: 'scale:cli-web', status: 'completed' });
    // And back to 1 (the tests below expect it there), a scale-in followed the same way.
    const back = await cli(['scale', 'cli-web', '1', '--drain-timeout-ms', '2000', '--wait']);
    expect(back).toMatchObject({ code: 0 });
    expect(back.stdout).toMatch(/^started scaleIn scale:cli-web[\s\S]*^completed/m);
  });

  it('retires a workload', async () => {
    expect(await ok(['workloads', 'retire', 'cli-other'])).toMatch(/^retiring:\s+retireWorkload scale:cli-other$/m);
    expect((await finished('scale:cli-other')).status).toBe('completed');
  });
});

describe('runtimes', () => {
  it('cordons and uncordons a runtime', async () => {
    expect(await ok(['cordon', 'cli-b'])).toMatch(/^status:\s+CORDONED$/m);
    expect(await ok(['uncordon', 'cli-b'])).toMatch(/^status:\s+READY$/m);
  });

  it('recovers a runtime: recoverRuntime declares it LOST and completes, and the agent registers again', async () => {
    // retired through the CLI (its retirement a workflow like any other), before the recovery below
    expect(await ok(['workloads', 'retire', 'cli-json'])).toMatch(/retireWorkload scale:cli-json/);
    expect((await finished('scale:cli-json')).status).toBe('completed');
    const run = await cli(['recover', 'cli-b', '--wait']);
    expect({ code: run.code, stderr: run.stderr, stdout: run.code === 0 ? '' : run.stdout }).toEqual({ code: 0, stderr: '', stdout: '' });
    expect(run.stdout).toMatch(/^recovering recoverRuntime recover:cli-b /m);
    expect(run.stdout).toMatch(/^completed/m);
    const recovery = await json(['operations', 'show', 'recover:cli-b']);
    expect(recovery).toMatchObject({ kind: 'recoverRuntime', status: 'completed', result: { runtime: 'cli-b', by: 'operator', lost: { outcome: 'declared' } } });
    // The tests below use both runtimes: the recovered agent registers anew once it learns it is LOST.
    await stack.waitFor('cli-b READY again', async () => (await json(['state'])).runtimes.find((r: any) => r.id === 'cli-b')?.status === 'READY');
  });
});

describe('an API that is stopped', () => {
  it('says within seconds what it waits for, and gives up with a message (exit 1); a refused connection says so at once', async () => {
    // A stopped API (SIGSTOP): the kernel takes the connection, nothing ever answers.
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    try {
      const hung = await cli(['state'], { SCALEGATE_API_URL: url, SCALEGATE_CLI_TIMEOUT_MS: '5000' });
      expect(hung).toMatchObject({ code: 1, stdout: '' });
      expect(hung.stderr).toMatch(new RegExp(`^scalegate: waiting for the scalegate API at ${url} \\(no answer after 3 s; giving up after 5 s`, 'm'));
      expect(hung.stderr).toMatch(new RegExp(`^scalegate: no answer from the scalegate API at ${url} within 5 s \\(is npm start running\\?`, 'm'));
    } finally {
      silent.close();
    }
    // Nothing listens there now: refused at once, no waiting line.
    const refused = await cli(['state'], { SCALEGATE_API_URL: url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`scalegate: cannot reach the scalegate API at ${url}: connection refused (is npm start running? --api or SCALEGATE_API_URL names another API)\n`);
  });
});

describe('errors: non-zero exit with the server\'s message', () => {
  it('a refused call exits 1 with the API\'s code and message on stderr (and its body on stdout with --json)', async () => {
    const missing = await cli(['workloads', 'get', 'nope']);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toBe('scalegate: not-found: no workload nope\n');
    const same = await cli(['scale', 'cli-web', '1', '--json']);
    expect(same.code).toBe(1);
    expect(JSON.parse(same.stdout)).toMatchObject({ error: 'conflict' });
    expect(same.stderr).toMatch(/^scalegate: conflict: cli-web already runs 1 replica\(s\)$/m);
    const unauthorized = await cli(['state'], { SCALEGATE_VIEWER_TOKEN: 'not-the-token-at-all-xxxxxxxx' });
    expect(unauthorized).toMatchObject({ code: 1 });
    expect(unauthorized.stderr).toMatch(/^scalegate: unauthorized: unknown bearer token$/m);
    const forbidden = await cli(['cordon', 'cli-a'], { SCALEGATE_OPERATOR_TOKEN: stack.tokens.viewer });
    expect(forbidden.stderr).toMatch(/^scalegate: forbidden: this route needs the operator role/m);
  });

  it('a bad argument is refused before any call (exit 2), naming the field', async () => {
    const zero = await cli(['scale', 'cli-web', '0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/invalid arguments: replicas/);
    expect((await cli(['scale', 'cli-web', '3', '--approval', 'maybe'])).stderr).toMatch(/invalid arguments: approval/);
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli([])).stdout).toMatch(/^usage: scalegate/);
    expect((await cli(['--help'])).code).toBe(0);
  });
});
