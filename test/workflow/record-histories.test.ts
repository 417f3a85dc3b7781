// The recording scenarios, run on the shared test Temporal server against the current code: each
// must still end as its name says (the scenarios assert their outcomes: a refused scale-out is
// refused, a compensated one ran the replan child, ...), the recorder must still work, and each
// history it writes must have a committed counterpart in histories/ for replay.test.ts to replay.
import fs from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { testEnv } from '../../harness/env';
import { HISTORIES_DIR, recordHistories } from '../../harness/histories/record-histories';
import { readHistory, signatureHash, versionsOf } from '../../harness/histories/history-versions';

const env = testEnv();

beforeAll(() => {
  // Workers log every state change at INFO, the scenarios' deliberate failures at WARN.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
});

it('every scenario ends as named, and each of its histories is committed', async () => {
  const outDir = fs.mkdtempSync(path.join(env.tmpDir, 'histories-'));
  const written = await recordHistories({ address: env.temporalAddress, outDir, workflowBundle: { codePath: env.workflowBundlePath } });

  expect(written.length).toBeGreaterThan(0);
  expect(fs.readdirSync(outDir).sort()).toEqual(written.map((name) => `${name}.json`).sort());
  // Each scenario's commands are those of its newest committed version: a new scenario, or a
  // changed one, needs `npm run record:histories` (which adds a version) and the file committed.
  const behind = written.filter((name) => {
    const versions = versionsOf(HISTORIES_DIR, name);
    const newest = versions[versions.length - 1];
    return !newest || signatureHash(readHistory(HISTORIES_DIR, newest)) !== signatureHash(readHistory(outDir, `${name}.json`));
  });
  expect(behind).toEqual([]);
});
