import { jsonSafe } from '../text.js';
import { joined, type Said, say, styles, writeLine, type Style, type Value } from './say.js';
import { lastUseWindow } from '../domain/rules/key-pair-state.js';
import { renderTable, shortTime, TimeWindow, type Cell, type Column } from './table.js';
import type { Session } from './session.js';

/** A line of a key/value block: the CLI's word for it, and its value (escaped when printed). */
export type Field = [string, Value | TimeWindow];

/**
 * One JSON object on stdout with --json; otherwise text for a person, coloured only where it helps. Every
 * writer takes `Said` (src/cli/say.ts): a value reaches the terminal escaped or not at all.
 */
export class Output {
  private styleInstance: Style | undefined;

  /** `changes`: the command can change something, so its JSON must say whether it did (`changed`). */
  constructor(
    private readonly session: Session,
    private readonly changes = false,
  ) {}

  get json(): boolean {
    return this.session.json;
  }

  get colour(): boolean {
    return (
      this.session.options.color !== false &&
      this.session.config.colourAllowed &&
      this.session.terminal.outIsTTY
    );
  }

  /** Bold, dim and colours, applied to escaped values (plain text when colour is off). */
  get style(): Style {
    this.styleInstance ??= styles(this.colour);
    return this.styleInstance;
  }

  emitJson(value: object): void {
    // One place for the contract every changing command keeps (a runbook counts its changes by it).
    if (this.changes && typeof (value as { changed?: unknown }).changed !== 'boolean') {
      throw new Error('a command that can change something printed JSON without `changed`');
    }
    // Control characters escaped (C0 by JSON itself, C1 and bidi here): the same value, harmless on a terminal.
    this.session.terminal.out.write(`${jsonSafe(JSON.stringify(value, null, 2))}\n`);
  }

  /** A line for the person on stderr (progress, notes): never mixed into the data on stdout. */
  note(text: Said): void {
    writeLine(this.session.terminal.err, text);
  }

  /** A line of text on stdout: the CLI's words, its values escaped (see say.ts). */
  line(text?: Said): void {
    writeLine(this.session.terminal.out, text);
  }

  /**
   * A table that fits the terminal (names and free text cut with '…', never an id, an address or a time),
   * or plain aligned columns with whole values when stdout is a pipe or a file (see table.ts).
   */
  async table(head: (string | Column)[], rows: Cell[][], options: { wide?: boolean } = {}): Promise<Said> {
    const terminal = this.session.terminal;
    // --wide: every column, every value and time whole, however wide the terminal.
    const width = options.wide ? Number.POSITIVE_INFINITY : terminal.columns;
    return renderTable(head, rows, { tty: terminal.outIsTTY, width, header: (text) => this.style.bold(text), fullTimes: options.wide === true });
  }

  /** A time inside a cell's text, as the table writes a time cell (a cell that is only a time: pass the Date). */
  tableTime(date: Date | null | undefined, wide = false): string | null {
    if (!date) return null;
    return this.session.terminal.outIsTTY && !wide ? shortTime(date) : date.toISOString();
  }

  /** Key/value lines, aligned: the keys are the CLI's words, the values escaped; times as every table writes them. */
  async fields(pairs: Field[]): Promise<Said> {
    const width = Math.max(...pairs.map(([key]) => key.length));
    const value = (value: Value | TimeWindow) =>
      value instanceof Date ? this.tableTime(value) : value instanceof TimeWindow ? value.text(!this.session.terminal.outIsTTY) : value;
    return joined(
      pairs.map(([key, v]) => say`  ${this.style.dim(key.padEnd(width))}  ${value(v)}`),
      '\n',
    );
  }
}

/** A pair's last use as the interval it is known to (key-pair-state.ts), for a table cell or a field. */
export function lastUsed(lastUsedAt: Date | null, now: number): TimeWindow | null {
  if (lastUsedAt === null) return null;
  const { from, to } = lastUseWindow(lastUsedAt, now);
  return new TimeWindow(from, to);
}

export function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}
