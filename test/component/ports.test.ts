// PortAllocator against real loopback binds and a real state folder. Each test reserves its own
// free range (harness/ports.ts), so no other test or process is using those ports. (The range
// check that binds nothing is test/unit/port-range.test.ts.)
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DriverError } from '../../agent/drivers/driver';
import { PORT_RECORDS_FILE, PortAllocator, type PortAllocatorOptions } from '../../agent/ports';
import type { PortPair } from '../../protocol';
import { reservePortRange, type PortRange } from '../../harness/ports';

const stateDirs: string[] = [];
function freshStateDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-ports-'));
  stateDirs.push(dir);
  return dir;
}

const openServers: net.Server[] = [];
function holdPort(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      openServers.push(server);
      resolve(server);
    });
  });
}

const reserved: PortRange[] = [];
/** `size` free consecutive ports below the ephemeral range, for this test only. */
async function freeRange(size: number): Promise<PortRange> {
  const range = await reservePortRange(size);
  reserved.push(range);
  return range;
}

afterEach(async () => {
  await Promise.all(openServers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  for (const range of reserved.splice(0)) range.release();
});
afterAll(() => {
  for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true });
});

function allocator(range: PortRange, overrides: Partial<PortAllocatorOptions> = {}): PortAllocator {
  return new PortAllocator({ stateDir: freshStateDir(), rangeStart: range.start, rangeEnd: range.end, quarantineMs: 60_000, ...overrides });
}

const portsOf = (pair: PortPair) => [pair.public, pair.internal];

async function expectPlacementUnavailable(attempt: Promise<unknown>, range: string): Promise<void> {
  const error = await attempt.then(
    () => {
      throw new Error('expected placement-unavailable, but a pair was handed out');
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(DriverError);
  expect((error as DriverError).code).toBe('placement-unavailable');
  expect((error as DriverError).message).toContain(`fewer than two free ports in ${range}`);
}

describe('PortAllocator', () => {
  test('keys acquiring at the same time never share a port, and each port is in the range', async () => {
    const range = await freeRange(40);
    const ports = allocator(range);
    const keys = Array.from({ length: 20 }, (_, index) => `web/${index}`);
    // 20 pairs from 40 ports: only a serialised allocator that excludes held ports fits them all.
    const pairs = await Promise.all(keys.map((key) => ports.acquire(key)));
    const handedOut = pairs.flatMap((acquisition) => portsOf(acquisition.ports));
    expect(new Set(handedOut).size).toBe(40);
    for (const port of handedOut) {
      expect(port).toBeGreaterThanOrEqual(range.start);
      expect(port).toBeLessThanOrEqual(range.end);
    }
    await expectPlacementUnavailable(ports.acquire('web/20'), range.label);
  });

  test('the internal port is drawn independently, not derived from the public one', async () => {
    // Same first random (same public port), different second random: the internal port follows the
    // second draw. A derived internal (public + 1, or any function of public) would be identical.
    const scripted = (values: number[]) => {
      let calls = 0;
      return { random: () => values[calls++ % values.length]!, calls: () => calls };
    };
    const low = scripted([0.5, 0.0]);
    const high = scripted([0.5, 0.99]);
    const range = await freeRange(10);
    const first = await allocator(range, { random: low.random }).acquire('api/0');
    const second = await allocator(range, { random: high.random }).acquire('api/0');

    expect(first.ports.public).toBe(second.ports.public);
    expect(first.ports.internal).not.toBe(second.ports.internal);
    for (const { ports } of [first, second]) {
      expect(ports.internal).not.toBe(ports.public);
      expect(Math.abs(ports.internal - ports.public)).not.toBe(1);
    }
    expect(low.calls()).toBe(2);
    expect(high.calls()).toBe(2);
  });

  test('over many keys, internal is not systematically public + 1', async () => {
    const ports = allocator(await freeRange(200));
    const pairs = await Promise.all(Array.from({ length: 30 }, (_, index) => ports.acquire(`svc/${index}`)));
    const adjacent = pairs.filter(({ ports: pair }) => pair.internal === pair.public + 1);
    // With independent draws from 200 ports, 30 adjacent pairs would be astronomically unlikely.
    expect(adjacent.length).toBeLessThan(5);
  });

  test('a key keeps its pair across calls and across a new allocator over the same state folder', async () => {
    const stateDir = freshStateDir();
    const range = await freeRange(50);
    const options = { stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 1000 };
    const first = await new PortAllocator(options).acquire('web/0');
    expect(first.reused).toBe(false);

    const again = await new PortAllocator(options).acquire('web/0');
    expect(again).toEqual({ ports: first.ports, reused: true });

    const onDisk = JSON.parse(fs.readFileSync(path.join(stateDir, PORT_RECORDS_FILE), 'utf8'));
    expect(onDisk.pairs['web/0']).toEqual(first.ports);
    // Atomic writes leave no temporary files behind.
    expect(fs.readdirSync(stateDir)).toEqual([PORT_RECORDS_FILE]);

    const other = await new PortAllocator(options).acquire('web/1');
    expect(portsOf(other.ports)).not.toContain(first.ports.public);
    expect(portsOf(other.ports)).not.toContain(first.ports.internal);
  });

  test('a recorded port now held by another listener gets a new pair, and the move is reported', async () => {
    const stateDir = freshStateDir();
    const range = await freeRange(20);
    const options = { stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 1000 };
    const recorded = (await new PortAllocator(options).acquire('web/0')).ports;
    await holdPort(recorded.public);

    const afterRestart = await new PortAllocator(options).acquire('web/0');
    expect(afterRestart.moved).toEqual({ from: recorded, to: afterRestart.ports });
    expect(afterRestart.reused).toBe(false);
    expect(portsOf(afterRestart.ports)).not.toContain(recorded.public);
    // The new pair is the record from now on.
    expect(await new PortAllocator(options).acquire('web/0')).toEqual({ ports: afterRestart.ports, reused: true });
  });

  test('a port bound by something else is never handed out', async () => {
    const range = await freeRange(3);
    const ports = allocator(range);
    await holdPort(range.start + 1);
    const { ports: pair } = await ports.acquire('web/0');
    expect(portsOf(pair).sort((a, b) => a - b)).toEqual([range.start, range.end]);
    await expectPlacementUnavailable(ports.acquire('web/1'), range.label);
  });

  test('released ports sit in quarantine, also across restarts, before another key may have them', async () => {
    let clock = 1_000_000;
    const stateDir = freshStateDir();
    const range = await freeRange(4);
    const options = { stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 30_000, now: () => clock };
    const ports = new PortAllocator(options);
    const released = (await ports.acquire('a/0')).ports;
    const kept = (await ports.acquire('b/0')).ports;
    await ports.release('a/0');
    expect(await ports.recorded('a/0')).toBeUndefined();

    // The only unheld ports are a/0's former pair, still in quarantine.
    await expectPlacementUnavailable(ports.acquire('c/0'), range.label);
    clock += 29_999;
    await expectPlacementUnavailable(new PortAllocator(options).acquire('c/0'), range.label);

    clock += 1;
    const afterQuarantine = await new PortAllocator(options).acquire('c/0');
    expect(portsOf(afterQuarantine.ports).sort((a, b) => a - b)).toEqual(portsOf(released).sort((a, b) => a - b));
    expect(portsOf(afterQuarantine.ports)).not.toContain(kept.public);
  });

  test('the key that released a pair may take it back during its quarantine', async () => {
    let clock = 0;
    const ports = allocator(await freeRange(30), { quarantineMs: 30_000, now: () => clock });
    const before = (await ports.acquire('web/0')).ports;
    await ports.release('web/0');
    clock += 1000;
    expect(await ports.acquire('web/0')).toEqual({ ports: before, reused: true });
  });

  test('release with a stale expected pair leaves the current record alone', async () => {
    const ports = allocator(await freeRange(20));
    const current = (await ports.acquire('web/0')).ports;
    await ports.release('web/0', { public: current.public + 100, internal: current.internal + 100 });
    expect(await ports.recorded('web/0')).toEqual(current);
  });

  test('a range with a single port is placement-unavailable, naming the range', async () => {
    const range = await freeRange(1);
    expect(range.label).toBe(`${range.start}-${range.start}`);
    await expectPlacementUnavailable(allocator(range).acquire('web/0'), range.label);
  });
});
