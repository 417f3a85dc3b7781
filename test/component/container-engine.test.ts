// The Docker engine of a state folder (embedded/container-engine.ts): a start whose stack was
// killed before it could stop its engine (SIGKILL) leaves dockerd running with its pidfile, which a
// new dockerd on the same folder refuses. The next start stops that engine, after removing its
// containers and networks, and starts its own. Real dockerd.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WORKLOAD_NETWORK } from '../../agent/drivers/container';
import { startContainerEngine, type RunningEngine } from '../../embedded/container-engine';
import { bridgeExists, bridgeOf } from '../support/bridges';

const running: RunningEngine[] = [];
let dir: string;

afterAll(async () => {
  for (const engine of running.reverse()) await engine.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

it('a start on a folder whose previous engine was left running stops that one (its network and bridge removed) and runs its own', async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-engine-'));
  const left = await startContainerEngine({ dir, ownProcessGroup: true });
  running.push(left);
  const leftPid = Number(fs.readFileSync(path.join(dir, 'dockerd.pid'), 'utf8'));
  await left.engine.ensureNetwork(WORKLOAD_NETWORK);
  const bridge = bridgeOf(left.address, WORKLOAD_NETWORK);
  expect(bridgeExists(bridge)).toBe(true);

  // No stop: as after a SIGKILL of the stack. The next start on the folder:
  const lines: string[] = [];
  const next = await startContainerEngine({ dir, ownProcessGroup: true, log: (line) => lines.push(line) });
  running.push(next);
  expect(lines[0]).toBe(`stopping the Docker engine a previous start left running on ${dir} (pid ${leftPid})`);
  const nextPid = Number(fs.readFileSync(path.join(dir, 'dockerd.pid'), 'utf8'));
  expect(nextPid).not.toBe(leftPid);
  const leftState = fs.existsSync(`/proc/${leftPid}/stat`) ? fs.readFileSync(`/proc/${leftPid}/stat`, 'utf8') : '';
  expect(leftState === '' || /\) Z /.test(leftState)).toBe(true);
  expect(bridgeExists(bridge)).toBe(false);
  await next.engine.ping();
  // and once it is stopped, nothing of either is mounted on the folder (it can be removed)
  await next.stop();
  expect(fs.readFileSync('/proc/mounts', 'utf8')).not.toContain(dir);
});
