import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { redactUrl, resolveDatabase, resolveSigningKeyFile } from '../../config.js';
import type { Database } from '../../db/client.js';
import { AppError } from '../../errors.js';
import { parseServerConfig, type ServerConfig } from '../config.js';
import { startMetricsListener } from '../counters/metrics.js';
import { buildApp } from './app.js';
import { BatchedLines } from './log-destination.js';
import { createServices } from './services.js';

const REQUEST_LOG_BATCH_CHARS = 12_288;
const REQUEST_LOG_FLUSH_MS = 250;

export interface ServeOptions {
  databaseUrl?: string;
  host?: string;
  port?: number;
  upstream?: string;
  metricsPort?: number | string;
  metricsHost?: string;
}

export interface StartOptions extends ServeOptions {
  env?: NodeJS.ProcessEnv;
  /** The request log; default one pino JSON line per request on stdout, false for none. */
  logger?: Logger | false;
}

export interface RunningServer {
  readonly url: string;
  /** The metrics listener's URL (GET /metrics), when a metrics port is configured. */
  readonly metricsUrl: string | null;
  readonly app: FastifyInstance;
  readonly config: ServerConfig;
  readonly db: Database;
  /** Stops accepting, lets requests in flight finish, then closes the database. Safe to call twice. */
  close(): Promise<void>;
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** Opens everything the API needs and listens; for the CLI (through runServer) and in-process tests. */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const env = options.env ?? process.env;
  const config = parseServerConfig(options, env);
  const database = resolveDatabase(options.databaseUrl, env);
  // Batched: lines gather in memory and go out in one write per 12 KiB or per 250 ms, whichever comes first
  // (one write per request cost more than the rest of the log); flushed synchronously on close.
  const destination =
    options.logger === undefined
      ? new BatchedLines(pino.destination({ dest: 1, sync: false }), REQUEST_LOG_BATCH_CHARS, REQUEST_LOG_FLUSH_MS)
      : undefined;
  const logger =
    options.logger === false
      ? undefined
      : (options.logger ?? pino({ level: config.logLevel, base: null, timestamp: pino.stdTimeFunctions.isoTime }, destination!));
  const services = await createServices({ server: config, database, signingKeyFile: resolveSigningKeyFile(database, env) }, { logger });
  const { db } = services;
  let app: FastifyInstance | undefined;
  let metricsListener: { url: string; close(): Promise<void> } | undefined;
  const release = async (): Promise<void> => {
    await metricsListener?.close();
    await services.close();
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
  let closing: Promise<void> | undefined;
  return {
    url: urlOf(running.server.address() as AddressInfo),
    metricsUrl: metricsListener?.url ?? null,
    app: running,
    config,
    db,
    close: () => {
      closing ??= (async () => {
        // Keep-alive connections become idle once their request is answered; close them as they do,
        // instead of waiting out the keep-alive timeout.
        const sweeper = setInterval(() => running.server.closeIdleConnections(), 100);
        try {
          await running.close();
        } finally {
          clearInterval(sweeper);
          await release();
        }
      })();
      return closing;
    },
  };
}

/**
 * `partnerctl serve`: listens until SIGTERM or SIGINT, then stops accepting, finishes the requests in
 * flight, closes the database and resolves. A second signal drops the connections still open.
 */
export async function runServer(options: ServeOptions): Promise<void> {
  const server = await startServer(options);
  const { provider, url } = server.db.config;
  const where = provider === 'sqlite' ? url : redactUrl(url);
  process.stderr.write(`partnerctl serve: listening on ${server.url} (${provider} ${where})\n`);
  if (server.metricsUrl) process.stderr.write(`partnerctl serve: metrics on ${server.metricsUrl}/metrics\n`);

  const signals: NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];
  let received = 0;
  let onSignal: (signal: NodeJS.Signals) => void = () => {};
  await new Promise<void>((resolve) => {
    onSignal = (signal) => {
      received++;
      if (received === 1) {
        process.stderr.write(`partnerctl serve: ${signal}: finishing requests in flight\n`);
        resolve();
      } else {
        server.app.server.closeAllConnections();
      }
    };
    for (const signal of signals) process.on(signal, onSignal);
  });
  try {
    await server.close();
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
  }
  process.stderr.write('partnerctl serve: stopped\n');
}
