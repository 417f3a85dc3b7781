// agent/drivers/proc.ts's resource readings against real processes: a busy process uses more CPU
// than an idle one between two samples, the first sample has no figure yet, and resident memory
// is read from /proc. (Relative checks only: the machine's load sets the absolute figures.)
import { spawn, type ChildProcess } from 'node:child_process';
import { CpuSampler, readStat, residentBytes } from '../../agent/drivers/proc';
import { setTimeout as sleep } from 'node:timers/promises';

const children: ChildProcess[] = [];
const run = (code: string) => {
  const child = spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
  children.push(child);
  return child.pid!;
};
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

it('a busy process shows more CPU than an idle one; the first sample answers null; RSS is read', async () => {
  const busy = run('for (;;) {}');
  const idle = run('setInterval(() => {}, 60_000)');
  const samplers = { busy: new CpuSampler(100), idle: new CpuSampler(100) };
  expect([samplers.busy.sample(busy), samplers.idle.sample(idle)]).toEqual([null, null]);
  // CPU accrues in clock ticks of 10 ms: wait until the busy one has used some, by its own counter.
  const startTicks = readStat(busy)!.cpuTicks;
  const deadline = Date.now() + 30_000;
  while (readStat(busy)!.cpuTicks < startTicks + 20 && Date.now() < deadline) await sleep(50);
  const [busyPercent, idlePercent] = [samplers.busy.sample(busy), samplers.idle.sample(idle)];
  expect(busyPercent).toBeGreaterThan(0);
  expect(idlePercent).not.toBeNull();
  expect(busyPercent!).toBeGreaterThan(idlePercent!);
  // a read sooner than the interval answers the last figure
  expect(samplers.busy.sample(busy, Date.now() - 1)).toBe(busyPercent);
  expect(residentBytes(idle)).toBeGreaterThan(1024 * 1024);
  expect(residentBytes(999_999_999)).toBeNull();
});
