// How the CLI prints answers for a person: aligned tables and key/value blocks. `--json` skips all
// of this and prints the API's answer as it came.

export type Cell = string | number | boolean | null | undefined;

const text = (cell: Cell): string => (cell === null || cell === undefined || cell === '' ? '-' : String(cell));

/** An aligned table: upper-case headers, two spaces between columns, `-` for an empty cell. */
export function table(headers: string[], rows: Cell[][]): string {
  if (rows.length === 0) return '(none)';
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((row) => row.map(text))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  return cells.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd()).join('\n');
}

/** `key: value` lines, keys aligned; entries whose value is undefined are left out. */
export function fields(entries: [string, Cell][]): string {
  const shown = entries.filter(([, value]) => value !== undefined);
  const width = Math.max(0, ...shown.map(([key]) => key.length));
  return shown.map(([key, value]) => `${`${key}:`.padEnd(width + 1)}  ${text(value)}`).join('\n');
}

/** A titled section (blank line before it unless first). */
export function section(title: string, body: string): string {
  return `${title}\n${body}`;
}

export const labels = (record: Record<string, string> | null | undefined): string =>
  Object.entries(record ?? {}).map(([k, v]) => `${k}=${v}`).join(',');

/** "3s ago", "in 12s", or the ISO time when far away. */
export function relative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '-';
  const delta = Math.round((Date.parse(iso) - now) / 1000);
  if (Number.isNaN(delta)) return iso;
  if (Math.abs(delta) > 3600) return iso;
  return delta >= 0 ? `in ${delta}s` : `${-delta}s ago`;
}

export const runtimesOf = (assignments: { runtimeId: string }[] | null | undefined): string =>
  [...new Set((assignments ?? []).map((a) => a.runtimeId))].sort().join(',');
