// Versioning of the committed histories (docs/workflows.md, "Replay histories"): a committed history
// is never rewritten. A deliberate workflow change that alters a recorded scenario's commands is
// added as a new version `<name>.vN.json` beside every earlier one, and it must carry a patched() id
// the one before it lacks (so the runs of the old code still replay down their old path).
// `manifest.json` pins each file's command signature; versioning.test.ts checks all of it, and
// `npm run record:histories` adds versions and pins them as it records.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface HistoryJson {
  events: Array<Record<string, any>>;
}

export const MANIFEST_FILE = 'manifest.json';

/** Events that come from the workflow's own commands (plus its end), as "TYPE:detail" strings. */
export function commandSignature(history: HistoryJson): string[] {
  const out: string[] = [];
  for (const event of history.events) {
    const type = String(event.eventType).replace(/^EVENT_TYPE_/, '');
    switch (type) {
      case 'ACTIVITY_TASK_SCHEDULED':
        out.push(`${type}:${event.activityTaskScheduledEventAttributes.activityType.name}`);
        break;
      case 'START_CHILD_WORKFLOW_EXECUTION_INITIATED':
        out.push(`${type}:${event.startChildWorkflowExecutionInitiatedEventAttributes.workflowType.name}`);
        break;
      case 'MARKER_RECORDED':
        out.push(`${type}:${patchIdOf(event) ?? event.markerRecordedEventAttributes.markerName}`);
        break;
      case 'TIMER_STARTED':
      case 'TIMER_CANCELED':
      case 'ACTIVITY_TASK_CANCEL_REQUESTED':
      case 'REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED':
      case 'SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED':
      case 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES':
      case 'WORKFLOW_PROPERTIES_MODIFIED':
      case 'WORKFLOW_EXECUTION_COMPLETED':
      case 'WORKFLOW_EXECUTION_FAILED':
      case 'WORKFLOW_EXECUTION_CANCELED':
      case 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW':
        out.push(type);
        break;
      default:
        break;
    }
  }
  return out;
}

export const signatureHash = (history: HistoryJson) => crypto.createHash('sha256').update(commandSignature(history).join('\n')).digest('hex').slice(0, 16);

function patchIdOf(event: Record<string, any>): string | null {
  const attributes = event.markerRecordedEventAttributes;
  if (attributes?.markerName !== 'core_patch') return null;
  const payload = (attributes.details?.['patch-data'] ?? attributes.details?.patch_data)?.payloads?.[0]?.data;
  if (!payload) return null;
  try {
    return String(JSON.parse(Buffer.from(payload, 'base64').toString('utf8')).id);
  } catch {
    return null;
  }
}

/** The patched() ids a history recorded. */
export const patchIds = (history: HistoryJson): string[] => history.events.map(patchIdOf).filter((id): id is string => id !== null);

/** "scale-out.v2.json" → { name: "scale-out", version: 2 }; "scale-out.json" → version null (the first recording). */
export function parseHistoryFile(file: string): { name: string; version: number | null } {
  const match = /^(.*?)(?:\.v(\d+))?\.json$/.exec(file);
  if (!match) throw new Error(`${file} is not a history file name`);
  return { name: match[1], version: match[2] ? Number(match[2]) : null };
}

export const historyFiles = (dir: string) =>
  fs.readdirSync(dir).filter((f) => f.endsWith('.json') && f !== MANIFEST_FILE).sort();

export const readHistory = (dir: string, file: string): HistoryJson => JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));

/**
 * The committed versions of scenario `name`, oldest first. Each version adds a patched() id to the
 * one before, so they are ordered by how many they carry (then by file name).
 */
export function versionsOf(dir: string, name: string): string[] {
  const files = historyFiles(dir).filter((f) => parseHistoryFile(f).name === name);
  const patches = Object.fromEntries(files.map((f) => [f, patchIds(readHistory(dir, f)).length]));
  const number = (f: string) => parseHistoryFile(f).version ?? 1;
  return files.sort((a, b) => patches[a] - patches[b] || number(a) - number(b));
}

export function readManifest(dir: string): Record<string, string> {
  const file = path.join(dir, MANIFEST_FILE);
  return fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
}

export function writeManifest(dir: string, manifest: Record<string, string>): void {
  const sorted = Object.fromEntries(Object.entries(manifest).sort(([a], [b]) => a.localeCompare(b)));
  fs.writeFileSync(path.join(dir, MANIFEST_FILE), `${JSON.stringify(sorted, null, 2)}\n`);
}

/**
 * Puts a freshly recorded history in `dir` without touching any committed one: commands that a
 * committed version already has leave everything as it is; new commands are added as the next
 * `<name>.vN.json` (`<name>.json` for a new scenario), pinned in the manifest. Answers what happened.
 */
export function placeRecorded(dir: string, name: string, text: string): 'new' | 'unchanged' | 'added' {
  const fresh = JSON.parse(text) as HistoryJson;
  const versions = versionsOf(dir, name);
  if (versions.some((f) => signatureHash(readHistory(dir, f)) === signatureHash(fresh))) return 'unchanged';
  const next = Math.max(0, ...versions.map((f) => parseHistoryFile(f).version ?? 1)) + 1;
  const file = next === 1 ? `${name}.json` : `${name}.v${next}.json`;
  fs.writeFileSync(path.join(dir, `${file}.tmp`), text);
  fs.renameSync(path.join(dir, `${file}.tmp`), path.join(dir, file));
  writeManifest(dir, { ...readManifest(dir), [file]: signatureHash(fresh) });
  return next === 1 ? 'new' : 'added';
}

/** What breaks the versioning rules in `dir` (empty: none). */
export function versioningProblems(dir: string): string[] {
  const problems: string[] = [];
  const manifest = readManifest(dir);
  const files = historyFiles(dir);
  for (const file of files) {
    const pinned = manifest[file];
    const actual = signatureHash(readHistory(dir, file));
    if (!pinned) problems.push(`${file} is not pinned in ${MANIFEST_FILE}: record it with npm run record:histories`);
    else if (pinned !== actual) problems.push(`${file} changed its commands (pinned ${pinned}, now ${actual}): committed histories are never rewritten; add the change as a new version with a new patched() id`);
  }
  for (const file of Object.keys(manifest)) if (!files.includes(file)) problems.push(`${file} is pinned but gone: a committed history is kept`);
  for (const name of new Set(files.map((f) => parseHistoryFile(f).name))) {
    const chain = versionsOf(dir, name);
    for (let i = 1; i < chain.length; i++) {
      const older = new Set(patchIds(readHistory(dir, chain[i - 1])));
      const added = patchIds(readHistory(dir, chain[i])).filter((id) => !older.has(id));
      if (added.length === 0) problems.push(`${chain[i]} changed the commands of ${chain[i - 1]} without a new patched() id`);
    }
  }
  return problems;
}
