// Starts one Temporal dev server and one PostgreSQL for the whole run, and bundles the workflows
// once, so each test file only spawns its own API, worker and agent processes.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../embedded/postgres';
import { freePort } from '../../embedded/processes';
import { startTemporalDevServer } from '../../embedded/temporal-server';
import { TEST_ENV_VAR, TestEnv } from './env';

export default async function setup(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-test-'));
  const log = (line: string) => process.stderr.write(`[global-setup] ${line}\n`);
  const [temporal, postgres, bundle] = await Promise.all([
    // The Web UI too: the e2e tests open it in a browser (it costs the dev server little).
    Promise.all([freePort(), freePort()]).then(([port, uiPort]) => startTemporalDevServer({ port, uiPort, logFile: path.join(tmpDir, 'temporal.log'), log })),
    freePort().then((port) => startEmbeddedPostgres({ dataDir: path.join(tmpDir, 'postgres'), port, database: 'postgres', fsync: false, log })),
    bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: new DefaultLogger('WARN') }),
  ]);
  const workflowBundlePath = path.join(tmpDir, 'workflow-bundle.js');
  fs.writeFileSync(workflowBundlePath, bundle.code);
  const env: TestEnv = { temporalAddress: temporal.address, temporalUiUrl: temporal.uiUrl, postgresAdminUrl: postgres.url, postgresPid: postgres.pid, workflowBundlePath, tmpDir };
  const envFile = path.join(tmpDir, 'env.json');
  fs.writeFileSync(envFile, JSON.stringify(env));
  process.env[TEST_ENV_VAR] = envFile;
  (globalThis as Record<string, unknown>).__scalegateStop = async () => {
    await Promise.all([temporal.stop(), postgres.stop()]);
    fs.rmSync(tmpDir, { recursive: true, force: true });
    fs.rmSync(postgres.dataDir, { recursive: true, force: true }); // may live outside tmpDir (see scripts/postgres.ts)
  };
}
