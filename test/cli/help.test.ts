import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { COMMAND_GROUPS } from '../../src/cli/definition.js';
import { GLOBAL_OPTIONS } from '../../src/cli/global-options.js';
import { PROGRAM } from '../../src/cli/program.js';
import { runCli as runCommandLine } from '../../src/cli/run.js';
import { runBinary, runCli } from '../support/cli.js';

// Help and --version never touch a database: one that cannot be reached proves it.
const ENV = { ...process.env, DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none' };
const VERSION: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;

interface Node {
  name: string;
  usage: string;
  description: string;
  arguments: { name: string; required: boolean; variadic: boolean; description: string }[];
  options: { flags: string; description: string; default?: unknown; choices?: string[] }[];
  commands: Node[];
  examples?: string[];
}

/** Every command path of the tree (['db', 'migrate'], …), from `help --json`. */
function paths(node: Node, prefix: string[] = []): string[][] {
  return node.commands.flatMap((child) => [[...prefix, child.name], ...paths(child, [...prefix, child.name])]);
}

/** Runs in-process on a terminal as wide as `columns`, as a TTY on both ends (commander would use its width). */
async function onWideTerminal(args: string[], columns: number): Promise<{ code: number; stdout: string }> {
  const out = new PassThrough();
  let stdout = '';
  out.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await runCommandLine(['node', 'partnerctl', ...args], {
    out,
    err: new PassThrough(),
    in: Readable.from(['']),
    env: { ...ENV },
    signals: new EventEmitter(),
    inIsTTY: false,
    outIsTTY: true,
    errIsTTY: true,
    columns,
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { code, stdout };
}

const tooWide = (text: string) => text.split('\n').filter((line) => line.length > 80);

describe('help', () => {
  it('fits 80 columns on every screen of the command tree: root, every command and subcommand, help itself', async () => {
    const tree = (await runCli(['help', '--json'], ENV)).json<Node>();
    const all = paths(tree);
    // The tree is the whole program: a missing command would leave its screen unchecked.
    expect(all.map((path) => path.join(' '))).toEqual(expect.arrayContaining(['create-partner', 'apply', 'db migrate', 'signing-key rotate', 'serve']));
    expect(all.length).toBeGreaterThanOrEqual(30);
    const screens: [string, string[]][] = [
      ['--help', ['--help']],
      ['help', ['help']],
      ...all.map((path): [string, string[]] => [path.join(' '), [...path, '--help']]),
      ...all.filter((path) => path.at(-1) !== 'help').map((path): [string, string[]] => [`help ${path.join(' ')}`, ['help', ...path]]),
    ];
    for (const [name, args] of screens) {
      const result = await runCli(args, ENV);
      expect(result.code, name).toBe(0);
      expect(result.stdout, name).toMatch(/^Usage: partnerctl/);
      expect(tooWide(result.stdout), name).toEqual([]);
    }
  });

  it('wraps instead of cutting, and stays within 80 columns on a terminal 200 wide', async () => {
    for (const args of [['--help'], ['apply', '--help'], ['lookup', '--help'], ['usage', '--help'], ['map-company', '--help']]) {
      const wide = await onWideTerminal(args, 200);
      expect(wide.code).toBe(0);
      expect(tooWide(wide.stdout), args.join(' ')).toEqual([]);
    }
    // Every word of a long description and of the notes is still there, on more lines.
    const lookup = (await onWideTerminal(['lookup', '--help'], 200)).stdout.replace(/\s+/g, ' ');
    expect(lookup).toContain(
      'Exit codes: 0 found, 2 malformed (a wrong checksum says "checksum"), 3 matches nothing or cannot be traced.',
    );
    expect(lookup).toContain("the leaked value; '-' reads it from a pipe (kept out of the shell's history); on a terminal, omitted or '-', it is asked for, masked");
    const root = (await onWideTerminal(['help', 'global'], 200)).stdout.replace(/\s+/g, ' ');
    expect(root).toContain('PARTNERCTL_DB_POOL_SIZE PostgreSQL connections per process (default 10 for serve, 2 otherwise)');
    expect(root).toContain('5 database or service unavailable, 6 committed but not confirmed by every running server (a receipt), 7 permission denied (the database role lacks the privilege), 130 cancelled.');
  });

  it('ends a command screen with its notes and examples', async () => {
    const apply = await runCli(['apply', '--help'], ENV);
    expect(apply.stdout).toContain('The document:\n  partners:\n    - name: Acme Pricing\n');
    expect(apply.stdout).toContain('Examples:\n  partnerctl export > partners.yaml\n  partnerctl apply -f partners.yaml --dry-run\n');
    const rotate = await runCli(['rotate-keys', '--help'], ENV);
    expect(rotate.stdout).toContain('  partnerctl rotate-keys ptn_… --revoke-issued-tokens --yes --json\n');
    // The root's notes are the root's only, behind 'help global'.
    expect((await runCli(['help', 'global'], ENV)).stdout).toContain('Exit codes: 0 ok, 1 error');
    expect((await runCli(['audit', '--help'], ENV)).stdout).not.toContain('Exit codes');
  });
});

describe('the program\'s help, for a newcomer', () => {
  const visible = (PROGRAM.subcommands ?? []).filter((definition) => !definition.hidden);

  it('every command has a task to be listed under and a one-line summary (a new command without fails here)', () => {
    expect(visible.filter((definition) => !definition.group || !definition.summary).map((definition) => definition.name)).toEqual([]);
  });

  it('groups the commands by task, one line each, within 60 lines of 80 columns', async () => {
    const root = await runCli(['--help'], ENV);
    expect(root.code).toBe(0);
    const lines = root.stdout.trimEnd().split('\n');
    expect(lines.length).toBeLessThanOrEqual(60);
    expect(tooWide(root.stdout)).toEqual([]);
    const headings = lines.filter((line) => /^[A-Z][a-z ]+:$/.test(line)).map((line) => line.slice(0, -1));
    expect(headings).toEqual([...COMMAND_GROUPS]);
    for (const definition of visible) {
      const start = lines.indexOf(`${definition.group}:`);
      const end = lines.findIndex((line, index) => index > start && /^\S/.test(line));
      const line = lines.slice(start, end).find((candidate) => candidate.startsWith(`  ${definition.name} `));
      expect(line, definition.name).toMatch(new RegExp(`^  ${definition.name} +${definition.summary!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
    }
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}help +/));
    // The global options, one line each; in full behind 'help global'.
    for (const option of GLOBAL_OPTIONS) expect(lines, option.flags).toContainEqual(expect.stringMatching(new RegExp(`^  ${option.flags} +\\S`)));
    const global = await runCli(['help', 'global'], ENV);
    expect(global.code).toBe(0);
    expect(global.stdout.replace(/\s+/g, ' ')).toContain('who is acting, for the audit trail (default: $PARTNERCTL_ACTOR or the OS user)');
    expect((await runCli(['help', 'global', '--json'], ENV)).json<Node>().name).toBe('partnerctl');
  });

  it("lists in each command's help the global options its examples use", async () => {
    const checked: string[] = [];
    const walk = async (definitions: readonly typeof PROGRAM[], path: string[]) => {
      for (const definition of definitions) {
        const here = [...path, definition.name];
        const used = GLOBAL_OPTIONS.filter((option) =>
          (definition.examples ?? []).some((example) => example.lines.some((line) => option.flags.split(', ').some((flag) => line.split(' ').includes(flag)))),
        );
        if (used.length > 0) {
          const screen = (await runCli([...here, '--help'], ENV)).stdout;
          const section = screen.slice(screen.indexOf('Global options (in the examples below):'));
          expect(screen, here.join(' ')).toContain('Global options (in the examples below):');
          for (const option of used) expect(section, `${here.join(' ')} ${option.flags}`).toMatch(new RegExp(`\n  ${option.flags} +\\S`));
          checked.push(here.join(' '));
        }
        await walk(definition.subcommands ?? [], here);
      }
    };
    await walk(visible, []);
    expect(checked).toEqual(expect.arrayContaining(['rotate-keys', 'lookup', 'list-keys']));
  });

  it('refuses help for a command that does not exist, exit 2, naming the nearest', async () => {
    const unknown = await runBinary(['help', 'nonexistent'], ENV);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toMatch(/unknown command 'nonexistent'/);
    const typo = await runBinary(['help', 'lokup'], ENV);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/did you mean lookup\?/);
    const sub = await runCli(['help', 'db', 'migrat'], ENV);
    expect(sub.code).toBe(2);
    expect(sub.stderr).toMatch(/did you mean migrate\? see 'partnerctl db --help'/);
    expect((await runCli(['help', 'db', 'migrate'], ENV)).stdout).toMatch(/^Usage: partnerctl db migrate/);
  });
});

describe('--version', () => {
  it('prints the version as plain text alone, and one JSON object with --json (before or after it)', async () => {
    const plain = await runCli(['--version'], ENV);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(`${VERSION}\n`);
    for (const args of [['--version', '--json'], ['--json', '--version'], ['-V', '--json']]) {
      const result = await runCli(args, ENV);
      expect(result.code, args.join(' ')).toBe(0);
      expect(result.json(), args.join(' ')).toEqual({ version: VERSION });
      expect(result.stderr).toBe('');
    }
  });

  it('prints JSON through the real binary', async () => {
    const result = await runBinary(['--version', '--json'], ENV);
    expect(result.code, result.stderr).toBe(0);
    expect(result.json()).toEqual({ version: VERSION });
    expect((await runBinary(['--version'], ENV)).stdout).toBe(`${VERSION}\n`);
  });
});

describe('help --json', () => {
  it('prints the whole command tree: names, arguments, options with their defaults and choices, subcommands', async () => {
    const result = await runCli(['help', '--json'], ENV);
    expect(result.code).toBe(0);
    const tree = result.json<Node>();
    expect(tree.name).toBe('partnerctl');
    expect(tree.usage).toBe('partnerctl [options] [command]');
    expect(tree.options.map((option) => option.flags)).toEqual(
      expect.arrayContaining(['-V, --version', '--database-url <url>', '--json', '--no-input', '-y, --yes']),
    );
    const names = tree.commands.map((command) => command.name);
    expect(names.slice(0, 3)).toEqual(['create-partner', 'list-partners', 'show-partner']);
    expect(names).not.toContain('__complete-partners');
    const list = tree.commands.find((command) => command.name === 'list-partners')!;
    expect(list.options).toContainEqual({ flags: '--limit <n>', description: 'page size, 1-1000', default: '50' });
    expect(list.options).toContainEqual({
      flags: '--status <status>',
      description: 'only partners with this status',
      choices: ['active', 'disabled'],
    });
    const show = tree.commands.find((command) => command.name === 'show-partner')!;
    expect(show.arguments).toEqual([
      {
        name: 'partner',
        required: false,
        variadic: false,
        description: 'partner id, unique name, access key or key-pair id (asked for on a terminal when omitted)',
      },
    ]);
    const db = tree.commands.find((command) => command.name === 'db')!;
    expect(db.commands.map((command) => command.name)).toEqual(['migrate', 'status', 'roles', 'help']);
    expect(db.commands[0]!.usage).toBe('partnerctl db migrate [options]');
    expect(tree.commands.find((command) => command.name === 'set-limits')!.examples).toEqual([
      'partnerctl set-limits acme --rate 50/s --burst 100 --daily-quota 1000000',
    ]);
  });

  it('prints just one command\'s subtree for help X --json, the same as X --help --json', async () => {
    const tree = (await runCli(['help', '--json'], ENV)).json<Node>();
    const db = await runCli(['help', 'db', '--json'], ENV);
    expect(db.code).toBe(0);
    expect(db.json()).toEqual(tree.commands.find((command) => command.name === 'db'));
    expect((await runCli(['db', '--help', '--json'], ENV)).json()).toEqual(db.json());
    const migrate = await runCli(['db', 'migrate', '--help', '--json'], ENV);
    expect(migrate.json<Node>().name).toBe('migrate');
    expect((await runCli(['--json', 'help', 'rotate-keys'], ENV)).json<Node>().name).toBe('rotate-keys');
  });

  it('prints JSON through the real binary', async () => {
    const result = await runBinary(['help', 'rotate-keys', '--json'], ENV);
    expect(result.code, result.stderr).toBe(0);
    const node = result.json<Node>();
    expect(node.name).toBe('rotate-keys');
    expect(node.options.map((option) => option.flags)).toEqual([
      '--revoke-issued-tokens',
      '--overlap <duration>',
      '--after-switch <duration>',
      '--finish',
      '--key-pair <kp_id>',
      '--expires-in <duration>',
      '--secret-to <file>',
      '--public-key <file>',
      '--wait <duration>',
      '--no-wait',
      '-h, --help',
    ]);
  });
});
