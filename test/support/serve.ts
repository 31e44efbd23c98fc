import { spawn, type ChildProcess } from 'node:child_process';
import { BIN, startCli } from './cli.js';

export interface Served {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

export interface ServeOptions {
  /** Node's own arguments before the binary (`--import <module>`: see shift-clock.mjs). */
  nodeArgs?: string[];
}

/** The URL in serve's listening line on stderr (its first start-up line), once it is there. */
function listeningUrl(stderr: string): string | undefined {
  return /partnerctl serve: listening on (http:\/\/\S+) \(/.exec(stderr)?.[1];
}

/** The real `partnerctl serve --port 0`, its URL read from the one startup line on stderr. */
export async function serve(env: NodeJS.ProcessEnv, args: string[] = [], options: ServeOptions = {}): Promise<Served> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, 'serve', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  // Once its output has all been read ('close'), not at its exit: the last lines a process writes as it exits
  // (a shutdown's report) may still be in the pipe when 'exit' comes, and a loaded test process reads them later.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 30_000);
    const check = () => {
      const url = listeningUrl(stderr);
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    };
    child.stderr!.on('data', check);
    void exited.then((code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  return { child, url, stdout: () => stdout, stderr: () => stderr, exited };
}


/** `partnerctl serve` run in this process (`serveInProcess`). */
export interface ServedInProcess {
  url: string;
  /** The request log (JSON lines), as the binary writes it to stdout. */
  stdout: () => string;
  /** The start-up and shutdown lines, as the binary writes them to stderr. */
  stderr: () => string;
  /** Resolves with the exit code the binary would have exited with. */
  exited: Promise<number>;
  /** SIGTERM, as the binary gets it; resolves with the exit code. Safe to call twice. */
  stop(): Promise<number>;
}

/**
 * `partnerctl serve --port 0 [args]` in this process: the CLI's own serve command on an injected terminal
 * (its log and its lines in buffers, SIGTERM from an emitter), listening on a real port of loopback. For a
 * test whose subject is the server (what a client or an attacker on the network sees), not the process: no
 * process start (0.3-1.5 s of CPU on a loaded two-core machine) and no module loading. The process's own
 * contract (signals, exit codes, a SIGKILL, a frozen instance, a host clock) is tested with `serve`.
 */
export async function serveInProcess(env: NodeJS.ProcessEnv, args: string[] = []): Promise<ServedInProcess> {
  const served = startCli(['serve', '--port', '0', ...args], env);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const url = listeningUrl(served.stderr());
      if (url) {
        clearInterval(timer);
        resolve(url);
      }
    }, 10);
    void served.exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`serve exited with ${code}: ${served.stderr()}`));
    });
  });
  let stopping: Promise<number> | undefined;
  return {
    url,
    stdout: served.stdout,
    stderr: served.stderr,
    exited: served.exited,
    stop: () => {
      if (stopping === undefined) {
        served.signals.emit('SIGTERM');
        stopping = served.exited;
      }
      return stopping;
    },
  };
}
