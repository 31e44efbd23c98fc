// Tables for people and pipes, drawn by cli-table3. What this module adds is the fitting: on a terminal the
// table fits its width (80 columns when unknown), optional columns dropped and long cells cut with '…' (keys
// in the middle, where both ends identify them); through a pipe or into a file, one record per line, every
// value whole, tab-separated, for grep, awk and cut. Full values are always in --json. Times are given as
// Dates and written here, one way in every table: to the minute on a terminal (`2026-11-24 08:41`, UTC, never
// cut), the whole ISO time through a pipe or with --wide.
import { createRequire } from 'node:module';
import type TableConstructor from 'cli-table3';
import { terminalSafe } from '../text.js';

const load = createRequire(import.meta.url);
// Loaded on first use: most commands never draw a table.
let cliTable: { Table: typeof TableConstructor; strlen: (text: string) => number } | undefined;
function tables() {
  cliTable ??= {
    Table: load('cli-table3') as typeof TableConstructor,
    // cli-table3's own measure: colour escapes take no room, wide (CJK) characters take two.
    strlen: (load('cli-table3/src/utils.js') as { strlen: (text: string) => number }).strlen,
  };
  return cliTable;
}

export interface Column {
  title: string;
  /** The narrowest this column may be cut to (default: the title's width, at least 6). */
  min?: number;
  /**
   * Where a cut value loses characters: 'end' (names), 'middle' (keys, whose both ends identify them), or
   * 'name' (`Acme Pricing (ptn_…)`: the name before the parenthesis, the id in it kept whole).
   */
  truncate?: 'end' | 'middle' | 'name';
  /** Never cut (ids a command needs, times, numbers): other columns are cut or dropped first. */
  whole?: boolean;
  /** Dropped (rightmost first) when even the narrowest cut does not fit. */
  optional?: boolean;
  align?: 'left' | 'right';
}

export interface TableOptions {
  /** stdout is a terminal: fit the width, rule under the header (otherwise tab-separated records). */
  tty: boolean;
  /** The terminal's width; 80 when unknown. */
  width?: number;
  /** Header styling (bold on colour terminals). */
  header?: (text: string) => string;
  /** Colour is on: the cells' own colour sequences are kept (every other control character is escaped). */
  colour?: boolean;
  /** Times whole (ISO) on a terminal too (--wide). */
  fullTimes?: boolean;
}

export type Cell = string | number | Date | null;

/** `2026-11-24 08:41`: a UTC time to the minute, the one way a table shows a time on a terminal. */
export function shortTime(date: Date): string {
  return date.toISOString().slice(0, 16).replace('T', ' ');
}

const GAP = 2;

export function visibleLength(text: string): number {
  return tables().strlen(text);
}

/** The part of a 'name' cell that is never cut: its trailing ` (id)`. */
function kept(text: string): string {
  return / \([^()]*\)$/.exec(text)?.[0] ?? '';
}

export function cut(text: string, width: number, how: 'end' | 'middle' | 'name' = 'end'): string {
  if (visibleLength(text) <= width) return text;
  if (how === 'name') {
    const id = kept(text);
    if (id !== '' && width > visibleLength(id)) return `${cut(text.slice(0, -id.length), width - visibleLength(id), 'end')}${id}`;
  }
  // The cells cut here are ids, names and times, not coloured text.
  const chars = [...text];
  if (width <= 1) return chars.slice(0, width).join('');
  if (how === 'middle') {
    const head = Math.ceil((width - 1) / 2);
    const tail = width - 1 - head;
    return `${chars.slice(0, head).join('')}…${tail > 0 ? chars.slice(-tail).join('') : ''}`;
  }
  return `${chars.slice(0, width - 1).join('')}…`;
}

export function renderTable(columnsIn: readonly (Column | string)[], rowsIn: readonly (readonly Cell[])[], options: TableOptions): string {
  // A column of times is never cut.
  let columns = columnsIn.map((column, i) => {
    const definition: Column = typeof column === 'string' ? { title: column } : column;
    return rowsIn.some((row) => row[i] instanceof Date) ? { ...definition, whole: true } : definition;
  });
  const text = (cell: Cell): string =>
    cell === null || cell === undefined ? '-' : cell instanceof Date ? (options.tty && !options.fullTimes ? shortTime(cell) : cell.toISOString()) : String(cell);
  // Control characters escaped before measuring, so that a cut never splits an escape from its width.
  let rows = rowsIn.map((row) => row.map((cell) => terminalSafe(text(cell).replace(/[\r\n\t]/g, ' '), options.colour === true)));
  const natural = () => columns.map((column, i) => Math.max(visibleLength(column.title), ...rows.map((row) => visibleLength(row[i] ?? ''))));
  // Through a pipe or into a file: one record per line, its values whole and tab-separated, no header
  // (for cut -f, awk -F'\t' and sort; --json has the names).
  if (!options.tty) return rows.map((row) => row.join('\t')).join('\n');
  let widths = natural();
  const limit = Math.max(20, options.width ?? 80);
  const total = () => widths.reduce((sum, width) => sum + width, 0) + GAP * (widths.length - 1);
  // Whether a name column may cut its ids too: only when nothing else is left to drop.
  let idsMayBeCut = false;
  const floor = (i: number) => {
    const column = columns[i]!;
    if (column.whole) return widths[i]!;
    const narrowest = Math.max(column.min ?? Math.max(6, visibleLength(column.title)), 1);
    // A name column keeps every id whole, and at least a letter of the name before it.
    const ids = column.truncate === 'name' && !idsMayBeCut ? Math.max(0, ...rows.map((row) => visibleLength(kept(row[i] ?? '')) + 2)) : 0;
    return Math.min(widths[i]!, Math.max(narrowest, ids));
  };
  // Drop optional columns (rightmost first) while even their narrowest cuts do not fit; then, if it still does
  // not fit, let name columns cut their ids.
  const minimum = () => columns.reduce((sum, _c, i) => sum + floor(i), 0) + GAP * (columns.length - 1);
  while (minimum() > limit) {
    const drop = columns.map((column) => column.optional === true).lastIndexOf(true);
    if (drop < 0) {
      if (idsMayBeCut) break;
      idsMayBeCut = true;
      continue;
    }
    columns = columns.filter((_c, i) => i !== drop);
    rows = rows.map((row) => row.filter((_c, i) => i !== drop));
    widths = natural();
  }
  // Then cut the widest cuttable column, a character at a time, until the table fits.
  while (total() > limit) {
    let widest = -1;
    for (let i = 0; i < widths.length; i++) {
      if (widths[i]! > floor(i) && (widest < 0 || widths[i]! > widths[widest]!)) widest = i;
    }
    if (widest < 0) break;
    widths[widest]!--;
  }
  const header = options.header ?? ((text: string) => text);
  const { Table } = tables();
  const none = { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '', left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '' };
  const table = new Table({
    head: columns.map((column, i) => header(cut(column.title, widths[i]!))),
    // Each column its width plus the gap to the next (padding, so right-aligned cells keep it too).
    colWidths: widths.map((width) => width + GAP),
    colAligns: columns.map((column) => column.align ?? 'left'),
    chars: none,
    style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': GAP },
    wordWrap: false,
  });
  for (const row of rows) table.push(row.map((cell, i) => cut(cell, widths[i]!, columns[i]!.truncate)));
  const lines = table
    .toString()
    .split('\n')
    .map((line) => line.trimEnd());
  // On a terminal, a rule under the header, column by column (no gap after the last).
  lines.splice(1, 0, widths.map((width) => '─'.repeat(width)).join(' '.repeat(GAP)));
  return lines.join('\n');
}
