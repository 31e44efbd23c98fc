// What a command is, in one place: its name, arguments, options, help text and what it runs. The program
// (program.ts) only lists these; the same definitions give the help screens, `help --json` and docs/cli.md.
//
// A module defining commands imports only commander's types and light helpers at its top: everything heavy
// (domain code, the database) is imported inside `run`, so --help and bad usage load nothing of it.
import type { Command } from 'commander';
import type { Output } from './output.js';
import type { Session } from './session.js';

export interface ArgumentDefinition {
  /** As commander spells it: '[partner]' (optional) or '<file>' (required). */
  name: string;
  description?: string;
}

export interface OptionDefinition {
  /** As commander spells it: '-f, --file <file|->', '--dry-run'. */
  flags: string;
  description: string;
  /** The value when the option is not given (shown in the help as "(default: …)"). */
  default?: string;
  /** The only values accepted. */
  choices?: readonly string[];
  /** May be given more than once: the values are collected, in order, into a list. */
  repeatable?: boolean;
}

export interface Example {
  /** What the example shows, printed in brackets after "Example". */
  caption?: string;
  /** Command lines, printed as they are (each within 78 columns). */
  lines: string[];
}

/** What a command's run function gets. */
export interface Invocation<Options> {
  /** The command's arguments, in the order defined (undefined where an optional one was not given). */
  args: (string | undefined)[];
  /** The command's own parsed options (not the global ones: those are in session.options). */
  options: Options;
  /** The parsed command, for the rare command that needs the tree (completion). */
  command: Command;
}

export type Run<Options> = (session: Session, out: Output, invocation: Invocation<Options>) => Promise<number | undefined> | Promise<void>;

export interface CommandDefinition<Options = Record<string, never>> {
  name: string;
  description: string;
  /** Left out of help, completion and the command reference (for the completion scripts' own use). */
  hidden?: boolean;
  arguments?: ArgumentDefinition[];
  options?: OptionDefinition[];
  /**
   * Text after the options: prose lines longer than the help width are wrapped; lines that start with a
   * space (tables, documents, commands) are printed as they are.
   */
  notes?: string;
  examples?: Example[];
  /** The command reads the server's variables too (serve): its options win over the ones they name. */
  readsServerConfig?: boolean;
  /** The exit code, or undefined for 0. A command with subcommands has no run of its own. */
  run?: Run<Options>;
  subcommands?: CommandDefinition<never>[];
}

/**
 * Checks a definition against its own option types (and nothing else: it returns it as it is). Options appear
 * only as what run takes, so CommandDefinition<never> is a definition whatever its options.
 */
export function defineCommand<Options = Record<string, never>>(definition: CommandDefinition<Options>): CommandDefinition<never> {
  return definition;
}
