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

/**
 * Runs a command line in-process through an injected terminal (buffers, no TTY): the same code path as the
 * binary minus process start-up. Most CLI tests use this; `runBinary` is the end-to-end proof.
 */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, options: CliOptions = {}): Promise<CliResult> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  err.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await runCommandLine(['node', 'partnerctl', ...args], {
    out,
    err,
    in: Readable.from([options.input ?? '']),
    env: { ...env },
    inIsTTY: false,
    outIsTTY: false,
    signals: new EventEmitter(),
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { code, stdout, stderr, json: () => JSON.parse(stdout) };
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
