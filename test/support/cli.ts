import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runCli as runCommandLine } from '../../src/cli/run.js';

export const BIN = fileURLToPath(new URL('../../bin/partnerctl', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (throws if it is not exactly one JSON value). */
  // biome-ignore lint/suspicious/noExplicitAny: a command's JSON output, of any shape; each test asserts the keys it reads
  json<T = Record<string, any>>(): T;
}

export interface CliOptions {
  /** What stdin holds (prompts, '-' inputs). */
  input?: string;
}

export interface InProcessCommand {
  /** Resolves with the exit code once the command is done. */
  exited: Promise<number>;
  stdout(): string;
  stderr(): string;
  /** Where SIGTERM and SIGINT reach the command (emit them here). */
  signals: EventEmitter;
}

/**
 * Starts a command line in-process on an injected terminal (buffers; no TTY unless `outIsTTY`): the same
 * code path as the binary minus process start-up. `runCli` waits for it; a long-running one (`serve`) is
 * read while it runs and stopped through `signals`.
 */
export function startCli(args: string[], env: NodeJS.ProcessEnv, options: CliOptions & { outIsTTY?: boolean; columns?: number } = {}): InProcessCommand {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  err.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const signals = new EventEmitter();
  const exited = runCommandLine(['node', 'partnerctl', ...args], {
    out,
    err,
    in: Readable.from([options.input ?? '']),
    env: { ...env },
    inIsTTY: false,
    outIsTTY: options.outIsTTY ?? false,
    ...(options.columns === undefined ? {} : { columns: options.columns }),
    signals,
  }).then(async (code) => {
    // The last chunks of the buffers arrive on the next turn.
    await new Promise((resolve) => setImmediate(resolve));
    return code;
  });
  return { exited, stdout: () => stdout, stderr: () => stderr, signals };
}

/** Runs a command line in-process through an injected terminal (`startCli`) and waits for it. Most CLI tests use this; `runBinary` is the end-to-end proof. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, options: CliOptions & { outIsTTY?: boolean; columns?: number } = {}): Promise<CliResult> {
  const started = startCli(args, env, options);
  const code = await started.exited;
  const stdout = started.stdout();
  return { code, stdout, stderr: started.stderr(), json: () => JSON.parse(stdout) };
}

/** Spawns the real, built CLI (bin/partnerctl -> dist/) with no terminal attached. */
export function runBinary(args: string[], env: NodeJS.ProcessEnv, options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({
        code,
        stdout,
        stderr,
        json: () => JSON.parse(stdout),
      }),
    );
    child.stdin.end(options.input ?? '');
  });
}

/** Runs a bash script (`set -o pipefail`), for pipelines of the real binary: `${BIN} export | ${BIN} apply -f -`. */
export function runShell(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Runs the CLI on a real pseudo-terminal (util-linux `script`), answering each prompt when its text appears.
 */
export function onTerminal(args: string[], env: NodeJS.ProcessEnv, answers: [RegExp, string][]): Promise<{ code: number | null; screen: string }> {
  // `exec`: the shell that script(1) starts ($SHELL, else /bin/sh) must not stay between the terminal and the
  // binary. dash, left waiting, catches the Ctrl-C too and re-raises it once the binary has exited, so `script`
  // reported 130 for a binary that stopped cleanly with 0: the exit code depended on the runner's $SHELL.
  const command = `exec ${[process.execPath, BIN, ...args].map((word) => `'${word.replace(/'/g, `'\\''`)}'`).join(' ')}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], { env: { ...env, TERM: 'xterm', SHELL: '/bin/sh' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let screen = '';
  let answeredUpTo = 0;
  const pending = [...answers];
  // Each prompt is looked for only in what the terminal showed after the previous answer.
  const onData = (chunk: Buffer) => {
    screen += chunk.toString('utf8');
    const next = pending[0];
    if (next?.[0].test(screen.slice(answeredUpTo))) {
      pending.shift();
      answeredUpTo = screen.length;
      child.stdin.write(next[1]);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, screen });
    });
  });
}
