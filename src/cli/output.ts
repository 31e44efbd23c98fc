import type { Session } from './session.js';

type Chalk = typeof import('chalk').default;

/** One JSON object on stdout with --json; otherwise text for a person, coloured only where it helps. */
export class Output {
  private chalkInstance: Chalk | undefined;

  constructor(private readonly session: Session) {}

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
    this.session.terminal.out.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** A line for the person on stderr (progress, notes): never mixed into the data on stdout. */
  note(text: string): void {
    this.session.terminal.err.write(`${text}\n`);
  }

  line(text = ''): void {
    this.session.terminal.out.write(`${text}\n`);
  }

  async table(head: string[], rows: (string | number | null)[][]): Promise<string> {
    const { default: Table } = await import('cli-table3');
    const chalk = await this.chalk();
    const table = new Table({
      head: head.map((title) => chalk.bold(title)),
      style: { head: [], border: [] },
      wordWrap: false,
    });
    for (const row of rows) table.push(row.map((cell) => (cell === null ? '-' : String(cell))));
    return table.toString();
  }

  /** Key/value lines, aligned. */
  async fields(pairs: [string, string | null | undefined][]): Promise<string> {
    const chalk = await this.chalk();
    const width = Math.max(...pairs.map(([key]) => key.length));
    return pairs.map(([key, value]) => `  ${chalk.dim(key.padEnd(width))}  ${value ?? '-'}`).join('\n');
  }
}

export function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}
