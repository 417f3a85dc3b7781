// `npm run record:histories`: records the workflow histories that test/workflow/replay.test.ts
// replays (test/workflow/histories/: a scenario whose commands changed is added as <name>.vN.json, no committed file is rewritten) on a throwaway Temporal dev server,
// which it stops again. The scenarios live in harness/histories/record-histories.ts. Re-record only for
// a deliberate, versioned workflow change (docs/workflows.md, "Replay histories").
// `npm run record:histories -- --only autoscaler [--only other]` records only the named scenarios.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { HISTORIES_DIR, recordHistories } from '../harness/histories/record-histories';
import { startTemporalOnFreePorts, type RunningTemporal } from '../embedded/temporal-server';

const say = (line: string) => console.error(`[record-histories] ${line}`);

async function main(): Promise<void> {
  // Workers log at INFO, and the scenarios' deliberate failures at WARN: keep the output to errors.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-histories-'));
  let temporal: RunningTemporal | null = null;
  const cleanUp = async () => {
    await temporal?.stop();
    temporal = null;
    fs.rmSync(tmpDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  }
  try {
    temporal = await startTemporalOnFreePorts({ logFile: path.join(tmpDir, 'temporal.log'), log: say });
    const only = process.argv.flatMap((arg, i) => (arg === '--only' && process.argv[i + 1] ? process.argv[i + 1].split(',') : []));
    const written = await recordHistories({ address: temporal.address, outDir: HISTORIES_DIR, versioned: true, log: say, ...(only.length ? { only } : {}) });
    say(`wrote ${written.length} histories to ${path.relative(process.cwd(), HISTORIES_DIR)}`);
  } finally {
    await cleanUp();
  }
}

main().then(
  () => process.exit(0), // the Temporal runtime keeps no reason to linger, but do not depend on it
  (error: unknown) => {
    say(`failed: ${(error as Error).stack ?? error}`);
    process.exit(1);
  },
);
