import { CommanderError, type Command } from 'commander';
import { translateDatabaseError } from '../domain/transactions.js';
import { loadCliConfig } from '../config.js';
import { AppError, EXIT, firstLine } from '../errors.js';
import { hintFor } from './hints.js';
import { Output } from './output.js';
import { buildProgram } from './program.js';
import { Session, type GlobalOptions } from './session.js';

/** The only place that turns errors into messages and exit codes. */
function report(thrown: unknown, session: Session | undefined): number {
  let error: unknown = thrown;
  const debug = session?.options.debug === true || process.argv.includes('--debug');
  const name = (error as Error | undefined)?.name;
  if (name === 'ExitPromptError' || name === 'AbortPromptError') {
    error = new AppError('cancelled', 'cancelled; nothing changed');
  }
  const known = error instanceof AppError ? error : isDatabaseError(error) ? translateDatabaseError(error) : undefined;
  const code = known ? known.code : 'internal_error';
  const message = known ? known.message : firstLine(error);
  const hint = known ? hintFor(known) : 'this is a bug; run again with --debug for details';
  process.stderr.write(`partnerctl: ${code}: ${oneLine(message)}${hint ? ` (hint: ${hint})` : ''}\n`);
  if (debug) {
    for (let cause: unknown = error; cause; cause = (cause as Error).cause) {
      process.stderr.write(`${(cause as Error).stack ?? String(cause)}\n`);
    }
  }
  if (session?.json) {
    process.stdout.write(`${JSON.stringify({ error: { code, message, ...(hint ? { hint } : {}) } }, null, 2)}\n`);
  }
  return known ? known.exitCode : EXIT.error;
}

/** Errors of Prisma or its driver adapters that escaped a domain function: the database's trouble, not a bug. */
function isDatabaseError(error: unknown): boolean {
  return /^(PrismaClient\w*Error|DriverAdapterError)$/.test((error as Error | undefined)?.name ?? '');
}


function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

async function main(): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = buildProgram(async (command: Command, action) => {
    let session: Session | undefined;
    try {
      session = new Session(command.optsWithGlobals<GlobalOptions>(), loadCliConfig(process.env));
      exitCode = (await action(session, new Output(session), command)) ?? EXIT.ok;
    } catch (error) {
      exitCode = report(error, session);
    } finally {
      await session?.close();
    }
  });
  // Usage errors of every command, subcommands included, are one line too (commander adds a "Did you mean"
  // line of its own, and subcommands do not inherit output settings given after they were made).
  const output = {
    outputError: (text: string, write: (text: string) => void) => {
      const message = oneLine(text.replace(/^error: /, '').trim());
      write(`partnerctl: invalid_argument: ${message} (see 'partnerctl --help')\n`);
      if (process.argv.includes('--json')) {
        process.stdout.write(`${JSON.stringify({ error: { code: 'invalid_argument', message, hint: "see 'partnerctl --help'" } }, null, 2)}\n`);
      }
    },
  };
  for (const command of [program, ...program.commands, ...program.commands.flatMap((command) => command.commands)]) {
    command.exitOverride();
    command.configureOutput(output);
  }
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      const quiet = ['commander.helpDisplayed', 'commander.version', 'commander.help'];
      return quiet.includes(error.code) ? EXIT.ok : EXIT.usage;
    }
    return report(error, undefined);
  }
  return exitCode;
}

/**
 * Resolves once everything written so far has left the process: a write's callback runs after every
 * earlier chunk was handed to the pipe, file or terminal. A reader that went away (`| head`) ends the wait.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) return resolve();
    stream.once('error', () => resolve());
    stream.write('', () => resolve());
  });
}

// A reader that closed early (`partnerctl audit | head -1`) is not an error of ours: stop quietly.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? EXIT.ok);
  });
}

// Exit explicitly (a PostgreSQL pool's idle timer must not hold an operator's terminal for seconds), but
// only once stdout and stderr are drained: exiting earlier cuts a piped output at the pipe's buffer size.
async function exitWith(code: number): Promise<never> {
  process.exitCode = code;
  await Promise.all([drained(process.stdout), drained(process.stderr)]);
  process.exit(code);
}

main().then(exitWith, (error) => exitWith(report(error, undefined)));
