// What a command is, in one place: its name, arguments, options, help text and what it runs. The program
// (program.ts) only lists these; the same definitions give the help screens, `help --json` and docs/cli.md.
//
// A module defining commands imports only commander's types and light helpers at its top: everything heavy
// (domain code, the database) is imported inside `run`, so --help and bad usage load nothing of it.
import type { Command, OptionValues } from 'commander';
import type { ServerFlags } from '../config.js';
import type { Output } from './output.js';
import { parsedOptions, type OptionDefinition, type OptionsOf } from './options.js';
import type { Session } from './session.js';

export interface ArgumentDefinition {
  /** As commander spells it: '[partner]' (optional) or '<file>' (required). */
  name: string;
  description?: string;
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

type Run<Options> = (session: Session, out: Output, invocation: Invocation<Options>) => Promise<number | undefined> | Promise<void>;

/** The tasks the program's help groups its commands by, in its order. */
export const COMMAND_GROUPS = [
  'Partners',
  'Keys and leaks',
  'Companies',
  'State as code',
  'Limits and usage',
  'Server',
  'Audit and webhooks',
  'Setup',
] as const;

export type CommandGroup = (typeof COMMAND_GROUPS)[number];

/** A command as the program holds it (program.ts, help, the reference): its options as commander parsed them. */
export interface CommandDefinition {
  name: string;
  description: string;
  /** A top-level command's task: the program's help lists it under this heading (a test refuses one without). */
  group?: CommandGroup;
  /** A top-level command's line in the program's help (its own help keeps the whole description). */
  summary?: string;
  /** Left out of help, completion and the command reference (for the completion scripts' own use). */
  hidden?: boolean;
  arguments?: ArgumentDefinition[];
  options?: readonly OptionDefinition[];
  /**
   * Text after the options: prose lines longer than the help width are wrapped; lines that start with a
   * space (tables, documents, commands) are printed as they are.
   */
  notes?: string;
  examples?: Example[];
  /**
   * The command can change something (the database, the contexts file): its --json object always has
   * `changed` (true or false) beside what else it says; Output refuses to print one without. A function of
   * the options for a command that changes something only with some (`instances --forget`).
   */
  changes?: true | ((options: OptionValues) => boolean);
  /** The command reads the server's variables too (serve): these of its options win over the ones they name. */
  serverFlags?: (options: OptionValues) => ServerFlags;
  /** The exit code, or undefined for 0. A command with subcommands has no run of its own. */
  run?: Run<OptionValues>;
  subcommands?: CommandDefinition[];
}

/** A command as its module writes it: what takes its options takes the type its option definitions derive. */
export interface TypedCommandDefinition<Definitions extends readonly OptionDefinition[]>
  extends Omit<CommandDefinition, 'options' | 'serverFlags' | 'run'> {
  options?: Definitions;
  serverFlags?: (options: OptionsOf<Definitions>) => ServerFlags;
  run?: Run<OptionsOf<Definitions>>;
}

/** A command whose run and serverFlags receive the options its definitions derive (OptionsOf). */
export function defineCommand<const Definitions extends readonly OptionDefinition[] = readonly []>(
  definition: TypedCommandDefinition<Definitions>,
): CommandDefinition {
  const { serverFlags, run } = definition;
  return {
    ...definition,
    serverFlags: serverFlags && ((options) => serverFlags(parsedOptions<Definitions>(options))),
    run: run && ((session, out, invocation) => run(session, out, { ...invocation, options: parsedOptions<Definitions>(invocation.options) })),
  };
}
