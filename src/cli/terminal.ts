import type { Environment } from '../config.js';

/**
 * Everything a command may touch of the world outside: its streams, its environment, and whether a person
 * is at the keyboard. The binary passes the process's own (src/cli/main.ts); tests pass buffers and run
 * commands in-process, as GitHub CLI's IOStreams and npm's test harness do.
 */
export interface Terminal {
  readonly out: NodeJS.WritableStream;
  readonly err: NodeJS.WritableStream;
  /** Read by prompts and by inputs given as '-'. */
  readonly in: NodeJS.ReadableStream;
  readonly env: Environment;
  /** Both ends are a terminal: a person can answer prompts and see progress. */
  readonly inIsTTY: boolean;
  readonly outIsTTY: boolean;
  /** stderr is a terminal: progress bars are drawn there. */
  readonly errIsTTY?: boolean;
  /** The terminal's width in columns, when stdout is one (tables fit it; 80 when unknown). */
  readonly columns?: number;
  /** The file descriptor behind `out`, when there is one: `serve`'s request log writes to it directly. */
  readonly outFd?: number;
  /** Where SIGTERM and SIGINT arrive (the process, for the binary): `serve` stops on them. */
  readonly signals: { on(signal: NodeJS.Signals, listener: () => void): unknown; off(signal: NodeJS.Signals, listener: () => void): unknown };
}
