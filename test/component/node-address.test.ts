// A node's tasks listen on the node's address, not on 127.0.0.1 (issue 35 item 1): the process
// driver with a bind address of 127.0.0.2 (a loopback address other than the default, which every
// Linux host answers on) draws its ports there, hands the task BIND_HOST, and probes it there; the
// task's port is then reached at 127.0.0.2 and nothing listens on 127.0.0.1. Real processes, real binds.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { DriverContext, TaskDriver } from '../../agent/drivers/driver';
import { createProcessDriver } from '../../agent/drivers/process';
import { isPortBindable, PortAllocator } from '../../agent/ports';
import { reservePortRange, type PortRange } from '../../harness/ports';
import { waitFor } from '../../harness/wait-for';

const FIXTURE = path.resolve(__dirname, '../../harness/fixtures/http-server.js');
const NODE_ADDRESS = '127.0.0.2';
let block: PortRange;
let stateDir: string;
let driver: TaskDriver | undefined;

beforeAll(async () => {
  block = await reservePortRange();
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-node-address-'));
});
afterAll(async () => {
  await driver?.close?.();
  fs.rmSync(stateDir, { recursive: true, force: true });
  block?.release();
});

const connects = (host: string, port: number) => new Promise<boolean>((resolve) => {
  const socket = net.connect({ host, port }, () => { socket.destroy(); resolve(true); });
  socket.on('error', () => resolve(false));
});

test("a process task binds, and is probed ready, on the node's address", async () => {
  const ctx: DriverContext = { runtimeId: 'n2', stateDir, taskBindHost: NODE_ADDRESS, log: () => {} };
  const ports = new PortAllocator({ stateDir, rangeStart: block.start, rangeEnd: block.start + 20, quarantineMs: 0, bindHost: NODE_ADDRESS });
  driver = createProcessDriver(ctx, ports);
  const handle = await driver.start({ taskId: 'web-1-g1', workload: 'web', kind: 'service', index: 0, generation: 1, placementFence: 1, spec: { command: [process.execPath, FIXTURE], readiness: { http: '/healthz' } } });
  await waitFor('the task ready (probed at 127.0.0.2)', () => handle.status().state === 'ready', { timeoutMs: 15_000, intervalMs: 25, context: () => String(handle.status().detail) });
  const port = handle.status().ports!.public;
  expect(handle.status().detail ?? '').not.toContain('127.0.0.1');
  expect(await connects(NODE_ADDRESS, port)).toBe(true);
  expect(await connects('127.0.0.1', port)).toBe(false);
  // the port is held at the node's address: a bind there fails, which is what the allocator checks
  expect(await isPortBindable(port, NODE_ADDRESS)).toBe(false);
  expect((await handle.drain({ graceMs: 2_000 })).inFlight).toBe(0);
});
