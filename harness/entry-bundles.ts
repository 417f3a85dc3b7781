// The test stacks' API, worker and agent processes, bundled once per run. A process started with
// `--import tsx` spends about 0.45 s of CPU resolving and loading its TypeScript (measured: the
// API's modules load in 0.30 s as one bundle, 0.63 s through tsx), and a test run starts a few
// hundred of them on two cores. npm start, the CLI and the npm-start tests keep tsx: they are what
// a user runs.
import { build, type Plugin } from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../embedded/processes';

/** The entries a test stack starts (paths under the repository, as spawnService takes them). */
export const STACK_ENTRIES = ['api/main.ts', 'workers/main.ts', 'agent/main.ts'] as const;

/**
 * Each source file keeps its own `__dirname` inside the bundle (store/migrate.ts finds its
 * migrations through it, embedded/processes.ts the repository root).
 */
const sourceDirname: Plugin = {
  name: 'source-dirname',
  setup(bundle) {
    bundle.onLoad({ filter: /\.ts$/ }, async (args) => ({
      contents: (await fs.promises.readFile(args.path, 'utf8')).replace(/\b__dirname\b/g, JSON.stringify(path.dirname(args.path))),
      loader: 'ts',
    }));
  },
};

/** Packages stay outside the bundle, required by their absolute path in the repository's node_modules (the bundle lives elsewhere). */
const packagesFromRepository: Plugin = {
  name: 'packages-from-repository',
  setup(bundle) {
    bundle.onResolve({ filter: /^[^./]/ }, (args) => ({ path: require.resolve(args.path, { paths: [args.resolveDir || ROOT] }), external: true }));
  },
};

/**
 * Bundles one script for node as the stack's entries are bundled (`entryPoint` a file, or `stdin`
 * source resolved from the repository root).
 */
export async function bundleForNode(options: { outfile: string; entryPoint?: string; stdin?: string }): Promise<void> {
  await build({
    ...(options.stdin !== undefined ? { stdin: { contents: options.stdin, resolveDir: ROOT, loader: 'ts' } } : { entryPoints: [options.entryPoint!] }),
    outfile: options.outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // a map beside the bundle for whoever debugs with --enable-source-maps; nothing loads it otherwise
    sourcemap: 'linked',
    plugins: [sourceDirname, packagesFromRepository],
    logLevel: 'error',
  });
}

/** Bundles every stack entry into `outDir`; answers entry → bundled script. */
export async function bundleStackEntries(outDir: string): Promise<Record<string, string>> {
  fs.mkdirSync(outDir, { recursive: true });
  const scripts: Record<string, string> = {};
  await Promise.all(STACK_ENTRIES.map(async (entry) => {
    const outfile = path.join(outDir, `${entry.replace(/\.ts$/, '').replace(/\//g, '-')}.js`);
    await bundleForNode({ entryPoint: path.join(ROOT, entry), outfile });
    scripts[entry] = outfile;
  }));
  return scripts;
}
