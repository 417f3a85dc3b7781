// One Temporal dev server (with its Web UI), one PostgreSQL, one workflow bundle and, when asked,
// one Kafka broker, announced to harness/stack.ts through the TestEnv file. The jest global
// setup and the benchmarks that run a real stack both start theirs here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BUSYBOX_WEB, buildBusyboxImage, containerSupportMissing, startContainers as startEngineAndRegistry, type RunningEngine, type RunningRegistry } from '../embedded/container-engine';
import { startKafkaIfAvailable, type RunningKafka } from '../embedded/kafka';
import { startEmbeddedPostgres } from '../embedded/postgres';
import { freePort } from '../embedded/processes';
import { startTemporalOnFreePorts, type RunningTemporal } from '../embedded/temporal-server';
import { cachedWorkflowBundle } from '../embedded/workflow-bundle-cache';
import { bundleStackEntries } from './entry-bundles';
import { TEST_ENV_VAR, TestEnv } from './env';

export interface SharedServers {
  env: TestEnv;
  /** the Temporal dev server (a chaos run pauses it by its pid) */
  temporal: RunningTemporal;
  /** the Kafka broker, when one was asked for and can run here */
  kafka: RunningKafka | null;
  /** the Docker engine and image registry, when asked for and they can run here */
  containers: RunningContainers | null;
  /** stops the servers and removes their folders */
  stop(): Promise<void>;
}

interface RunningContainers {
  engine: RunningEngine;
  registry: RunningRegistry;
  /** the test image, pinned: a busybox root that serves /www over httpd */
  image: string;
  stop(): Promise<void>;
}

/** One Docker engine, one registry and the test image for the whole run (or why there are none). */
async function startContainers(dir: string, log?: (line: string) => void): Promise<{ containers: RunningContainers | null; off: string | null }> {
  const missing = containerSupportMissing();
  if (missing) return { containers: null, off: missing };
  const { engine, registry, stop } = await startEngineAndRegistry({ dir, log });
  try {
    const image = await buildBusyboxImage({ engine, registry: registry.address, ...BUSYBOX_WEB, workDir: dir });
    return { containers: { engine, registry, image, stop }, off: null };
  } catch (error) {
    await stop();
    throw error;
  }
}

export async function startSharedServers(options: {
  prefix: string;
  /** also a Kafka broker (the jest global setup asks for one; it needs Java 17) */
  kafka?: boolean;
  /** also a Docker engine and an image registry (the container driver's tests) */
  containers?: boolean;
  /**
   * The workflow bundle and stack entries a run already made (the jest run's, for servers a test
   * starts of its own), taken as they are instead of bundled again: the same code, without the
   * 5-7 s of CPU that webpack and esbuild take for it.
   */
  bundles?: Pick<TestEnv, 'workflowBundlePath' | 'entryScripts'>;
  log?: (line: string) => void;
}): Promise<SharedServers> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.prefix}-`));
  // In parallel; whatever started is stopped again if another part fails.
  const started: (() => Promise<void>)[] = [];
  const keep = <T extends { stop(): Promise<void> } | undefined>(server: T): T => {
    if (server) started.push(server.stop);
    return server;
  };
  const parts = [
    // The Web UI too: the e2e tests open it in a browser (it costs the dev server little).
    startTemporalOnFreePorts({ ui: true, logFile: path.join(tmpDir, 'temporal.log'), log: options.log }).then(keep),
    // Throwaway data: durability off for speed (npm start keeps fsync on).
    freePort().then((port) => startEmbeddedPostgres({ dataDir: path.join(tmpDir, 'postgres'), port, database: 'postgres', fsync: false, log: options.log })).then(keep),
    options.kafka
      ? freePort().then((port) => startKafkaIfAvailable({ port, dataDir: path.join(tmpDir, 'kafka'), logFile: path.join(tmpDir, 'kafka.log'), log: options.log }))
        .then((result) => ({ kafka: keep(result.kafka) ?? null, off: result.off ?? null }))
      : Promise.resolve({ kafka: null, off: 'not asked for' }),
    options.containers
      ? startContainers(path.join(tmpDir, 'containers'), options.log).then((result) => ({ containers: keep(result.containers ?? undefined) ?? null, off: result.off }))
      : Promise.resolve({ containers: null, off: 'not asked for' }),
    // The bundle npm start's workers load too (the npm-start tests start from it, not bundling again).
    options.bundles ? Promise.resolve(options.bundles.workflowBundlePath) : cachedWorkflowBundle({ log: options.log }),
    options.bundles ? Promise.resolve(options.bundles.entryScripts) : bundleStackEntries(path.join(tmpDir, 'entries')),
  ] as const;
  const failed = (await Promise.allSettled(parts)).find((result) => result.status === 'rejected');
  if (failed) {
    await Promise.all(started.map((stop) => stop()));
    fs.rmSync(tmpDir, { recursive: true, force: true });
    throw failed.reason;
  }
  const [temporal, postgres, { kafka, off: kafkaOff }, { containers, off: containersOff }, workflowBundlePath, entryScripts] = await Promise.all(parts);
  if (options.kafka && kafkaOff) options.log?.(`no Kafka broker: ${kafkaOff}`);
  if (options.containers && containersOff) options.log?.(`no container engine: ${containersOff}`);
  const env: TestEnv = {
    temporalAddress: temporal.address, temporalUiUrl: temporal.uiUrl, postgresAdminUrl: postgres.url, postgresPid: postgres.pid,
    kafkaBrokers: kafka?.brokers ?? null, kafkaOff, workflowBundlePath, entryScripts, tmpDir,
    containers: containers ? { dockerHost: containers.engine.address, registry: containers.registry.address, image: containers.image } : null,
    containersOff,
  };
  const envFile = path.join(tmpDir, 'env.json');
  fs.writeFileSync(envFile, JSON.stringify(env));
  process.env[TEST_ENV_VAR] = envFile;
  return {
    env,
    temporal,
    kafka,
    containers,
    async stop() {
      await Promise.all([temporal.stop(), postgres.stop(), kafka?.stop(), containers?.stop()]);
      fs.rmSync(tmpDir, { recursive: true, force: true });
      fs.rmSync(postgres.dataDir, { recursive: true, force: true }); // may live outside tmpDir (see embedded/postgres.ts)
    },
  };
}
