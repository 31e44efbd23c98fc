import { CommanderError, type Command } from 'commander';
import { loadConfig } from '../config.js';
import { AppError, EXIT, firstLine } from '../errors.js';
import { closest, jsonSafe, withoutSecrets } from '../text.js';
import { hintFor, messageFor } from './hints.js';
import { Output } from './output.js';
import { say, writeLine, type Said } from './say.js';
import type { GLOBAL_OPTIONS } from './global-options.js';
import { parsedOptions } from './options.js';
import { buildProgram } from './program.js';
import { Session } from './session.js';
import type { Terminal } from './terminal.js';

/** The only place that turns errors into messages and exit codes. */
async function report(thrown: unknown, session: Session | undefined, argv: readonly string[], terminal: Terminal): Promise<number> {
  let error: unknown = thrown;
  const debug = session?.options.debug === true || argv.includes('--debug');
  const name = (error as Error | undefined)?.name;
  if (name === 'ExitPromptError' || name === 'AbortPromptError') {
    error = new AppError('cancelled', 'nothing changed');
  }
  // A privilege the connected login lacks (PostgreSQL roles), refused before anything changed.
  if (String((error as { code?: unknown } | undefined)?.code ?? '') === '42501') {
    const { permissionDenied } = await import('../db/roles.js');
    const db = await session?.db().catch(() => undefined);
    if (db) error = await permissionDenied(db, error);
  }
  // The domain's translation is loaded only for a database error: --help and bad usage never load it.
  const known =
    error instanceof AppError
      ? error
      : isDatabaseError(error)
        ? (await import('../domain/operations/transactions.js')).translateDatabaseError(error)
        : undefined;
  const code = known ? known.code : 'internal_error';
  // A secret key or a token inside a message is cut to its prefix, whatever produced the message.
  const message = withoutSecrets(known ? messageFor(known) : firstLine(error));
  const hint = known ? hintFor(known) : 'this is a bug; run again with --debug for details';
  writeLine(terminal.err, errorLine(code, message, hint));
  if (debug) {
    for (let cause: unknown = error; cause; cause = (cause as Error).cause) {
      // A stack is lines of its own; each is escaped like a value (its first holds the message).
      for (const line of ((cause as Error).stack ?? String(cause)).split('\n')) writeLine(terminal.err, say`${line}`);
    }
  }
  if (session?.json) {
    terminal.out.write(`${jsonSafe(JSON.stringify({ error: { code, message, ...(hint ? { hint } : {}) } }, null, 2))}\n`);
  }
  return known ? known.exitCode : EXIT.error;
}

/** Errors of Prisma or its driver adapters that escaped a domain function: the database's trouble, not a bug. */
function isDatabaseError(error: unknown): boolean {
  return /^(PrismaClient\w*Error|DriverAdapterError)$/.test((error as Error | undefined)?.name ?? '');
}


/** `partnerctl <command> --help` for the command the words name (the program's own help when none). */
function helpCommand(program: Command, argv: readonly string[]): string {
  const path: string[] = [];
  let command = program;
  for (const word of argv.slice(2)) {
    const sub = command.commands.find((candidate) => candidate.name() === word || candidate.aliases().includes(word));
    // `help X` is refused for X, whose help is the one to see.
    if (sub && sub.name() !== 'help') {
      command = sub;
      path.push(sub.name());
    }
  }
  return ['partnerctl', ...path, '--help'].join(' ');
}

/**
 * A usage error's message and what the operator probably meant: the nearest choice of an option given a
 * value outside its choices, or commander's own suggestion for an unknown command or option.
 */
function didYouMean(text: string): { message: string; suggestion?: string } {
  const invalid = /^option '(\S+).*?' argument '(.*)' is invalid\. Allowed choices are (.+)\.$/.exec(text);
  if (invalid) {
    const [, option, value, choices] = invalid;
    const allowed = choices!.split(', ');
    const near = closest(value!, allowed, 1)[0];
    return { message: `${option} must be one of ${allowed.join(', ')}, got '${value}'`, ...(near ? { suggestion: `${option} ${near}` } : {}) };
  }
  const commanders = /^(.*?)\s*\(Did you mean (.+?)\?\)$/.exec(text);
  if (commanders) return { message: commanders[1]!, suggestion: commanders[2]! };
  // A value that starts with '-' (a kid or a public key is base64url: one in 64 does) reads as an option;
  // after '--' it is a value.
  const dashed = /^unknown option '(-[A-Za-z0-9_][A-Za-z0-9_-]{2,})'$/.exec(text);
  if (dashed) return { message: text, suggestion: `-- ${dashed[1]}` };
  return { message: text };
}

/**
 * One format for every error: `partnerctl: <code>: <message>; hint: <hint>` (no brackets around the hint).
 * The message and the hint are values (they quote what was typed or stored): escaped whole, a line feed in
 * them included, so an error is always one line.
 */
function errorLine(code: string, message: string, hint: string | undefined): Said {
  return say`partnerctl: ${code}: ${message}${hint ? say`; hint: ${hint}` : ''}`;
}

/** Commander's own line break before its suggestion; any other is part of a value and stays escaped. */
function joinSuggestion(text: string): string {
  return text.replace(/\s*\n\s*(\(Did you mean )/, ' $1');
}

/**
 * Runs one command line (`argv` as process.argv: node, script, arguments…) against a terminal and returns
 * its exit code. Writes only to the terminal; never exits the process.
 */
export async function runCli(argv: readonly string[], terminal: Terminal): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = buildProgram(async (command: Command, definition) => {
    let session: Session | undefined;
    try {
      const options = command.opts();
      session = new Session(
        parsedOptions<typeof GLOBAL_OPTIONS>(command.optsWithGlobals()),
        // The server's variables are read by serve alone, with its flags winning over them.
        loadConfig(terminal.env, definition.serverFlags?.(options)),
        terminal,
      );
      const invocation = { args: command.processedArgs as (string | undefined)[], options, command };
      const changes = typeof definition.changes === 'function' ? definition.changes(options) : definition.changes === true;
      exitCode = (await definition.run!(session, new Output(session, changes), invocation)) ?? EXIT.ok;
    } catch (error) {
      exitCode = await report(error, session, argv, terminal);
    } finally {
      await session?.close();
    }
  }, argv);
  // Usage errors of every command, subcommands included, are one line too (commander adds a "Did you mean"
  // line of its own, and subcommands do not inherit output settings given after they were made).
  const output = {
    writeOut: (text: string) => void terminal.out.write(text),
    writeErr: (text: string) => void terminal.err.write(text),
    // The terminal's width, not the process's (help is at most 80 columns whatever this says).
    getOutHelpWidth: () => terminal.columns ?? 80,
    getErrHelpWidth: () => terminal.columns ?? 80,
    outputError: (text: string, write: (text: string) => void) => {
      // A value pasted in the wrong place (a private key's PEM read as an option) is never echoed.
      const { message, suggestion } = didYouMean(joinSuggestion(withoutSecrets(text.replace(/^error: /, '').trim())));
      const hint = `${suggestion ? `did you mean ${suggestion}? ` : ''}see '${helpCommand(program, argv)}'`;
      write(`${errorLine('invalid_argument', message, hint).text}\n`);
      if (argv.includes('--json')) {
        terminal.out.write(`${jsonSafe(JSON.stringify({ error: { code: 'invalid_argument', message, hint } }, null, 2))}\n`);
      }
    },
  };
  for (const command of [program, ...program.commands, ...program.commands.flatMap((command) => command.commands)]) {
    command.exitOverride();
    command.configureOutput(output);
  }
  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    if (error instanceof CommanderError) {
      const quiet = ['commander.helpDisplayed', 'commander.version', 'commander.help'];
      return quiet.includes(error.code) ? EXIT.ok : EXIT.usage;
    }
    return await report(error, undefined, argv, terminal);
  }
  return exitCode;
}

