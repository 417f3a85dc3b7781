// A component test (one real part: the file system, and the cache the run's shared servers filled):
// the workflow bundle is built once per source tree. Its key moves with any source file and the
// lockfile, and not with tests or docs; the run's shared servers bundled into the cache, so asking
// again (as npm start does) answers that file without bundling.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cachedWorkflowBundle, workflowSourceKey } from '../../embedded/workflow-bundle-cache';
import { testEnv } from '../../harness/env';

let tree: string;
const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(tree, file)), { recursive: true });
  fs.writeFileSync(path.join(tree, file), text);
};

beforeEach(() => {
  tree = fs.mkdtempSync(path.join(os.tmpdir(), 'bundle-key-'));
  write('workflows/scale-out.ts', 'export const a = 1;\n');
  write('protocol/inputs.ts', 'export const b = 2;\n');
  write('package-lock.json', '{"lockfileVersion":3}\n');
});
afterEach(() => fs.rmSync(tree, { recursive: true, force: true }));

test('the key moves with a source file, a new source file and the lockfile; not with tests, docs or benches', () => {
  const first = workflowSourceKey(tree);
  expect(workflowSourceKey(tree)).toBe(first);
  write('test/unit/x.test.ts', 'test("x", () => {});\n');
  write('docs/workflows.md', '# notes\n');
  write('bench/fleet.ts', 'export {};\n');
  expect(workflowSourceKey(tree)).toBe(first);

  write('protocol/inputs.ts', 'export const b = 3;\n');
  const edited = workflowSourceKey(tree);
  expect(edited).not.toBe(first);
  write('domain/new-rule.ts', 'export const c = 4;\n');
  const added = workflowSourceKey(tree);
  expect(added).not.toBe(edited);
  write('package-lock.json', '{"lockfileVersion":3,"packages":{}}\n');
  expect(workflowSourceKey(tree)).not.toBe(added);
});

test('the run bundled into the cache once: asked again, the same file answers and nothing is bundled', async () => {
  const said: string[] = [];
  const file = await cachedWorkflowBundle({ log: (line) => said.push(line) });
  expect(file).toBe(testEnv().workflowBundlePath);
  expect(said).toEqual([]);
  expect(fs.readFileSync(file, 'utf8')).toContain('globalThis.__webpack_module_cache__');
});
