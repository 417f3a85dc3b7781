// The busybox image `npm start` serves is built once per state folder (embedded/container-engine.ts
// ensureBusyboxImage): a registry that holds the tag is asked for its digest and nothing is built;
// a registry without it gets the image built and pushed. On the run's real engine and registry.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../agent/drivers/engine';
import { BUSYBOX_HTTPD, BUSYBOX_WEB, ensureBusyboxImage, type RunningEngine, type RunningRegistry } from '../../embedded/container-engine';
import { testEnv } from '../../harness/env';

const env = testEnv();
let workDir: string;

beforeAll(() => {
  if (!env.containers) throw new Error(`no container engine for this run: ${env.containersOff}`);
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-busybox-'));
});
afterAll(() => {
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

/** The run's engine and registry, as the ones npm start started (stopped by the run, not here). */
function shared(): { engine: RunningEngine; registry: RunningRegistry } {
  const { dockerHost, registry } = env.containers!;
  const socketPath = dockerHost.slice('unix://'.length);
  return {
    engine: { socketPath, address: dockerHost, engine: createEngine(socketPath), stop: async () => {} },
    registry: { address: registry, stop: async () => {} },
  };
}

it('pins the tag its registry holds without building it, and builds and pushes a tag the registry lacks, once', async () => {
  // the run's test image is scalegate/web:v1, pushed by the global setup
  expect(await ensureBusyboxImage({ ...shared(), ...BUSYBOX_WEB, workDir })).toEqual({ pinned: env.containers!.image, built: false });

  const fresh = { repository: `scalegate/ensure-${process.pid}`, tag: 'v1', files: { 'www/index.html': 'fresh\n' } };
  const first = await ensureBusyboxImage({ ...shared(), ...fresh, workDir });
  expect(first).toEqual({ pinned: expect.stringMatching(new RegExp(`^${env.containers!.registry}/scalegate/ensure-${process.pid}@sha256:[a-f0-9]{64}$`)), built: true });
  expect(await ensureBusyboxImage({ ...shared(), ...fresh, workDir })).toEqual({ pinned: first.pinned, built: false });
  // the build's root folder does not stay behind
  expect(fs.readdirSync(workDir)).toEqual([]);
});

it('serves with BUSYBOX_HTTPD, which ends at the engine\'s SIGTERM (exit 0) instead of waiting out the grace for a SIGKILL (137)', async () => {
  const { engine } = shared();
  const image = env.containers!.image;
  if (!(await engine.engine.imageId(image))) await engine.engine.pull(image);
  const id = await engine.engine.create({
    name: `scalegate-httpd-term-${process.pid}`, image, command: BUSYBOX_HTTPD, env: {}, labels: { 'io.scalegate.test': 'busybox-image' }, publish: {}, network: 'bridge',
  });
  try {
    await engine.engine.start(id);
    expect((await engine.engine.inspect(id))?.State.Running).toBe(true);
    // a grace far longer than the test: only a SIGTERM honoured ends it with 0
    await engine.engine.stop(id, 120);
    expect((await engine.engine.inspect(id))?.State).toMatchObject({ Running: false, ExitCode: 0 });
  } finally {
    await engine.engine.remove(id).catch(() => undefined);
  }
});
