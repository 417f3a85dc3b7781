// One text per JSON value, whatever order its object keys came in: what a request's body is
// compared by (an Idempotency-Key is bound to its body, api/operations.ts). No project imports.
import crypto from 'node:crypto';

/**
 * JSON with every object's keys sorted (by UTF-16 code unit, as Array#sort does) and no white
 * space; `undefined` members are left out and a top-level `undefined` is `null`, as JSON.stringify
 * leaves them out of objects. Arrays keep their order: it means something.
 */
export function canonicalJson(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** sha256 (hex) of a value's canonical JSON. */
export const canonicalSha256 = (value: unknown): string => crypto.createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
