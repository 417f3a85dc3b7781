// npm test's runner (harness/test-lanes.ts) on real jest runs of small fixture suites: a lane that
// fails fails the whole, whichever lane it is and however its output is kept; an idle lane's files
// run under SCHED_IDLE; the shared servers outlive every lane.
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isAlive } from '../../harness/ports';
import { runLanes, type Lane } from '../../harness/test-lanes';
import { waitFor } from '../../harness/wait-for';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'test-lanes-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A lane over a folder of its own holding `files` (name → test body), kept (not streamed). */
function lane(name: string, files: Record<string, string>, priority: Lane['priority'] = 'normal'): Lane {
  const root = path.join(dir, name);
  fs.mkdirSync(root, { recursive: true });
  for (const [file, body] of Object.entries(files)) fs.writeFileSync(path.join(root, file), body);
  return { title: `lane ${name}`, select: ['--config', JSON.stringify({ rootDir: root, testMatch: ['<rootDir>/*.test.js'] })], workers: 1, priority, stream: false };
}

/** A process's scheduling policy: /proc/<pid>/stat field 41 (0 normal, 5 SCHED_IDLE). */
function policyOf(pid: 'self' | number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[41 - 3]!;
}

/** A test that writes the scheduling policy of the process running it (as policyOf reads it). */
const recordsPolicy = (out: string) => `
test('records its policy', () => {
  const stat = require('fs').readFileSync('/proc/self/stat', 'utf8');
  require('fs').writeFileSync(${JSON.stringify(out)}, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[41 - 3]);
});`;

async function run(lanes: Lane[]) {
  const events: string[] = [];
  let output = '';
  const code = await runLanes({
    lanes,
    startServers: async () => {
      events.push('servers started');
      return { stop: async () => void events.push('servers stopped') };
    },
    write: (text) => {
      output += text;
    },
  });
  return { code, output, events };
}

test('every lane passing: 0, one summary of both, the servers started once and stopped after', async () => {
  // Lanes inherit this process's policy, and npm test runs this file in its idle lane: from there
  // a lane left idle and one made idle would look alike. So the lanes start from the normal policy
  // (root may raise it), and this process goes back to its own afterwards.
  const own = policyOf('self');
  const setOwn = (policy: '--other' | '--idle') => execFileSync('chrt', ['--all-tasks', policy, '--pid', '0', String(process.pid)]);
  if (own !== '0') setOwn('--other');
  try {
    await lanesOfBothPolicies();
  } finally {
    if (own !== '0') setOwn('--idle');
  }
});

async function lanesOfBothPolicies() {
  const normalPolicy = path.join(dir, 'normal-policy');
  const idlePolicy = path.join(dir, 'idle-policy');
  const { code, output, events } = await run([
    lane('a', { 'one.test.js': recordsPolicy(normalPolicy) }),
    lane('b', { 'two.test.js': recordsPolicy(idlePolicy), 'three.test.js': "test('three', () => expect(3).toBe(3));" }, 'idle'),
  ]);
  expect(code).toBe(0);
  expect(output).toContain('== lane a: passed');
  expect(output).toContain('== lane b: passed');
  expect(output).toMatch(/Test Suites: 3 passed, 3 total\nTests: +3 passed, 3 total\n/);
  expect(output).toContain('Ran all test suites in 2 lanes.');
  expect(events).toEqual(['servers started', 'servers stopped']);
  // The idle lane's test ran under SCHED_IDLE (5), the other under the normal policy (0).
  expect(fs.readFileSync(normalPolicy, 'utf8')).toBe('0');
  expect(fs.readFileSync(idlePolicy, 'utf8')).toBe('5');
}

test('a failing file in the idle lane fails the whole, with its output', async () => {
  const { code, output } = await run([
    lane('c', { 'fine.test.js': "test('fine', () => {});" }),
    lane('d', { 'broken.test.js': "test('broken', () => expect('left').toBe('right'));" }, 'idle'),
  ]);
  expect(code).toBe(1);
  expect(output).toContain('== lane c: passed');
  expect(output).toContain('== lane d: FAILED');
  expect(output).toContain('Expected: "right"');
  expect(output).toMatch(/Tests: +1 failed, 1 passed, 2 total/);
});

test('a lane whose jest ends without a report fails the whole', async () => {
  const { code, output } = await run([
    lane('e', { 'fine.test.js': "test('fine', () => {});" }),
    { title: 'lane f', select: ['--config', path.join(dir, 'no-such-config.json')], workers: 1, priority: 'normal', stream: false },
  ]);
  expect(code).toBe(1);
  expect(output).toContain('== lane f: FAILED');
  expect(output).toContain('== lane f: ended (exit 1) without its report');
  expect(output).toContain('Ran the test suites of 1 of 2 lanes');
});

test('SIGTERM stops every process of every lane, a child ignoring it too, then the servers: 143', async () => {
  const pids = path.join(dir, 'pids');
  fs.mkdirSync(pids);
  // A file that starts a child ignoring SIGTERM, says so, and waits for ever.
  const stubborn = `
test('waits', async () => {
  const child = require('child_process').spawn('sh', ['-c', 'trap "" TERM; while :; do sleep 1; done'], { stdio: 'ignore' });
  require('fs').writeFileSync(${JSON.stringify(pids)} + '/' + process.pid, String(child.pid));
  await new Promise(() => {});
}, 600000);`;
  const lanes = [lane('g', { 'waits.test.js': stubborn }), lane('h', { 'waits.test.js': stubborn }, 'idle')];
  const events: string[] = [];
  const signals = new EventEmitter();
  const ran = runLanes({
    lanes,
    startServers: async () => ({ stop: async () => void events.push(`servers stopped, ${alive().length} of the lanes' processes alive`) }),
    write: () => {},
    stopGraceMs: 500,
    signals,
  });
  const started = () => fs.readdirSync(pids).flatMap((worker) => [Number(worker), Number(fs.readFileSync(path.join(pids, worker), 'utf8'))]);
  const alive = () => started().filter(isAlive);
  await waitFor('both lanes\' files to start their child', () => fs.readdirSync(pids).length === 2, 60_000);
  expect(alive()).toHaveLength(4); // two jest workers, each with its stubborn child
  signals.emit('SIGTERM', 'SIGTERM');
  expect(await ran).toBe(143);
  expect(events).toEqual(['servers stopped, 0 of the lanes\' processes alive']);
  expect(alive()).toEqual([]);
});

test('a Ctrl-C while the servers start (it reaches their starts too) is a stop, 130; a failed start without one is an error', async () => {
  const signals = new EventEmitter();
  const interrupted = runLanes({
    lanes: [lane('i', { 'fine.test.js': "test('fine', () => {});" })],
    startServers: async () => {
      signals.emit('SIGINT', 'SIGINT');
      throw new Error('initdb: child process was terminated by signal 2: Interrupt');
    },
    write: () => {},
    signals,
  });
  expect(await interrupted).toBe(130);
  const failed = runLanes({
    lanes: [lane('j', { 'fine.test.js': "test('fine', () => {});" })],
    startServers: async () => {
      throw new Error('initdb failed');
    },
    write: () => {},
    signals: new EventEmitter(),
  });
  await expect(failed).rejects.toThrow('initdb failed');
});
