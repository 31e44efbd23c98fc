// What the CLI prints for a person, built so that no command can forget to escape a value: the CLI's own
// words are the literal parts of a `say` template, every interpolated value (a partner's company id, a name
// from the database, an address, an error's message) is escaped whole, line feeds included, by one function
// (terminalSafe). The writers (Output.line and note, tables, key/value fields) take `Said` only, never a
// string, so the type checker finds a value that would reach a terminal raw.
import { Chalk } from 'chalk';
import { terminalSafe } from '../text.js';

/** Text safe to write to a terminal: the CLI's words, values escaped, styling applied after escaping. */
export class Said {
  /** Only `say`, the styles and the table writer make one. */
  private constructor(readonly text: string) {}

  /** Text already safe: for this module and the table writer (which escapes each cell itself) only. */
  static of(text: string): Said {
    return new Said(text);
  }

  toString(): string {
    return this.text;
  }
}

/** A value as a person sees it: a string escaped whole, a time in ISO, a number as written, nothing as '-'. */
export type Value = Said | string | number | bigint | Date | null | undefined;

/** One value as printed: `Said` as it is (already safe), anything else escaped. */
export function shown(value: Value): string {
  if (value === null || value === undefined) return '-';
  if (value instanceof Said) return value.text;
  if (value instanceof Date) return value.toISOString();
  return terminalSafe(String(value));
}

/** say`Mapped company ${id} to ${name}`: the literal words as written, each value escaped (see `shown`). */
export function say(words: TemplateStringsArray, ...values: Value[]): Said {
  let text = words[0]!;
  for (let i = 0; i < values.length; i++) text += shown(values[i]) + words[i + 1]!;
  return Said.of(text);
}

/** Writes a line for a person (stdout or stderr). */
export function writeLine(stream: NodeJS.WritableStream, text?: Said): void {
  stream.write(`${text?.text ?? ''}\n`);
}

/** Values joined by the CLI's separator (`, ` by default), each escaped. */
export function joined(values: readonly Value[], separator = ', '): Said {
  return Said.of(values.map(shown).join(separator));
}

export interface Style {
  bold(value: Value): Said;
  dim(value: Value): Said;
  red(value: Value): Said;
  green(value: Value): Said;
  yellow(value: Value): Said;
}

/**
 * Styles (chalk's, at its 16-colour level or none) applied to escaped values: a value's own escape sequences
 * never reach the terminal, coloured or not.
 */
export function styles(colour: boolean): Style {
  const chalk = new Chalk({ level: colour ? 1 : 0 });
  const styled = (paint: (text: string) => string) => (value: Value) => Said.of(paint(shown(value)));
  return { bold: styled(chalk.bold), dim: styled(chalk.dim), red: styled(chalk.red), green: styled(chalk.green), yellow: styled(chalk.yellow) };
}
