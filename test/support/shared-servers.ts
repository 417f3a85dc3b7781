// One Temporal dev server (with its Web UI), one PostgreSQL and one workflow bundle, announced to
// test/support/stack.ts through the TestEnv file. The jest global setup and the benchmarks that
// run a real stack both start theirs here.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../embedded/postgres';
import { freePort } from '../../embedded/processes';
import { startTemporalDevServer, type RunningTemporal } from '../../embedded/temporal-server';
import { TEST_ENV_VAR, TestEnv } from './env';

export interface SharedServers {
  env: TestEnv;
  /** the Temporal dev server (a chaos run pauses it by its pid) */
  temporal: RunningTemporal;
  /** stops both servers and removes their folders */
  stop(): Promise<void>;
}

export async function startSharedServers(options: { prefix: string; log?: (line: string) => void }): Promise<SharedServers> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.prefix}-`));
  const [temporal, postgres, bundle] = await Promise.all([
    // The Web UI too: the e2e tests open it in a browser (it costs the dev server little).
    Promise.all([freePort(), freePort()]).then(([port, uiPort]) => startTemporalDevServer({ port, uiPort, logFile: path.join(tmpDir, 'temporal.log'), log: options.log })),
    // Throwaway data: durability off for speed (npm start keeps fsync on).
    freePort().then((port) => startEmbeddedPostgres({ dataDir: path.join(tmpDir, 'postgres'), port, database: 'postgres', fsync: false, log: options.log })),
    bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: new DefaultLogger('WARN') }),
  ]);
  const workflowBundlePath = path.join(tmpDir, 'workflow-bundle.js');
  fs.writeFileSync(workflowBundlePath, bundle.code);
  const env: TestEnv = { temporalAddress: temporal.address, temporalUiUrl: temporal.uiUrl, postgresAdminUrl: postgres.url, postgresPid: postgres.pid, workflowBundlePath, tmpDir };
  const envFile = path.join(tmpDir, 'env.json');
  fs.writeFileSync(envFile, JSON.stringify(env));
  process.env[TEST_ENV_VAR] = envFile;
  return {
    env,
    temporal,
    async stop() {
      await Promise.all([temporal.stop(), postgres.stop()]);
      fs.rmSync(tmpDir, { recursive: true, force: true });
      fs.rmSync(postgres.dataDir, { recursive: true, force: true }); // may live outside tmpDir (see embedded/postgres.ts)
    },
  };
}
