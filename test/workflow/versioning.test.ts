// Committed histories are versioned, never rewritten (history-versions.ts): each is pinned by its
// command signature, and a changed scenario adds its new history as <name>.vN.json beside the old
// ones, carrying a patched() id the one before lacks. Pure file checks: no server.
import { execFileSync } from 'node:child_process';
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

// The manifest alone cannot catch a history re-recorded in place together with its pin (both files
// rewritten in one commit): git can. Each history's pin must still be the one it was committed with.
// A shallow clone sees every file added in its one commit, against the pins of that commit: it passes.
describe('a committed pin never changes (git history)', () => {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: HISTORIES_DIR, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  /**
   * Rewritten before any main that held them landed, and kept rewritten with the reason: the
   * recordings 50ed89c and 0bf83ed made carried a new decision under the old id
   * rescale-joins-ended-replan, which the earlier recording of rescale-operator-joins-ended-replan
   * holds with the old decision; no code replays both, so 64eec28 moved the new decision under
   * rescale-joins-only-its-window and recorded this scenario under it.
   */
  const REWRITTEN_BEFORE_LANDING: Record<string, string> = {
    'rescale-operator-replans-after-earlier-replan.json': '64eec28: recorded under rescale-joins-only-its-window; its earlier recordings (50ed89c, 0bf83ed) never landed',
  };

  it('each history keeps the pin of the commit that added it', () => {
    const root = git('rev-parse', '--show-toplevel').trim();
    const dir = path.relative(root, HISTORIES_DIR);
    // the commit that added each file: newest first, so the last one seen is the oldest
    const addedBy = new Map<string, string>();
    let commit = '';
    for (const line of git('log', '--format=C %H', '--diff-filter=A', '--name-only', '--', '.').split('\n')) {
      if (line.startsWith('C ')) commit = line.slice(2);
      else if (line.endsWith('.json')) addedBy.set(path.basename(line), commit);
    }
    const manifestAt = new Map<string, Record<string, string>>();
    const pinAt = (sha: string, file: string): string | undefined => {
      if (!manifestAt.has(sha)) {
        let manifest: Record<string, string> = {};
        try {
          manifest = JSON.parse(git('show', `${sha}:${dir}/${MANIFEST_FILE}`));
        } catch {
          // no manifest yet at that commit: the file was pinned later
        }
        manifestAt.set(sha, manifest);
      }
      return manifestAt.get(sha)![file];
    };
    const current = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, MANIFEST_FILE), 'utf8')) as Record<string, string>;
    const rewritten = Object.keys(current).filter((file) => {
      const sha = addedBy.get(file);
      const first = sha ? pinAt(sha, file) : undefined;
      return first !== undefined && first !== current[file] && !(file in REWRITTEN_BEFORE_LANDING);
    });
    expect(addedBy.size).toBeGreaterThan(20);
    expect(rewritten).toEqual([]);
  });
});
