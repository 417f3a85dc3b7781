// A component test (real esbuild, real node processes, the file system): the test stacks' entries
// are bundled with their packages, but the worker's bundle holds no copy of the Temporal SDK (its
// activities and workflows must see the SDK's own classes), and each launcher runs its bundle as
// node would, from a V8 code cache it writes on the first start and reuses after.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleStackEntries } from '../../harness/entry-bundles';

let dir: string;
let launchers: Record<string, string>;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scalegate-entry-bundles-'));
  launchers = await bundleStackEntries(dir);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The sources a bundle was built from, as its source map lists them. */
const sourcesOf = (entry: string): string[] => JSON.parse(fs.readFileSync(launchers[entry].replace(/\.launch\.js$/, '.js.map'), 'utf8')).sources;
const launch = (entry: string, args: string[]) => spawnSync(process.execPath, [launchers[entry], ...args], { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH } });
const cacheOf = (entry: string) => launchers[entry].replace(/\.launch\.js$/, '.js.v8-cache');

test('the agent and the API carry their packages; the worker leaves the whole Temporal SDK to node_modules', () => {
  const fromPackage = (sources: string[], name: string) => sources.some((source) => source.includes(`node_modules/${name}/`));
  expect(fromPackage(sourcesOf('agent/main.ts'), 'zod')).toBe(true);
  expect(fromPackage(sourcesOf('api/main.ts'), '@temporalio/client')).toBe(true);
  const worker = sourcesOf('workers/main.ts');
  expect(fromPackage(worker, 'pg')).toBe(true);
  expect(worker.filter((source) => source.includes('node_modules/@temporalio/'))).toEqual([]);
  // the native bridge stays outside every bundle
  for (const entry of Object.keys(launchers)) expect(fromPackage(sourcesOf(entry), '@temporalio/core-bridge')).toBe(false);
});

test('a launcher passes its arguments through, writes the code cache once, and replaces one V8 rejects', () => {
  expect(fs.existsSync(cacheOf('agent/main.ts'))).toBe(false);
  const first = launch('agent/main.ts', ['--no-such-option']);
  expect(first.status).toBe(1);
  expect(first.stderr).toContain("Unknown option '--no-such-option'");
  const written = fs.statSync(cacheOf('agent/main.ts'));
  expect(written.size).toBeGreaterThan(100_000);

  // accepted: the second start leaves the file as it was (a rejected one is written anew, under a new inode)
  expect(launch('agent/main.ts', ['--no-such-option']).stderr).toContain("Unknown option '--no-such-option'");
  expect(fs.statSync(cacheOf('agent/main.ts')).ino).toBe(written.ino);

  fs.writeFileSync(cacheOf('agent/main.ts'), 'not a code cache');
  expect(launch('agent/main.ts', ['--no-such-option']).status).toBe(1);
  expect(fs.statSync(cacheOf('agent/main.ts')).size).toBeGreaterThan(100_000);
  expect(fs.readdirSync(dir).filter((file) => file.includes('.v8-cache.'))).toEqual([]);
});

test('a bundled API and worker start up to their configuration check, reading the environment as unbundled', () => {
  const api = launch('api/main.ts', []);
  expect(api.status).toBe(1);
  expect(api.stderr).toContain('invalid API configuration: DATABASE_URL');
  const worker = launch('workers/main.ts', []);
  expect(worker.status).toBe(1);
  expect(worker.stderr).toContain('invalid worker configuration: DATABASE_URL');
});
