import { jsonSafe, terminalSafe } from '../text.js';
import { renderTable, shortTime, type Cell, type Column } from './table.js';
import type { Session } from './session.js';

type Chalk = typeof import('chalk').default;

/** One JSON object on stdout with --json; otherwise text for a person, coloured only where it helps. */
export class Output {
  private chalkInstance: Chalk | undefined;

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

  async chalk(): Promise<Chalk> {
    if (!this.chalkInstance) {
      const { Chalk } = await import('chalk');
      this.chalkInstance = new Chalk({ level: this.colour ? 1 : 0 });
    }
    return this.chalkInstance;
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
  note(text: string): void {
    this.session.terminal.err.write(`${terminalSafe(text, this.colour)}\n`);
  }

  /** A line of text on stdout, its control characters escaped (names from the database included). */
  line(text = ''): void {
    this.session.terminal.out.write(`${terminalSafe(text, this.colour)}\n`);
  }

  /**
   * A table that fits the terminal (cells cut with '…'), or plain aligned columns with whole values when
   * stdout is a pipe or a file (see table.ts).
   */
  async table(head: (string | Column)[], rows: Cell[][], options: { wide?: boolean } = {}): Promise<string> {
    const chalk = await this.chalk();
    const terminal = this.session.terminal;
    // --wide: every column, every value and time whole, however wide the terminal.
    const width = options.wide ? Number.POSITIVE_INFINITY : terminal.columns;
    return renderTable(head, rows, { tty: terminal.outIsTTY, width, header: (text) => chalk.bold(text), colour: this.colour, fullTimes: options.wide === true });
  }

  /** A time inside a cell's text, as the table writes a time cell (a cell that is only a time: pass the Date). */
  tableTime(date: Date | null | undefined, wide = false): string | null {
    if (!date) return null;
    return this.session.terminal.outIsTTY && !wide ? shortTime(date) : date.toISOString();
  }

  /** Key/value lines, aligned: a table of two columns, its times written as every table writes them. */
  async fields(pairs: [string, string | Date | null | undefined][]): Promise<string> {
    const chalk = await this.chalk();
    const width = Math.max(...pairs.map(([key]) => key.length));
    return pairs.map(([key, value]) => `  ${chalk.dim(key.padEnd(width))}  ${(value instanceof Date ? this.tableTime(value) : value) ?? '-'}`).join('\n');
  }
}

export function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}
