// Tables for people and pipes, drawn by cli-table3. What this module adds is the fitting: on a terminal the
// table fits its width (80 columns when unknown), optional columns dropped and the cells of the columns that
// say they may be cut (names, free text) cut with '…'; an id, an address, a code or a time is never cut: a
// table that cannot fit without cutting one is shown a record at a time instead (each column's title and
// value on a line, as psql's expanded display does); through a pipe or into a file, one
// record per line, every value whole, tab-separated, for grep, awk and cut. Full values are always in --json.
// Times are given as Dates and written here, one way in every table: to the minute on a terminal
// (`2026-11-24 08:41`, UTC), the whole ISO time through a pipe or with --wide. Every value is escaped here
// (src/cli/say.ts): a cell is one line whatever it holds.
import { createRequire } from 'node:module';
import type TableConstructor from 'cli-table3';
import { Said, shown } from './say.js';

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
  /**
   * Whether and where a long value may lose characters: 'end' (names, free text), or 'name'
   * (`Acme Pricing (ptn_…)`: the name before the parenthesis, the id in it kept whole). Absent: never cut (ids,
   * keys, addresses, codes, times, numbers); other columns are cut or dropped first.
   */
  cut?: 'end' | 'name';
  /** The narrowest a cut column may be (default: the title's width, at least 6). */
  min?: number;
  /** Dropped (rightmost first) when the table does not fit otherwise. */
  optional?: boolean;
  align?: 'left' | 'right';
}

export interface TableOptions {
  /** stdout is a terminal: fit the width, rule under the header (otherwise tab-separated records). */
  tty: boolean;
  /** The terminal's width; 80 when unknown. */
  width?: number;
  /** Header styling (bold on colour terminals). */
  header?: (text: string) => Said;
  /** Times whole (ISO) on a terminal too (--wide). */
  fullTimes?: boolean;
}

/**
 * An instant known only to within an interval (a key pair's last use, noted once a minute): written as the
 * interval, `2026-11-24 08:41:07–08:42:07` on a terminal, `2026-11-24T08:41:07Z/2026-11-24T08:42:07Z` (ISO 8601)
 * through a pipe, to the second: the stored milliseconds would claim a precision the value does not have.
 */
export class TimeWindow {
  constructor(
    readonly from: Date,
    readonly to: Date,
  ) {}

  text(full: boolean): string {
    const from = new Date(Math.floor(this.from.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    const to = new Date(Math.ceil(this.to.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    if (full) return `${from}/${to}`;
    const sameDay = from.slice(0, 10) === to.slice(0, 10);
    return `${from.slice(0, 19).replace('T', ' ')}–${sameDay ? to.slice(11, 19) : to.slice(0, 19).replace('T', ' ')}`;
  }
}

/** A cell: a value (escaped here), a time, a time window, styled text made by say.ts, or nothing ('-'). */
export type Cell = Said | string | number | Date | TimeWindow | null;

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

export function cut(text: string, width: number, how: 'end' | 'name' = 'end'): string {
  if (visibleLength(text) <= width) return text;
  if (how === 'name') {
    const id = kept(text);
    if (id !== '' && width > visibleLength(id)) return `${cut(text.slice(0, -id.length), width - visibleLength(id), 'end')}${id}`;
  }
  // The cells cut here are names and free text, escaped and not coloured (say.ts styles whole cells only).
  const chars = [...text];
  if (width <= 1) return chars.slice(0, width).join('');
  return `${chars.slice(0, width - 1).join('')}…`;
}

/** A cell as printed: its value escaped (a line feed in it is `\x0a`), a time as tables write times. */
function cellText(cell: Cell, options: TableOptions): string {
  if (cell === null || cell === undefined) return '-';
  const fullTimes = !options.tty || options.fullTimes === true;
  if (cell instanceof Date) return fullTimes ? cell.toISOString() : shortTime(cell);
  if (cell instanceof TimeWindow) return cell.text(fullTimes);
  return shown(cell);
}

export function renderTable(columnsIn: readonly (Column | string)[], rowsIn: readonly (readonly Cell[])[], options: TableOptions): Said {
  const allColumns = columnsIn.map((column): Column => (typeof column === 'string' ? { title: column } : column));
  // Escaped before measuring, so that a cut never splits an escape from its width.
  const allRows = rowsIn.map((row) => row.map((cell) => cellText(cell, options)));
  let columns = allColumns;
  let rows = allRows;
  const natural = () => columns.map((column, i) => Math.max(visibleLength(column.title), ...rows.map((row) => visibleLength(row[i] ?? ''))));
  // Through a pipe or into a file: one record per line, its values whole and tab-separated, no header
  // (for cut -f, awk -F'\t' and sort; --json has the names).
  if (!options.tty) return Said.of(rows.map((row) => row.join('\t')).join('\n'));
  let widths = natural();
  const limit = Math.max(20, options.width ?? 80);
  const total = () => widths.reduce((sum, width) => sum + width, 0) + GAP * (widths.length - 1);
  const floor = (i: number) => {
    const column = columns[i]!;
    if (column.cut === undefined) return widths[i]!;
    const narrowest = Math.max(column.min ?? Math.max(6, visibleLength(column.title)), 1);
    // A name column keeps every id whole, and at least a letter of the name before it.
    const ids = column.cut === 'name' ? Math.max(0, ...rows.map((row) => visibleLength(kept(row[i] ?? '')) + 2)) : 0;
    return Math.min(widths[i]!, Math.max(narrowest, ids));
  };
  // Drop optional columns (rightmost first) while even their narrowest cuts do not fit.
  const minimum = () => columns.reduce((sum, _c, i) => sum + floor(i), 0) + GAP * (columns.length - 1);
  while (minimum() > limit) {
    const drop = columns.map((column) => column.optional === true).lastIndexOf(true);
    if (drop < 0) break;
    columns = columns.filter((_c, i) => i !== drop);
    rows = rows.map((row) => row.filter((_c, i) => i !== drop));
    widths = natural();
  }
  // Then cut the widest cuttable column, a character at a time, until the table fits (or nothing is left to cut).
  while (total() > limit) {
    let widest = -1;
    for (let i = 0; i < widths.length; i++) {
      if (widths[i]! > floor(i) && (widest < 0 || widths[i]! > widths[widest]!)) widest = i;
    }
    if (widest < 0) break;
    widths[widest]!--;
  }
  const header = options.header ?? ((text: string) => Said.of(text));
  if (total() > limit) return records(allColumns, allRows, limit, header);
  const { Table } = tables();
  const none = { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '', left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '' };
  const table = new Table({
    head: columns.map((column, i) => header(cut(column.title, widths[i]!)).text),
    // Each column its width plus the gap to the next (padding, so right-aligned cells keep it too).
    colWidths: widths.map((width) => width + GAP),
    colAligns: columns.map((column) => column.align ?? 'left'),
    chars: none,
    style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': GAP },
    wordWrap: false,
  });
  for (const row of rows) table.push(row.map((cell, i) => cut(cell, widths[i]!, columns[i]!.cut)));
  const lines = table
    .toString()
    .split('\n')
    .map((line) => line.trimEnd());
  // On a terminal, a rule under the header, column by column (no gap after the last).
  lines.splice(1, 0, widths.map((width) => '─'.repeat(width)).join(' '.repeat(GAP)));
  return Said.of(lines.join('\n'));
}

/**
 * The rows a record at a time, every column (optional ones too) a line of its own: `TITLE  value`, a blank
 * line between records. Only the values of the columns that may be cut are cut, to the width left.
 */
function records(columns: readonly Column[], rows: readonly (readonly string[])[], limit: number, header: (text: string) => Said): Said {
  const width = Math.max(...columns.map((column) => visibleLength(column.title)));
  const room = Math.max(limit - width - GAP, 1);
  return Said.of(
    rows
      .map((row) =>
        columns
          .map((column, i) => `${header(column.title).text}${' '.repeat(width - visibleLength(column.title) + GAP)}${column.cut ? cut(row[i]!, room, column.cut) : row[i]}`.trimEnd())
          .join('\n'),
      )
      .join('\n\n'),
  );
}
