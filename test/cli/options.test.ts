import type { Command, OptionValues } from 'commander';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { CommandDefinition } from '../../src/cli/definition.js';
import type { GlobalOptions } from '../../src/cli/global-options.js';
import { defineOptions, type OptionsOf } from '../../src/cli/options.js';
import { buildProgram, PROGRAM } from '../../src/cli/program.js';
import type { WaitOptions } from '../../src/cli/receipt.js';

// A command's Options type is derived from its flags (OptionsOf); these tests hold the derivation to what
// commander really parses, the way GitHub CLI's tests check parsed options without running the command.

/** What commander hands the command a command line names (nothing runs). */
async function parsed(...args: string[]): Promise<{ options: OptionValues; globals: OptionValues }> {
  let seen: { options: OptionValues; globals: OptionValues } | undefined;
  const program = buildProgram(async (command: Command) => {
    seen = { options: command.opts(), globals: command.optsWithGlobals() };
  });
  await program.parseAsync(['node', 'partnerctl', ...args]);
  if (!seen) throw new Error(`no command ran for ${args.join(' ')}`);
  return seen;
}

describe("a command's options", () => {
  it('are typed from their flags: booleans, values, lists, choices, defaults, --no-x', () => {
    const table = defineOptions([
      { flags: '-f, --file <file|->', description: '' },
      { flags: '--dry-run', description: '' },
      { flags: '--limit <n>', description: '', default: '50' },
      { flags: '--status <status>', description: '', choices: ['active', 'disabled'] },
      { flags: '--allow <cidr>', description: '', repeatable: true },
      { flags: '--colour [when]', description: '' },
      { flags: '--no-input', description: '' },
    ]);
    expectTypeOf<OptionsOf<typeof table>>().toEqualTypeOf<{
      file?: string;
      dryRun?: true;
      limit: string;
      status?: 'active' | 'disabled';
      allow?: string[];
      colour?: string | true;
      input: boolean;
    }>();
    expectTypeOf<WaitOptions>().toEqualTypeOf<{ wait: string | false }>();
    expectTypeOf<GlobalOptions>().toEqualTypeOf<{
      version?: true;
      databaseUrl?: string;
      context?: string;
      json?: true;
      color: boolean;
      input: boolean;
      yes?: true;
      actor?: string;
      debug?: true;
    }>();
  });

  it('are what commander parses: the types above hold for real command lines', async () => {
    expect((await parsed('apply', '-f', 'partners.yaml', '--dry-run')).options).toEqual({ file: 'partners.yaml', dryRun: true, wait: '3s' });
    expect((await parsed('rotate-keys', 'acme', '--no-wait')).options).toEqual({ wait: false });
    expect((await parsed('map-company', 'acme', '--company', 'a', '--company', 'b')).options).toEqual({ company: ['a', 'b'] });
    expect((await parsed('list-partners', '--status', 'active')).options).toEqual({ status: 'active', limit: '50' });
    const { globals } = await parsed('--no-input', '--json', 'list-partners');
    expect(globals).toMatchObject({ input: false, color: true, json: true });
  });

  it('name their keys as OptionsOf reads them from every flag of every command', () => {
    const program = buildProgram(async () => {});
    const visit = (command: Command, definitions: readonly CommandDefinition[]): number =>
      definitions.reduce((count, definition) => {
        const child = command.commands.find((candidate) => candidate.name() === definition.name)!;
        for (const option of definition.options ?? []) {
          // OptionsOf's rule, written out: the long flag, without 'no-', in camelCase.
          const long = /--(?:no-)?([a-z][a-z0-9-]*)/.exec(option.flags)?.[1];
          const key = long?.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
          expect(child.options.find((candidate) => candidate.flags === option.flags)?.attributeName(), option.flags).toBe(key);
        }
        return count + (definition.options?.length ?? 0) + visit(child, definition.subcommands ?? []);
      }, 0);
    expect(visit(program, PROGRAM.subcommands ?? [])).toBeGreaterThan(50);
  });
});
