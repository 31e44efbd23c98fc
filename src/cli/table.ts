// A small table renderer for people and pipes: on a terminal the table fits its width (80 columns when
// unknown), long cells cut with '…'; through a pipe or into a file, plain aligned columns with every value
// whole and no rules, for grep, awk and cut. Full values are always in --json.

export interface Column {
  title: string;
  /** The narrowest this column may be cut to (default: the title's width, at least 6). */
  min?: number;
  /** Where a cut value loses characters: 'end' (names) or 'middle' (keys, whose both ends identify them). */
  truncate?: 'end' | 'middle';
  /** Dropped (rightmost first) when even the narrowest cut does not fit. */
  optional?: boolean;
  align?: 'left' | 'right';
}

export interface TableOptions {
  /** stdout is a terminal: fit the width, rule under the header. */
  tty: boolean;
  /** The terminal's width; 80 when unknown. */
  width?: number;
  /** Header styling (bold on colour terminals). */
  header?: (text: string) => string;
}

const GAP = 2;
// Colour escapes take no room on screen.
const ANSI = /\u001b\[[0-9;]*m/g;

export function visibleLength(text: string): number {
  return [...text.replace(ANSI, '')].length;
}

export function cut(text: string, width: number, how: 'end' | 'middle' = 'end'): string {
  if (visibleLength(text) <= width) return text;
  const chars = [...text.replace(ANSI, '')];
  if (width <= 1) return chars.slice(0, width).join('');
  if (how === 'middle') {
    const head = Math.ceil((width - 1) / 2);
    const tail = width - 1 - head;
    return `${chars.slice(0, head).join('')}…${tail > 0 ? chars.slice(-tail).join('') : ''}`;
  }
  return `${chars.slice(0, width - 1).join('')}…`;
}

function pad(text: string, width: number, align: 'left' | 'right' = 'left'): string {
  const room = Math.max(0, width - visibleLength(text));
  return align === 'right' ? ' '.repeat(room) + text : text + ' '.repeat(room);
}

export function renderTable(columnsIn: readonly (Column | string)[], rowsIn: readonly (readonly (string | number | null)[])[], options: TableOptions): string {
  let columns = columnsIn.map((column) => (typeof column === 'string' ? { title: column } : column));
  let rows = rowsIn.map((row) => row.map((cell) => (cell === null || cell === undefined ? '-' : String(cell)).replace(/[\r\n\t]/g, ' ')));
  const natural = () => columns.map((column, i) => Math.max(visibleLength(column.title), ...rows.map((row) => visibleLength(row[i] ?? ''))));
  let widths = natural();
  if (options.tty) {
    const limit = Math.max(20, options.width ?? 80);
    const total = () => widths.reduce((sum, width) => sum + width, 0) + GAP * (widths.length - 1);
    const floor = (i: number) => Math.min(widths[i]!, Math.max(columns[i]!.min ?? Math.max(6, visibleLength(columns[i]!.title)), 1));
    // Drop optional columns (rightmost first) while even their narrowest cuts do not fit.
    const minimum = () => columns.reduce((sum, _c, i) => sum + floor(i), 0) + GAP * (columns.length - 1);
    while (minimum() > limit) {
      const drop = columns.map((column) => column.optional === true).lastIndexOf(true);
      if (drop < 0) break;
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
  }
  const header = options.header ?? ((text: string) => text);
  const lines: string[] = [];
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => {
        const column = columns[i]!;
        const shown = cut(cell, widths[i]!, column.truncate);
        return i === cells.length - 1 && column.align !== 'right' ? shown : pad(shown, widths[i]!, column.align);
      })
      .join(' '.repeat(GAP))
      .trimEnd();
  lines.push(
    columns
      .map((column, i) => {
        const title = cut(column.title, widths[i]!);
        return header(i === columns.length - 1 ? title : pad(title, widths[i]!, column.align));
      })
      .join(' '.repeat(GAP))
      .trimEnd(),
  );
  if (options.tty) lines.push(widths.map((width) => '─'.repeat(width)).join(' '.repeat(GAP)));
  for (const row of rows) lines.push(line(row));
  return lines.join('\n');
}
