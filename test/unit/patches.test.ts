// workflows/patches.ts is the one register of patch ids (issue 36 item 2): workflows ask about a
// patch only through its askPatch(), naming one of its constants; each constant has one entry with
// its day and its change (and the day it was deprecated); no entry is left that no workflow asks about.
import fs from 'node:fs';
import path from 'node:path';
import * as patches from '../../workflows/patches';

const WORKFLOWS = path.join(__dirname, '../../workflows');
const sources = fs.readdirSync(WORKFLOWS).filter((f) => f.endsWith('.ts') && f !== 'patches.ts')
  .map((f) => ({ file: f, text: fs.readFileSync(path.join(WORKFLOWS, f), 'utf8') }));
const calls = sources.flatMap(({ file, text }) => [...text.matchAll(/\baskPatch\(([^)]*)\)/g)].map((m) => ({ file, argument: m[1].trim() })));
const constants = Object.entries(patches).filter(([name, value]) => /^[A-Z_]+$/.test(name) && typeof value === 'string') as [string, string][];

test('workflows ask through askPatch() alone, each call naming a constant of workflows/patches.ts', () => {
  expect(sources.filter(({ text }) => /\b(?:patched|deprecatePatch)\(/.test(text)).map(({ file }) => file)).toEqual([]);
  // judgedSincePatch(patchId, …) passes its argument through: its callers name the constants
  const named = new Set(constants.map(([name]) => name));
  expect(calls.filter((c) => c.argument !== 'patchId' && !named.has(c.argument)).map((c) => `${c.file}: ${c.argument}`)).toEqual([]);
  expect(calls.length).toBeGreaterThan(constants.length - 1);
});

test('each constant has one entry in PATCH_LOG, with its day and its change; ids are distinct; days in order', () => {
  const ids = patches.PATCH_LOG.map((entry) => entry.id);
  expect(new Set(ids).size).toBe(ids.length);
  expect([...constants.map(([, id]) => id)].sort()).toEqual([...ids].sort());
  for (const entry of patches.PATCH_LOG) {
    expect(entry.since).toMatch(/^2\d{3}-\d{2}-\d{2}$/);
    expect(entry.change.length).toBeGreaterThan(20);
    if (entry.deprecatedSince !== undefined) expect(entry.deprecatedSince >= entry.since).toBe(true);
  }
  const days = patches.PATCH_LOG.map((entry) => entry.since);
  expect(days).toEqual([...days].sort());
});

test('every constant is asked about by some workflow (a patch removed leaves the register with its calls)', () => {
  const asked = (name: string) => sources.some(({ text }) => new RegExp(`\\b${name}\\b`).test(text));
  expect(constants.filter(([name]) => !asked(name)).map(([name]) => name)).toEqual([]);
});
