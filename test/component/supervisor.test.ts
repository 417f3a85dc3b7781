// npm start supervises its services (issue 9 item 6, issue 10 item 5): a crashed API, worker or
// agent is restarted after a backoff and the rest keeps running; a stop restarts nothing.
// Real child processes through the same spawnService the embedded stack uses.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnService } from '../../embedded/processes';
import { supervise } from '../../embedded/supervisor';
import { waitFor } from '../../harness/wait-for';
import { setTimeout as sleep } from 'node:timers/promises';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-supervisor-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A service that writes its pid to a file and then runs until signalled. */
const entry = path.relative(path.resolve(__dirname, '../..'), path.join(dir, 'service.ts'));
fs.writeFileSync(path.join(dir, 'service.ts'), `import fs from 'node:fs';\nfs.appendFileSync(process.argv[2], process.pid + '\\n');\nsetInterval(() => {}, 1000);\n`);
const pidsIn = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map(Number) : []);

describe('a supervised service', () => {
  it('is started again after it crashes, and a stop ends it for good', async () => {
    const pidFile = path.join(dir, 'pids-crash');
    const lines: string[] = [];
    const service = supervise({
      name: 'svc', log: (line) => lines.push(line), initialBackoffMs: 50,
      start: () => spawnService({ name: 'svc', entry, args: [pidFile], env: { PATH: process.env.PATH } }),
    });
    try {
      const [first] = await waitFor('the first run', () => pidsIn(pidFile).length === 1 && pidsIn(pidFile));
      process.kill(first, 'SIGKILL');
      const pids = await waitFor('a second run', () => pidsIn(pidFile).length === 2 && pidsIn(pidFile));
      expect(pids[1]).not.toBe(first);
      expect(service.restarts()).toBe(1);
      expect(lines.join('\n')).toMatch(/svc exited with .*restarting/);
      expect(service.current().child.pid).toBe(pids[1]);
    } finally {
      await service.stop();
    }
    expect(service.current().child.exitCode !== null || service.current().child.signalCode !== null).toBe(true);
    // No restart after a stop: wait for what a restart would have written, then count.
    await sleep(300);
    expect(pidsIn(pidFile)).toHaveLength(2);
  });
});
