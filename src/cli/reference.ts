// docs/cli.md, written from the command definitions (scripts/cli-docs.mjs; a test compares it with the file).
import type { Command } from 'commander';
import { COMMAND_GROUPS, type CommandDefinition } from './definition.js';
import { exampleHeading } from './help.js';
import type { OptionDefinition } from './options.js';
import { buildProgram, PROGRAM } from './program.js';

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (text: string) => `\`${cell(text)}\``;

function optionsTable(options: readonly OptionDefinition[]): string[] {
  if (options.length === 0) return [];
  return [
    '| Option | Description | Default |',
    '| --- | --- | --- |',
    ...options.map((option) => {
      const choices = option.choices ? ` (one of: ${option.choices.join(', ')})` : '';
      const repeatable = option.repeatable ? ' (repeatable)' : '';
      return `| ${code(option.flags)} | ${cell(option.description + choices + repeatable)} | ${option.default === undefined ? '' : code(option.default)} |`;
    }),
    '',
  ];
}

function section(command: Command, definition: CommandDefinition, path: string): string[] {
  const usage = command.createHelp().commandUsage(command);
  const lines = [`## ${path}`, '', definition.description, '', '```text', usage, '```', ''];
  const args = definition.arguments ?? [];
  if (args.length > 0) {
    lines.push('| Argument | Description |', '| --- | --- |');
    for (const argument of args) lines.push(`| ${code(argument.name)} | ${cell(argument.description ?? '')} |`);
    lines.push('');
  }
  lines.push(...optionsTable(definition.options ?? []));
  if (definition.notes) lines.push('```text', definition.notes, '```', '');
  for (const example of definition.examples ?? []) {
    lines.push(`${exampleHeading(example)}`, '', '```sh', ...example.lines, '```', '');
  }
  if (definition.subcommands?.length) {
    lines.push(`Subcommands: ${definition.subcommands.map((sub) => `[${sub.name}](#${slug(`${path} ${sub.name}`)})`).join(', ')}.`, '');
  }
  return lines;
}

/** GitHub's anchor for a heading made of words, spaces and dashes. */
function slug(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');
}

/** The whole command reference, as Markdown. */
export function cliReference(): string {
  const program = buildProgram(async () => {});
  const entries: { command: Command; definition: CommandDefinition; path: string }[] = [];
  const visit = (command: Command, definitions: readonly CommandDefinition[], prefix: string) => {
    for (const definition of definitions) {
      if (definition.hidden) continue;
      const child = command.commands.find((candidate) => candidate.name() === definition.name)!;
      const path = `${prefix} ${definition.name}`;
      entries.push({ command: child, definition, path });
      visit(child, definition.subcommands ?? [], path);
    }
  };
  visit(program, PROGRAM.subcommands ?? [], PROGRAM.name);

  const lines = [
    '# partnerctl command reference',
    '',
    '<!-- Generated from the command definitions (src/cli/commands/) by `npm run docs:cli`: do not edit by hand. -->',
    '',
    `${PROGRAM.description} Every command prints help with \`--help\`;`,
    '`partnerctl help [command] --json` prints the command tree as one JSON object. The commands by task:',
    '',
    ...COMMAND_GROUPS.flatMap((group) => {
      const within = entries.filter(({ path }) => {
        const top = (PROGRAM.subcommands ?? []).find((definition) => path.split(' ')[1] === definition.name);
        return top?.group === group;
      });
      if (within.length === 0) return [];
      return [`**${group}**`, '', ...within.map((entry) => `- [${entry.path}](#${slug(entry.path)}): ${entry.definition.description}`), ''];
    }),
    '## Global options',
    '',
    'Every command accepts these.',
    '',
    '```text',
    program.createHelp().commandUsage(program),
    '```',
    '',
    ...optionsTable(PROGRAM.options ?? []),
    '```text',
    PROGRAM.notes ?? '',
    '```',
    '',
    ...entries.flatMap((entry) => section(entry.command, entry.definition, entry.path)),
  ];
  return `${lines.join('\n').trimEnd()}\n`;
}
