// The binary's entry: runs the command line against the process's own terminal, then exits once every
// byte has left.
import { EXIT, firstLine } from '../errors.js';
import { runCli } from './run.js';
import { say, writeLine } from './say.js';
import type { Terminal } from './terminal.js';

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

const terminal: Terminal = {
  out: process.stdout,
  err: process.stderr,
  in: process.stdin,
  env: process.env,
  inIsTTY: process.stdin.isTTY === true,
  outIsTTY: process.stdout.isTTY === true,
  errIsTTY: process.stderr.isTTY === true,
  columns: process.stdout.isTTY ? process.stdout.columns : undefined,
  outFd: 1,
  signals: process,
};

runCli(process.argv, terminal).then(exitWith, (error: unknown) => {
  writeLine(process.stderr, say`partnerctl: internal_error: ${firstLine(error)}`);
  return exitWith(EXIT.error);
});
