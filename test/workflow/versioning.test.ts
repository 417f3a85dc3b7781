// Committed histories are versioned, never rewritten (history-versions.ts): each is pinned by its
// command signature, and a changed scenario adds its new history as <name>.vN.json beside the old
// ones, carrying a patched() id the one before lacks. Pure file checks: no server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HISTORIES_DIR } from '../../harness/histories/record-histories';
import { historyFiles, MANIFEST_FILE, patchIds, readHistory, versioningProblems, versionsOf } from '../../harness/histories/history-versions';

describe('committed histories', () => {
  it('are each pinned, unchanged, and every kept version is followed by a new patched() id', () => {
    expect(historyFiles(HISTORIES_DIR).length).toBeGreaterThan(20);
    expect(versioningProblems(HISTORIES_DIR)).toEqual([]);
  });

  it('the workflows changed for issue 18 keep their old runs: each new version records ledger-after-compensation', () => {
    for (const name of ['scale-out-aborted', 'scale-out-regression', 'scale-in-compensated', 'apply-plan-compensated']) {
      const versions = versionsOf(HISTORIES_DIR, name);
      expect(versions).toContain(`${name}.json`); // the committed file, kept as committed
      expect(patchIds(readHistory(HISTORIES_DIR, versions[0]))).not.toContain('ledger-after-compensation');
      expect(patchIds(readHistory(HISTORIES_DIR, versions[versions.length - 1]))).toContain('ledger-after-compensation');
    }
  });
});

describe('the versioning check has teeth', () => {
  const copy = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'histories-'));
    for (const file of [...historyFiles(HISTORIES_DIR), MANIFEST_FILE]) fs.copyFileSync(path.join(HISTORIES_DIR, file), path.join(dir, file));
    return dir;
  };

  it('fails when a committed history is re-recorded in place', () => {
    const dir = copy();
    fs.copyFileSync(path.join(dir, 'scale-out-aborted.v2.json'), path.join(dir, 'scale-out-aborted.json'));
    expect(versioningProblems(dir).join('\n')).toMatch(/scale-out-aborted\.json changed its commands/);
  });

  it('fails when the old version is dropped, or kept without a new patched() id', () => {
    const dropped = copy();
    fs.rmSync(path.join(dropped, 'scale-in-compensated.v2.json'));
    expect(versioningProblems(dropped).join('\n')).toMatch(/scale-in-compensated\.v2\.json is pinned but gone/);

    const unpatched = copy();
    const manifest = JSON.parse(fs.readFileSync(path.join(unpatched, MANIFEST_FILE), 'utf8'));
    // a "new version" that is only a different scenario's commands, with no patch of its own
    fs.copyFileSync(path.join(unpatched, 'scale-out-refused.json'), path.join(unpatched, 'scale-out-refused.v2.json'));
    manifest['scale-out-refused.v2.json'] = manifest['scale-out-refused.json'];
    fs.writeFileSync(path.join(unpatched, MANIFEST_FILE), JSON.stringify(manifest));
    expect(versioningProblems(unpatched).join('\n')).toMatch(/scale-out-refused\.v2\.json changed the commands of scale-out-refused\.json without a new patched\(\) id/);
  });
});
