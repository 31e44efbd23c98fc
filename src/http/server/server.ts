import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { resolveDatabase, VERSION, type Config, type ServerConfig } from '../../config.js';
import { resolveSigningKeyFile } from '../../db/dialect.js';
import type { Database } from '../../db/client.js';
import { STOP_WRITE_LIMIT_MS } from '../../domain/runtime/deferred-writes.js';
import { AppError } from '../../errors.js';
import { terminalSafe } from '../../text.js';
import { startMetricsListener } from '../counters/metrics.js';
import { buildApp } from './app.js';
import { BatchedLines } from './log-destination.js';
import { beforeDeadline } from '../../deadline.js';
import { createServices } from './services.js';

const REQUEST_LOG_BATCH_CHARS = 12_288;
/** The request log goes out at least this often (docs/server.md, Logs): a line reaches the pipe within it. */
export const REQUEST_LOG_FLUSH_MS = 250;
/**
 * The drain time on SIGTERM is the upstream timeout plus this: a request at the engine is answered (504 at
 * the latest) within the upstream timeout, and its answer gets this long to go out. Connections still open
 * then (a client still sending its request, say) are closed. docs/server.md says so.
 */
export const SHUTDOWN_GRACE_MS = 1_000;
/** Kept from the shutdown's bound for what follows the stop: flushing the log, the last line, the exit. */
const EXIT_MARGIN_MS = 500;

/** What the server takes from the terminal it runs in: where its lines go, and the signals that stop it. */
export interface ServerTerminal {
  /** Start-up and shutdown lines. */
  readonly err: NodeJS.WritableStream;
  /** The request log's destination: the file descriptor behind stdout (the log writes to it directly). */
  readonly outFd?: number;
  /** Without a file descriptor (a terminal given as streams, as tests give it): the log's lines go here. */
  readonly out?: NodeJS.WritableStream;
  /** stdout is a terminal: the log is written for a person (pino-pretty), JSON lines otherwise. */
  readonly outIsTTY?: boolean;
  /** SIGTERM and SIGINT arrive here (the process, for the binary). */
  readonly signals: { on(signal: NodeJS.Signals, listener: () => void): unknown; off(signal: NodeJS.Signals, listener: () => void): unknown };
}

export interface StartOptions {
  /** The configuration, parsed once by the entry point (src/config.ts). */
  config: Config;
  /** --database-url, when given (it wins over DATABASE_URL). */
  databaseUrl?: string | undefined;
  /**
   * The request log: pino JSON lines to this file descriptor (default stdout) or to this stream, a logger of
   * the caller's, or false for none.
   */
  logger?: Logger | false | { fd: number } | { lines: NodeJS.WritableStream };
}

export interface RunningServer {
  readonly url: string;
  /** The metrics listener's URL (GET /metrics), when a metrics port is configured. */
  readonly metricsUrl: string | null;
  readonly app: FastifyInstance;
  readonly config: ServerConfig;
  readonly db: Database;
  /** This instance's id in serve_instances (`partnerctl instances`). */
  readonly instanceId: string;
  /** Stops accepting, lets requests in flight finish, then closes the database. Safe to call twice. */
  close(): Promise<void>;
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** Opens everything the API needs and listens; for the CLI (through runServer) and in-process tests. */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const config = options.config.server;
  if (config === null) throw new AppError('internal_error', 'the configuration was not loaded for serve');
  const env = options.config.env;
  const database = resolveDatabase(options.databaseUrl, env);
  const requested = options.logger ?? { fd: 1 };
  // Batched: lines gather in memory and go out in one write per 12 KiB or per 250 ms, whichever comes first
  // (one write per request cost more than the rest of the log); flushed synchronously on close.
  const destination =
    requested !== false && 'fd' in requested
      ? new BatchedLines(pino.destination({ dest: requested.fd, sync: false }), REQUEST_LOG_BATCH_CHARS, REQUEST_LOG_FLUSH_MS)
      : undefined;
  const lines = requested !== false && 'lines' in requested ? requested.lines : undefined;
  const logger =
    requested === false
      ? undefined
      : destination !== undefined || lines !== undefined
        ? pino({ level: config.logLevel, base: null, timestamp: pino.stdTimeFunctions.isoTime }, destination ?? lines)
        : (requested as Logger);
  const services = await createServices(
    { server: config, database, signingKeyFile: resolveSigningKeyFile(database, env), webhookRetryDelaysMs: options.config.webhookRetryDelaysMs },
    { logger, webhooks: true },
  );
  const { db } = services;
  let app: FastifyInstance | undefined;
  let metricsListener: { url: string; close(): Promise<void> } | undefined;
  const release = async (deadline?: number): Promise<void> => {
    if (metricsListener) await beforeDeadline(metricsListener.close(), deadline ?? Infinity, undefined);
    await services.close(deadline);
    if (destination) {
      destination.close();
      try {
        destination.flushSync();
      } catch {
        destination.flush();
      }
    } else {
      logger?.flush();
    }
  };
  try {
    app = await buildApp({ ...services, config, ...(logger ? { logger } : {}) });
    try {
      await app.listen({ host: config.host, port: config.port });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why = code === 'EADDRINUSE' ? 'is already in use' : code === 'EADDRNOTAVAIL' ? 'is not an address of this machine' : `cannot be used (${code ?? (error as Error).message})`;
      throw new AppError('invalid_argument', `${config.host}:${config.port} ${why}`, {
        hint: 'choose another --port / PORT or --host / HOST',
        cause: error,
      });
    }
    if (services.metrics && config.metricsPort !== null) {
      try {
        metricsListener = await startMetricsListener(services.metrics, config.metricsHost, config.metricsPort);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        throw new AppError('invalid_argument', `the metrics address ${config.metricsHost}:${config.metricsPort} cannot be used (${code ?? (error as Error).message})`, {
          hint: 'choose another --metrics-port / PUBLIC_API_METRICS_PORT or --metrics-host',
          cause: error,
        });
      }
    }
  } catch (error) {
    await app?.close().catch(() => {});
    await release();
    throw error;
  }
  const running = app;
  const address = urlOf(running.server.address() as AddressInfo);
  services.registry.start(address);
  logger?.info(
    { instance_id: services.registry.instanceId, host: services.registry.host, pid: process.pid, version: VERSION, address },
    'serve instance registered',
  );
  let closing: Promise<void> | undefined;
  return {
    url: address,
    metricsUrl: metricsListener?.url ?? null,
    app: running,
    config,
    db,
    instanceId: services.registry.instanceId,
    close: () => {
      closing ??= (async () => {
        // docs/server.md: the process exits at most the drain time + the 10 s of writes after the signal.
        const deadline = performance.now() + config.upstreamTimeoutMs + SHUTDOWN_GRACE_MS + STOP_WRITE_LIMIT_MS - EXIT_MARGIN_MS;
        // Keep-alive connections become idle once their request is answered; close them as they do,
        // instead of waiting out the keep-alive timeout.
        const sweeper = setInterval(() => running.server.closeIdleConnections(), 100);
        // The drain time bounds the wait for requests in flight, whatever a client or the engine does.
        const drained = setTimeout(() => running.server.closeAllConnections(), config.upstreamTimeoutMs + SHUTDOWN_GRACE_MS);
        try {
          await running.close();
        } finally {
          clearInterval(sweeper);
          clearTimeout(drained);
          await release(deadline);
        }
      })();
      return closing;
    },
  };
}

/**
 * `partnerctl serve`: listens until SIGTERM or SIGINT (from the terminal's signals), then stops accepting,
 * finishes the requests in flight, closes the database and resolves. A second signal drops the connections
 * still open. Writes only to the terminal it is given.
 */
/** The log as a person at a terminal reads it: one coloured line per event, times to the millisecond. */
async function readableLog(config: Config, terminal: ServerTerminal): Promise<Logger> {
  const { default: pretty } = await import('pino-pretty');
  const stream = pretty({ destination: terminal.outFd ?? 1, sync: true, colorize: config.colourAllowed, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  // pino-pretty prints a message raw and other strings with only C0 escaped: every string of a line (a path,
  // a user agent, an error's message) is escaped first, as everything a person reads is.
  const escaped = { write: (lines: string) => stream.write(readableLines(lines)) };
  return pino({ level: config.server?.logLevel ?? 'info', base: null, timestamp: pino.stdTimeFunctions.isoTime }, escaped);
}

/** JSON log lines with every string value escaped for a terminal (a line that is not JSON: escaped whole). */
export function readableLines(lines: string): string {
  return lines
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return `${JSON.stringify(JSON.parse(line), (_key, value: unknown) => (typeof value === 'string' ? terminalSafe(value) : value))}\n`;
      } catch {
        return `${JSON.stringify({ msg: terminalSafe(line) })}\n`;
      }
    })
    .join('');
}

export async function runServer(options: StartOptions, terminal: ServerTerminal): Promise<void> {
  const log = terminal.outIsTTY
    ? await readableLog(options.config, terminal)
    : terminal.outFd === undefined && terminal.out !== undefined
      ? { lines: terminal.out }
      : { fd: terminal.outFd ?? 1 };
  const server = await startServer({ ...options, logger: options.logger ?? log });
  const say = (line: string) => terminal.err.write(`partnerctl serve: ${line}\n`);
  const signals: NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];
  const listeners = new Map<NodeJS.Signals, () => void>();
  let received = 0;
  // The signals are taken before "listening" is said: a Ctrl-C right after it stops the server cleanly.
  const stopped = new Promise<void>((resolve) => {
    for (const signal of signals) {
      const listener = () => {
        received++;
        if (received === 1) {
          say(`${signal}: finishing requests in flight`);
          resolve();
        } else {
          server.app.server.closeAllConnections();
        }
      };
      listeners.set(signal, listener);
      terminal.signals.on(signal, listener);
    }
  });

  const { provider, url } = server.db.config;
  const where = server.db.dialect.describe(url);
  if (server.config.upstream === null) {
    say('no upstream engine (--upstream / PUBLIC_API_UPSTREAM_URL): data requests will get 503 upstream_unavailable; tokens are still exchanged');
  }
  // The database's path or URL is the operator's value: escaped like every value a person reads.
  say(`listening on ${server.url} (${provider} ${terminalSafe(where)}), instance ${server.instanceId}`);
  if (server.metricsUrl) say(`metrics on ${server.metricsUrl}/metrics`);

  await stopped;
  try {
    await server.close();
  } finally {
    for (const [signal, listener] of listeners) terminal.signals.off(signal, listener);
  }
  say('stopped');
}
