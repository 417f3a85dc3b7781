// The workflow bundle npm start's workers and the test servers load, built once per source tree and
// kept in scalegate's cache (~/.cache/scalegate/workflow-bundles). Bundling costs about 3 s of CPU
// (webpack), and every worker that bundles for itself pays it again: npm start with two workers
// bundled twice, side by side, and a test run three times more (its shared servers, then each npm
// start it tries). Keyed by every source file outside test/ and by the lockfile, so any change
// that could reach the bundle builds a new one; an unchanged tree starts from the cached file.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflows } from '../workers/workflow-bundle';
import { ROOT } from './processes';
import { cacheRoot } from './temporal-cli';

/** Folders of the repository that hold no code the bundle can import. */
const NOT_SOURCE = new Set(['node_modules', 'test', 'docs', 'bench', 'dist']);
/** Bundles kept beside the newest: older ones are removed as new ones are written. */
const KEPT = 4;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!NOT_SOURCE.has(entry.name) && !entry.name.startsWith('.')) sourceFiles(path.join(dir, entry.name), out);
    } else if (/\.(ts|js|json)$/.test(entry.name)) {
      out.push(path.join(dir, entry.name));
    }
  }
  return out;
}

/** What the bundle is built from: each source file's path and content, the lockfile, and node's version. */
export function workflowSourceKey(root = ROOT): string {
  const hash = crypto.createHash('sha256').update(`node ${process.version}\n`);
  for (const file of sourceFiles(root).sort()) {
    hash.update(`${path.relative(root, file)}\n`).update(fs.readFileSync(file)).update('\n');
  }
  return hash.digest('hex').slice(0, 24);
}

/**
 * The path of the workflow bundle for the current source tree: the cached one, else bundled now
 * and written there (to a file of its own, then renamed: a reader never sees half a bundle, and two
 * writers at once both end with a whole one).
 */
export async function cachedWorkflowBundle(options: { dir?: string; log?: (line: string) => void } = {}): Promise<string> {
  const dir = options.dir ?? path.join(cacheRoot(), 'workflow-bundles');
  const file = path.join(dir, `workflows-${workflowSourceKey()}.js`);
  if (fs.existsSync(file)) return file;
  // where it will be kept first: a cache that cannot hold it fails before 3 s of bundling
  fs.mkdirSync(dir, { recursive: true });
  options.log?.('bundling the workflows (once for this source tree)');
  const { code } = await bundleWorkflows({ level: 'ERROR' });
  const partial = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
  fs.writeFileSync(partial, code);
  fs.renameSync(partial, file);
  removeOldBundles(dir, file);
  return file;
}

function removeOldBundles(dir: string, newest: string): void {
  const bundles = fs.readdirSync(dir).filter((name) => /^workflows-[0-9a-f]+\.js$/.test(name)).map((name) => path.join(dir, name))
    .filter((bundle) => bundle !== newest)
    .map((bundle) => ({ bundle, mtime: fs.statSync(bundle, { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { bundle } of bundles.slice(KEPT - 1)) fs.rmSync(bundle, { force: true });
}
