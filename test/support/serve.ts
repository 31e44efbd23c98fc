import { spawn, type ChildProcess } from 'node:child_process';
import { BIN } from './cli.js';

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

/** The real `partnerctl serve --port 0`, its URL read from the one startup line on stderr. */
export async function serve(env: NodeJS.ProcessEnv, args: string[] = [], options: ServeOptions = {}): Promise<Served> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, 'serve', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 30_000);
    const check = () => {
      const match = /partnerctl serve: listening on (http:\/\/\S+) \(/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stderr!.on('data', check);
    void exited.then((code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  return { child, url, stdout: () => stdout, stderr: () => stderr, exited };
}

