// How the CLI prints answers for a person: aligned tables and key/value blocks. `--json` skips all
// of this and prints the API's answer as it came.

export type Cell = string | number | boolean | null | undefined;

const text = (cell: Cell): string => (cell === null || cell === undefined || cell === '' ? '-' : String(cell));

/** The width tables are cut to: a reason or a list never makes a row wrap on a 120-column terminal. */
export const TABLE_WIDTH = 120;
/** A column is never cut below this (a header and a short value stay whole). */
const MIN_COLUMN = 10;

const cut = (cell: string, width: number) => (cell.length <= width ? cell : `${cell.slice(0, Math.max(0, width - 1))}…`);

/**
 * An aligned table: upper-case headers, two spaces between columns, `-` for an empty cell. Rows
 * wider than `maxWidth` have their widest columns cut (ending in `…`) until they fit; line breaks
 * in a cell become spaces. `--json` has every value whole.
 */
export function table(headers: string[], rows: Cell[][], maxWidth = TABLE_WIDTH): string {
  if (rows.length === 0) return '(none)';
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((row) => row.map((cell) => text(cell).replace(/\s*\n\s*/g, ' ')))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  const total = () => widths.reduce((sum, w) => sum + w, 0) + 2 * (widths.length - 1);
  while (total() > maxWidth) {
    const widest = widths.indexOf(Math.max(...widths));
    if (widths[widest] <= MIN_COLUMN) break;
    widths[widest] = Math.max(MIN_COLUMN, widths[widest] - (total() - maxWidth));
  }
  return cells
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cut(cell, widths[i]) : cut(cell, widths[i]).padEnd(widths[i]))).join('  ').trimEnd())
    .join('\n');
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
  // Under a second either way (the database's clock and this one differ by that much): now.
  if (delta === 0) return 'now';
  return delta > 0 ? `in ${delta}s` : `${-delta}s ago`;
}

export const runtimesOf = (assignments: { runtimeId: string }[] | null | undefined): string =>
  [...new Set((assignments ?? []).map((a) => a.runtimeId))].sort().join(',');
