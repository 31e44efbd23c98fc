import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { DatabaseConfig } from '../../config.js';
import type { Database } from '../../db/client.js';
import { connect } from '../../db/connect.js';
import { AccessState } from '../../domain/access.js';
import { Bookkeeping } from '../../domain/bookkeeping.js';
import { CLOCK_TOLERANCE_MS, ClockSync } from '../../domain/clock-sync.js';
import { InstanceRegistry } from '../../domain/instances.js';
import { CredentialExchange } from '../../domain/credentials.js';
import { DecisionRecorder } from '../../domain/decision-records.js';
import { ExposureCounter } from '../../domain/exposure-counts.js';
import { openSigningKeys, SigningKeyWatch } from '../../domain/signing-key-guard.js';
import type { SigningKeys } from '../../domain/signing-keys.js';
import { TokenVerifier } from '../../domain/tokens.js';
import { STOP_WRITE_LIMIT_MS } from '../../domain/deferred-writes.js';
import { UsageCounter } from '../../domain/usage.js';
import { parseRetryDelays, DEFAULT_RETRY_DELAYS, WebhookDeliverer } from '../../domain/webhook-delivery.js';
import { AppError } from '../../errors.js';
import { VERSION, type ServerConfig } from '../../config.js';
import { DataLimits } from '../counters/limits.js';
import { Metrics } from '../counters/metrics.js';
import { SharedRedis } from '../counters/redis.js';
import type { SpanExport } from '../data-path/spans.js';
import { loggableChain } from '../protocol/errors.js';

/** PostgreSQL: the server's bounds on opening a connection and on a query outside a transaction (docs/server.md). */

export interface ServicesConfig {
  readonly server: ServerConfig;
  readonly database: DatabaseConfig;
  readonly signingKeyFile: string;
  /** Delays before each webhook retry (PARTNERCTL_WEBHOOK_RETRY_DELAYS); default DEFAULT_RETRY_DELAYS. */
  readonly webhookRetryDelaysMs?: readonly number[];
}

export interface ServicesOptions {
  logger?: Logger | undefined;
  clock?: Clock;
  /** An already open database, owned by the caller: used instead of connecting, and not closed by close(). */
  db?: Database;
  /** Verified tokens remembered by the verifier (0: verify every signature again). */
  verifierCacheSize?: number;
  /** Keep metrics even without a metrics port (tests); default: only with config.server.metricsPort. */
  metrics?: boolean;
  /** How often usage counts are written (default 10 s). */
  usageFlushMs?: number;
  /** The gate's refusals recorded per partner and per address per minute (default: the configuration table's). */
  decisionCapPerMinute?: number;
  /** Deliver webhooks from this process (the server: yes; in-process tests: only when they ask). */
  webhooks?: boolean;
}

/**
 * Everything the public API runs on, assembled in one place for the server, the HTTP tests and the
 * benchmark. Services added later (forwarder, limits, usage, metrics) hang off this object too, and their
 * shutdown goes into the one close().
 */
export interface Services {
  readonly config: ServicesConfig;
  /** The injected clock, else the database handle's (on PostgreSQL the database server's, kept by `clockSync`). */
  readonly clock: Clock;
  /** On PostgreSQL (without an injected clock): this host's clock measured against the database's every second; null: one clock. */
  readonly clockSync: ClockSync | null;
  readonly logger: Logger | undefined;
  readonly db: Database;
  readonly keys: SigningKeys;
  readonly access: AccessState;
  readonly verifier: TokenVerifier;
  readonly exchange: CredentialExchange;
  /** Writes no answer waits for (last_used_at, the signing keys seen), never blocking on another's lock. */
  readonly bookkeeping: Bookkeeping;
  /** This instance's row in serve_instances (heartbeat, applied revision); started by the server once it listens. */
  readonly registry: InstanceRegistry;
  /** The shared counters' connection (REDIS_URL); null: every counter is in memory. */
  readonly redis: SharedRedis | null;
  /** Per-partner limits of data requests. */
  readonly limits: DataLimits;
  /** Data requests per partner × company × hour, written every 10 s; null with PUBLIC_API_USAGE=0. */
  readonly usage: UsageCounter | null;
  /** The gate's refusals on record (docs/decisions.md). */
  readonly decisions: DecisionRecorder;
  /** Accepted data requests per key pair, token, company and address, per hour. */
  readonly exposure: ExposureCounter;
  /** Prometheus metrics; null unless a metrics port is configured. */
  readonly metrics: Metrics | null;
  /** Span export over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT); null: none. */
  readonly spans: SpanExport | null;
  /** Sends the outbox's webhook events and finds the reminders (on PostgreSQL while it holds the delivery lease); null: off. */
  readonly webhooks: WebhookDeliverer | null;
  /** Stops the background work (revision poll, key-file poll, ...) and closes what the services own. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Opens the database (unless given), loads the signing keys, confirms the access revision once (a database
 * that does not answer is `database_unavailable`), starts the revision and key-file polls and warms up the
 * credential exchange. On failure everything already opened is closed again.
 */
export async function createServices(config: ServicesConfig, options: ServicesOptions = {}): Promise<Services> {
  const { logger } = options;
  const ownsDb = options.db === undefined;
  // A replaced or deleted SQLite file is noticed (and reopened, or refused) instead of read forever.
  const db =
    options.db ??
    (await connect(config.database, {
      ...(options.clock ? { clock: options.clock } : {}),
      // Nothing on the request path waits on a server that accepts and never answers (a partition).
      connectTimeoutMs: config.server.databaseConnectTimeoutMs,
      queryTimeoutMs: config.server.databaseQueryTimeoutMs,
      watchFile: true,
      onFileEvent: (event) => {
        if (event.kind === 'unavailable') {
          logger?.error(
            { path: event.path, reason: event.reason },
            'DATABASE FILE UNAVAILABLE: the SQLite file at the configured path was deleted, replaced or overwritten; answering 503 until a database is back at the path',
          );
        } else {
          logger?.warn({ path: event.path }, 'database file replaced: the SQLite file now at the configured path was opened in place of the previous one');
        }
      },
    }));
  const clock = options.clock ?? db.clock;
  const clockSync = ClockSync.of(db, {
    onChange: (skewed, offsetMs) => {
      const offset = `${offsetMs > 0 ? '+' : ''}${(offsetMs / 1000).toFixed(1)} s`;
      if (skewed) {
        logger?.error(
          { clock_offset_ms: offsetMs, tolerance_ms: CLOCK_TOLERANCE_MS },
          `CLOCK SKEW: this host's clock is ${offset} off the database server's (tolerance ${CLOCK_TOLERANCE_MS / 1000} s); refusing to mint tokens (503 clock_skewed) until it is back within tolerance: fix the host's time synchronisation`,
        );
      } else {
        logger?.warn({ clock_offset_ms: offsetMs }, `clock back within tolerance (${offset} off the database server's): minting tokens again`);
      }
    },
  });
  let registry: InstanceRegistry | undefined;
  // SQLite is a file on this machine: no outage to ride out, so no budget (docs/server.md).
  const staleBudgetMs = db.dialect.isRemote ? config.server.staleBudgetMs : 0;
  const access = new AccessState(db, {
    clock,
    stalenessBoundMs: config.server.stalenessBoundMs,
    pollIntervalMs: config.server.pollIntervalMs,
    staleBudgetMs,
    onOutage: (event) => {
      if (event.kind === 'start') {
        logger?.error(
          {
            err: loggableChain(event.error),
            last_confirmed_at: new Date(event.lastConfirmedAt).toISOString(),
            revision: event.revision,
            serving_until: event.servingUntil === null ? null : new Date(event.servingUntil).toISOString(),
          },
          event.servingUntil === null
            ? 'DATABASE OUTAGE started: the revision cannot be read; data requests answer 503 past the 1 s staleness bound'
            : 'DATABASE OUTAGE started: the revision cannot be read; data requests are decided from the last confirmed state until serving_until, then 503; token exchanges 503',
        );
      } else {
        logger?.warn(
          {
            since: new Date(event.since).toISOString(),
            ended_at: new Date(event.endedAt).toISOString(),
            duration_ms: event.endedAt - event.since,
            served_unconfirmed: event.servedUnconfirmed,
            revision_before: event.revisionBefore,
            revision: event.revision,
          },
          'database outage ended: the revision was read again; requests served from unconfirmed state during it in served_unconfirmed',
        );
      }
    },
    onApplied: () => registry?.revisionApplied(),
    onListenerLost: (error) =>
      logger?.warn(
        { err: { message: (error as Error)?.message } },
        'the LISTEN connection for access changes was lost; reconnecting (the revision poll covers the gap)',
      ),
  });
  registry = new InstanceRegistry(db, clock, VERSION, () => access.appliedRevision, () => clockSync?.offsetMs ?? null, {
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) {
        logger?.warn({ err: loggableChain(error), failures }, 'instance heartbeat not written (database busy or unavailable); retrying');
      }
    },
    onStale: (error) =>
      logger?.error(
        { err: loggableChain(error) },
        'INSTANCE STALE: no heartbeat written for over 10 s; receipts no longer wait for this instance (still retrying)',
      ),
    onGaveUp: (error) =>
      logger?.error(
        { err: loggableChain(error) },
        'INSTANCE ROW NOT REMOVED: the database did not take the removal within 2 s; `partnerctl instances` shows this instance stale after 10 s',
      ),
    onBeat: (lastSeenAt) => access.heartbeatWritten(lastSeenAt.getTime()),
  }, staleBudgetMs);
  const instances = registry;
  const bookkeeping = new Bookkeeping(db, {
    clock,
    onFull: (cap) =>
      logger?.error(
        { cap },
        `BOOKKEEPING CAP REACHED: ${cap} rows of one kind (last_used_at, refusals) are waiting for the database; newer ones are dropped until a write goes through`,
      ),
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) {
        logger?.warn({ err: loggableChain(error), failures }, 'bookkeeping write deferred (database busy or unavailable); retrying');
      }
    },
  });
  const redis = config.server.redisUrl ? new SharedRedis(config.server.redisUrl, logger, clock) : null;
  const limits = new DataLimits(db, access, { rate: config.server.defaultRate, burst: config.server.defaultBurst }, clock, redis);
  const usage = config.server.usage
    ? new UsageCounter(db, clock, {
        intervalMs: options.usageFlushMs ?? config.server.countsFlushMs,
        onFull: (cap) =>
          logger?.error(
            { cap },
            `USAGE CAP REACHED: ${cap} usage cells (partner × company × hour) are waiting for the database; requests in new cells are not counted until a write goes through`,
          ),
        onFailure: (error, failures) => {
          if (failures === 1 || failures % 20 === 0) {
            logger?.warn({ err: loggableChain(error), failures }, 'usage counts not written (database busy or unavailable); kept for the next attempt');
          }
        },
      })
    : null;
  const recordsFailed = (what: string) => (error: unknown, failures: number) => {
    if (failures === 1 || failures % 20 === 0) logger?.warn({ err: loggableChain(error), failures }, `${what} not written (database busy or unavailable); kept for the next attempt`);
  };
  const decisions = new DecisionRecorder(db, clock, instances.instanceId, {
    retentionMs: config.server.decisionRetentionMs,
    capPerMinute: options.decisionCapPerMinute ?? config.server.decisionCapPerMinute,
    onFailure: recordsFailed('refusals on record'),
  });
  const exposure = new ExposureCounter(db, clock, {
    intervalMs: options.usageFlushMs ?? config.server.countsFlushMs,
    onFull: (cap) =>
      logger?.error(
        { cap },
        `EXPOSURE CAP REACHED: ${cap} exposure cells (token × company × address × hour) are waiting for the database; requests in new cells are not counted until a write goes through`,
      ),
    onFailure: recordsFailed('exposure counts'),
  });
  const webhooks = options.webhooks
    ? new WebhookDeliverer(db, {
        retryDelaysMs: config.webhookRetryDelaysMs ?? (parseRetryDelays(DEFAULT_RETRY_DELAYS) as number[]),
        log: logger,
        instanceId: instances.instanceId,
        // Never sleep the event loop on another process's SQLite lock: a busy write is retried on the next tick.
        lockWaitMs: 0,
      })
    : null;
  const stoppers: Array<() => void | Promise<void>> = [];
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      for (const stop of stoppers.reverse()) await Promise.resolve(stop()).catch(() => {});
      // Requests are finished: leave the registry first (bounded, loud on giving up), then stop the rest.
      await instances.stop().catch(() => false);
      clockSync?.stop();
      access.stop();
      // Each retries while the database is busy, for STOP_WRITE_LIMIT_MS at most (side by side: one bound);
      // webhook sends under way get 2 s and their outcomes 5 s more alongside (what is left is logged loudly).
      const [usageWritten, bookkeepingWritten, decisionsWritten, exposureWritten] = await Promise.all([
        usage?.stop().catch(() => false) ?? true,
        bookkeeping.stop().catch(() => false),
        decisions.stop().catch(() => false),
        exposure.stop().catch(() => false),
        webhooks?.stop().catch(() => {}),
      ]);
      if (!bookkeepingWritten) {
        logger?.error(
          { lost: bookkeeping.pending },
          `bookkeeping NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: ${bookkeeping.pending} rows (when key pairs were last used or refused, signing keys seen) are lost`,
        );
      }
      if (usage && !usageWritten) {
        const lost = usage.totals();
        const line = `usage counts NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: ${lost.requests} requests (${lost.accepted} accepted, ${lost.clientErrors} 4xx, ${lost.serverErrors} 5xx) of ${lost.partners} partners are lost`;
        logger?.error({ lost }, line);
      }
      if (!decisionsWritten || !exposureWritten) {
        logger?.error(
          { refusals: decisions.pending, exposure_cells: exposure.pending },
          `refusals on record or exposure counts NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: they are lost`,
        );
      }
      await redis?.close();
      if (ownsDb) await db.close().catch(() => {});
    })();
    return closing;
  };
  let keys: SigningKeys;
  let verifier: TokenVerifier;
  let exchange: CredentialExchange;
  try {
    try {
      await access.refresh();
    } catch (error) {
      throw new AppError('database_unavailable', 'the database does not answer', { cause: error });
    }
    access.start();
    // Before the first request: a skewed clock refuses to mint from the start.
    await clockSync?.measure();
    clockSync?.start();
    // Never a fresh key file where keys have signed tokens: the database remembers their ids.
    keys = await openSigningKeys(db, config.signingKeyFile);
    // Expiry and a token's issue time are judged on the same clock the tokens are minted on.
    verifier = new TokenVerifier(keys, options.verifierCacheSize ?? config.server.verifierCacheSize, clock);
    exchange = new CredentialExchange(db, keys, undefined, bookkeeping, clockSync);
    const keyWatch = new SigningKeyWatch(keys, verifier, bookkeeping, logger, clock);
    keyWatch.start();
    stoppers.push(() => keyWatch.stop());
    await exchange.warmUp();
    usage?.start();
    decisions.start();
    exposure.start();
    webhooks?.start();
  } catch (error) {
    await close();
    throw error;
  }
  // OTEL_EXPORTER_OTLP_ENDPOINT: the OpenTelemetry SDK is loaded only then; unset, no span object is ever made.
  let spans: SpanExport | null = null;
  if (config.server.otlpEndpoint !== null) {
    const exported = (await import('./tracing.js')).createSpanExport(config.server.otlpEndpoint);
    stoppers.push(() => exported.shutdown());
    spans = exported;
  }
  const metrics =
    config.server.metricsPort !== null || options.metrics
      ? new Metrics({ db, access, verifier, limits, redis, usage }, { perPartner: config.server.metricsPerPartner })
      : null;
  return { config, clock, clockSync, logger, db, keys, access, verifier, exchange, bookkeeping, registry: instances, redis, limits, usage, decisions, exposure, metrics, spans, webhooks, close };
}
