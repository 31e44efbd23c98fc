// Help screens: 80 columns at most whatever the terminal, the notes and examples of each definition after the
// options, and with --json the command tree as one JSON object instead of text.
import { Help, type Command } from 'commander';
import type { CommandDefinition, Example } from './definition.js';
import type { GLOBAL_OPTIONS } from './global-options.js';
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

/** What follows a command's options in its help: its notes, then its examples. Empty when it has neither. */
export function afterOptions(definition: CommandDefinition | undefined): string {
  if (!definition) return '';
  const blocks: string[] = [];
  if (definition.notes) blocks.push(wrap(definition.notes));
  for (const example of definition.examples ?? []) {
    blocks.push([wrap(exampleHeading(example)), ...example.lines.map((line) => `  ${line}`)].join('\n'));
  }
  return blocks.map((block) => `\n${block}\n`).join('');
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
      return Help.prototype.formatHelp.call(helper, cmd, helper) + afterOptions(definitions.get(cmd));
    },
  });
}
