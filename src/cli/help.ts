// Help screens: 80 columns at most whatever the terminal, the notes and examples of each definition after the
// options, and with --json the command tree as one JSON object instead of text.
import { Help, CommanderError, type Command } from 'commander';
import { EXIT } from '../errors.js';
import { closest } from '../text.js';
import { COMMAND_GROUPS, type CommandDefinition, type Example } from './definition.js';
import { GLOBAL_OPTIONS } from './global-options.js';
import { parsedOptions } from './options.js';

/** No help line is wider, whatever the terminal (commander wraps its own columns to this). */
export const HELP_WIDTH = 80;

/** Each command's definition, for the text after its options. */
const definitions = new WeakMap<Command, CommandDefinition>();

/**
 * Wraps prose lines longer than `width` at spaces. Lines that start with a space (tables, documents,
 * commands) are kept as they are: their layout is the author's.
 */
export function wrap(text: string, width = HELP_WIDTH): string {
  return text
    .split('\n')
    .flatMap((line) => {
      if (line.length <= width || line.startsWith(' ')) return [line];
      const lines: string[] = [];
      let current = '';
      for (const word of line.split(' ')) {
        if (current !== '' && current.length + 1 + word.length > width) {
          lines.push(current);
          current = word;
        } else {
          current = current === '' ? word : `${current} ${word}`;
        }
      }
      lines.push(current);
      return lines;
    })
    .join('\n');
}

/** "Example:", "Examples:", "Example (daily cron):". */
export function exampleHeading(example: Example): string {
  return `Example${example.lines.length > 1 ? 's' : ''}${example.caption ? ` (${example.caption})` : ''}:`;
}

/** The global options a command's examples use (`--json`, `-y`, …), in the order they are defined. */
export function globalOptionsUsed(definition: CommandDefinition): typeof GLOBAL_OPTIONS[number][] {
  const words = new Set((definition.examples ?? []).flatMap((example) => example.lines.flatMap((line) => line.split(/[\s=]+/))));
  return GLOBAL_OPTIONS.filter((option) => option.flags.split(/[ ,]+/).some((flag) => flag.startsWith('-') && words.has(flag)));
}

/** Two columns, the first padded to its widest term, the second wrapped beneath itself within HELP_WIDTH. */
function columns(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([term]) => term.length));
  return rows.flatMap(([term, text]) => {
    const [first = '', ...rest] = wrap(text, HELP_WIDTH - width - 4).split('\n');
    return [`  ${term.padEnd(width)}  ${first}`, ...rest.map((line) => `${' '.repeat(width + 4)}${line}`)];
  });
}

/**
 * What follows a command's options in its help: the global options its examples use, its notes, then its
 * examples. Empty when it has none of them.
 */
export function afterOptions(definition: CommandDefinition | undefined): string {
  if (!definition) return '';
  const blocks: string[] = [];
  const globals = globalOptionsUsed(definition);
  if (globals.length > 0) {
    blocks.push(['Global options (in the examples below):', ...columns(globals.map((option) => [option.flags, option.description]))].join('\n'));
  }
  if (definition.notes) blocks.push(wrap(definition.notes));
  for (const example of definition.examples ?? []) {
    blocks.push([wrap(exampleHeading(example)), ...example.lines.map((line) => `  ${line}`)].join('\n'));
  }
  return blocks.map((block) => `\n${block}\n`).join('');
}

/** `help global`: the global options in full and the program's notes (the database, the environment, exit codes). */
export const GLOBAL_TOPIC = 'global';

/**
 * The program's own screen, for a newcomer: the commands grouped by task, one line each, and the global
 * options in a line each; each command's help has the details, `help global` the program's notes.
 */
function programHelp(program: Command, definition: CommandDefinition): string {
  const visible = program.createHelp().visibleCommands(program);
  const lineOf = (command: Command): [string, string] => [command.name(), definitions.get(command)?.summary ?? (command.summary() || command.description())];
  const groups = [...COMMAND_GROUPS, 'Other'].map((group) => ({
    group,
    commands: visible.filter((command) => (command.helpGroup() || 'Other') === group),
  }));
  const width = Math.max(...visible.map((command) => command.name().length));
  const commandLines = groups
    .filter(({ commands }) => commands.length > 0)
    .flatMap(({ group, commands }) => [`${group}:`, ...commands.map(lineOf).map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`)]);
  return [
    'Usage: partnerctl [options] <command>',
    '',
    wrap(definition.description),
    '',
    ...commandLines,
    '',
    `Global options (all, the database, exit codes: 'partnerctl help ${GLOBAL_TOPIC}'):`,
    ...columns(GLOBAL_OPTIONS.map((option) => [option.flags, option.summary])),
    '',
  ]
    .map((line) => wrap(line))
    .join('\n');
}

/** `help global`: every global option in full, then the program's notes. */
function globalHelp(definition: CommandDefinition): string {
  return [
    'Global options (before or after the command):',
    ...columns(GLOBAL_OPTIONS.map((option) => [option.flags, option.description])),
    '',
    wrap(definition.notes ?? ''),
    '',
  ].join('\n');
}

/**
 * `help [command...]`: the help of the command the words name, `help global` the program's notes; a name
 * that is no command is a usage error naming the nearest one.
 */
export function showHelp(program: Command, words: readonly string[]): never {
  if (words.length === 1 && words[0] === GLOBAL_TOPIC) {
    // In JSON the global options are the program's own, in its tree.
    if (parsedOptions<typeof GLOBAL_OPTIONS>(program.opts()).json === true) return program.help();
    program.configureOutput().writeOut?.(globalHelp(definitions.get(program)!));
    throw new CommanderError(EXIT.ok, 'commander.help', '(outputHelp)');
  }
  let command = program;
  for (const word of words) {
    const visible = command.createHelp().visibleCommands(command);
    const found = visible.find((child) => child.name() === word || child.aliases().includes(word));
    if (!found) {
      const names = [...visible.map((child) => child.name()), ...(command === program ? [GLOBAL_TOPIC] : [])];
      const near = closest(word, names, 1)[0];
      return command.error(`unknown command '${word}'${near ? ` (Did you mean ${near}?)` : ''}`, { exitCode: EXIT.usage, code: 'commander.unknownCommand' });
    }
    command = found;
  }
  return command.help();
}

export interface ArgumentJson {
  name: string;
  required: boolean;
  variadic: boolean;
  description: string;
}

export interface OptionJson {
  flags: string;
  description: string;
  default?: unknown;
  choices?: string[];
}

/** One command of `help --json`, its subcommands nested. */
export interface CommandJson {
  name: string;
  usage: string;
  description: string;
  arguments: ArgumentJson[];
  options: OptionJson[];
  commands: CommandJson[];
  examples?: string[];
}

/** The command and its visible subcommands as `help --json` prints them: what its help screen shows. */
export function commandTree(command: Command): CommandJson {
  const helper = command.createHelp();
  const examples = definitions.get(command)?.examples?.flatMap((example) => example.lines);
  return {
    name: command.name(),
    usage: helper.commandUsage(command),
    description: command.description(),
    arguments: command.registeredArguments.map((argument) => ({
      name: argument.name(),
      required: argument.required,
      variadic: argument.variadic,
      description: argument.description,
    })),
    options: helper.visibleOptions(command).map((option) => ({
      flags: option.flags,
      description: option.description,
      ...(option.defaultValue !== undefined ? { default: option.defaultValue } : {}),
      ...(option.argChoices ? { choices: [...option.argChoices] } : {}),
    })),
    commands: helper.visibleCommands(command).map((child) => commandTree(child)),
    ...(examples?.length ? { examples } : {}),
  };
}

/**
 * Sets up a command's help: at most HELP_WIDTH columns, the definition's notes and examples after the
 * options, and the command tree as JSON when --json is among the options given (`help X --json`,
 * `X --help --json`).
 */
export function configureHelp(command: Command, definition: CommandDefinition): void {
  definitions.set(command, definition);
  command.configureHelp({
    helpWidth: HELP_WIDTH,
    formatHelp: (cmd: Command, helper: Help) => {
      if (parsedOptions<typeof GLOBAL_OPTIONS>(cmd.optsWithGlobals()).json === true) return `${JSON.stringify(commandTree(cmd), null, 2)}\n`;
      if (cmd.parent === null) return programHelp(cmd, definition);
      return Help.prototype.formatHelp.call(helper, cmd, helper) + afterOptions(definitions.get(cmd));
    },
  });
}
