// The CLI's compiled form: cli/main.ts and what it imports, bundled by esbuild into
// dist/cli/main.js, so a command starts in node's own time instead of compiling TypeScript through
// tsx on every run (seconds on a small machine). The bundle is rebuilt when any source it was built
// from (or package-lock.json) is newer than it: an edited checkout never runs stale code. Where it
// cannot be built or written (a read-only install), the CLI runs from source through tsx.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const OUT_DIR = path.join(ROOT, 'dist', 'cli');
const BUNDLE = path.join(OUT_DIR, 'main.js');
/** the sources the bundle was built from (relative to ROOT) and when: what staleness is judged by */
const INPUTS = path.join(OUT_DIR, 'inputs.json');
const ENTRY = path.join(ROOT, 'cli', 'main.ts');

/** Is the bundle there and newer than every source it was built from? */
function isFresh() {
  let recorded;
  try {
    recorded = JSON.parse(fs.readFileSync(INPUTS, 'utf8'));
    if (!fs.existsSync(BUNDLE)) return false;
  } catch {
    return false;
  }
  for (const input of [...recorded.inputs, 'package-lock.json']) {
    let stat;
    try {
      stat = fs.statSync(path.join(ROOT, input));
    } catch {
      return false; // a source was moved or removed: build again
    }
    if (stat.mtimeMs > recorded.builtMs) return false;
  }
  return true;
}

/**
 * Builds the bundle. Concurrent builds (several commands started at once) each write their own
 * temporary files and rename them into place, so a reader sees a whole bundle, never a partial one.
 */
function build() {
  const esbuild = require('esbuild');
  const builtMs = Date.now();
  const temp = `${BUNDLE}.${process.pid}.tmp`;
  const result = esbuild.buildSync({
    entryPoints: [ENTRY], bundle: true, platform: 'node', target: 'node20', format: 'cjs', outfile: temp, metafile: true, logLevel: 'silent',
  });
  // the project's own sources; node_modules are judged by package-lock.json
  const inputs = Object.keys(result.metafile.inputs).filter((input) => !input.includes('node_modules/'))
    .map((input) => path.relative(ROOT, path.resolve(process.cwd(), input)));
  const inputsTemp = `${INPUTS}.${process.pid}.tmp`;
  fs.writeFileSync(inputsTemp, JSON.stringify({ builtMs, inputs }));
  fs.renameSync(temp, BUNDLE);
  fs.renameSync(inputsTemp, INPUTS);
}

/** The module to run: the fresh bundle (built first when stale), or null where it cannot be built here. */
function compiledCli() {
  if (process.env.SCALEGATE_CLI_FROM_SOURCE === '1') return null;
  if (isFresh()) return BUNDLE;
  try {
    fs.mkdirSync(OUT_DIR, { recursive: true });
    build();
    return BUNDLE;
  } catch {
    return null;
  }
}

module.exports = { BUNDLE, INPUTS, build, compiledCli, isFresh };

// `node cli/bundle.js`: build it now (the Dockerfile does, so the image's CLI starts compiled)
if (require.main === module) {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  build();
  console.log(`built ${path.relative(ROOT, BUNDLE)}`);
}
