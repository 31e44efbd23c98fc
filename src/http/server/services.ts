import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { connect } from '../../db/connect.js';
import type { SqliteFileEvent } from '../../db/sql.js';
import { AccessState } from '../../domain/runtime/access.js';
import { accessLog } from '../../domain/runtime/access-log.js';
import { Bookkeeping, bookkeepingLog, logBookkeepingLost } from '../../domain/runtime/bookkeeping.js';
import { ClockSync, clockSyncLog } from '../../domain/runtime/clock-sync.js';
import { InstanceRegistry, REMOVE_FOR_MS, registryLog } from '../../domain/runtime/instances.js';
import { CredentialExchange } from '../../domain/runtime/credentials.js';
import { AssertionVerifier, assertionAudiences } from '../../domain/runtime/assertions.js';
import { DecisionRecorder, decisionsLog, logRecordsLost } from '../../domain/runtime/decision-records.js';
import { ExposureCounter, exposureLog } from '../../domain/runtime/exposure-counts.js';
import { openSigningKeys, SigningKeyWatch } from '../../domain/runtime/signing-key-guard.js';
import type { SigningKeys } from '../../domain/operations/signing-keys.js';
import { TokenVerifier } from '../../domain/operations/tokens.js';
import { STOP_WRITE_LIMIT_MS } from '../../domain/runtime/deferred-writes.js';
import { logUsageLost, UsageCounter, usageLog } from '../../domain/runtime/usage.js';
import { WebhookDeliverer } from '../../domain/runtime/webhook-delivery.js';
import { AppError } from '../../errors.js';
import { loadConfig, VERSION, type DatabaseConfig, type ServerConfig } from '../../config.js';
import { DataLimits } from '../counters/limits.js';
import { Metrics } from '../counters/metrics.js';
import type { SharedRedis } from '../counters/redis.js';
import type { SpanExport } from '../protocol/spans.js';
import { beforeDeadline } from '../../deadline.js';
import { ServiceList } from './service-list.js';

/** PostgreSQL: the server's bounds on opening a connection and on a query outside a transaction (docs/server.md). */

export interface ServicesConfig {
  readonly server: ServerConfig;
  readonly database: DatabaseConfig;
  readonly signingKeyFile: string;
  /** Delays before each webhook retry (PARTNERCTL_WEBHOOK_RETRY_DELAYS); default: the configuration table's. */
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
  /**
   * Stops the background work (revision poll, key-file poll, ...) and closes what the services own, in the
   * reverse of their start, by `deadline` (a performance.now() instant) if given. Safe to call twice.
   */
  close(deadline?: number): Promise<void>;
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
      onFileEvent: databaseFileLog(logger),
    }));
  const clock = options.clock ?? db.clock;
  const clockSync = ClockSync.of(db, clockSyncLog(logger));
  let registry: InstanceRegistry | undefined;
  // SQLite is a file on this machine: no outage to ride out, so no budget (docs/server.md).
  const staleBudgetMs = db.dialect.isRemote ? config.server.staleBudgetMs : 0;
  const access = new AccessState(db, {
    clock,
    stalenessBoundMs: config.server.stalenessBoundMs,
    pollIntervalMs: config.server.pollIntervalMs,
    staleBudgetMs,
    ...accessLog(logger),
    onApplied: () => registry?.revisionApplied(),
  });
  registry = new InstanceRegistry(db, clock, VERSION, () => access.appliedRevision, () => clockSync?.offsetMs ?? null, {
    ...registryLog(logger),
    onBeat: (lastSeenAt) => {
      access.heartbeatWritten(lastSeenAt.getTime());
      // Delivery starts once the instance is registered: the delivery lease's holder is always an instance
      // that `partnerctl instances` lists (its first heartbeat is its registration; later ones do nothing).
      webhooks?.start();
    },
  }, staleBudgetMs);
  const instances = registry;
  const bookkeeping = new Bookkeeping(db, { clock, ...bookkeepingLog(logger) });
  // Loaded only with REDIS_URL: ioredis is a third of a second of start-up on a busy two-core machine.
  const redis = config.server.redisUrl ? new (await import('../counters/redis.js')).SharedRedis(config.server.redisUrl, logger, clock) : null;
  const limits = new DataLimits(db, access, { rate: config.server.defaultRate, burst: config.server.defaultBurst }, clock, redis);
  const intervalMs = options.usageFlushMs ?? config.server.countsFlushMs;
  const usage = config.server.usage ? new UsageCounter(db, clock, { intervalMs, ...usageLog(logger) }) : null;
  const decisions = new DecisionRecorder(db, clock, instances.instanceId, {
    retentionMs: config.server.decisionRetentionMs,
    capPerMinute: options.decisionCapPerMinute ?? config.server.decisionCapPerMinute,
    totalPerMinute: config.server.recordsPerMinute,
    ...decisionsLog(logger),
  });
  const exposure = new ExposureCounter(db, clock, { intervalMs, ...exposureLog(logger) });
  const webhooks = options.webhooks
    ? new WebhookDeliverer(db, {
        retryDelaysMs: config.webhookRetryDelaysMs ?? loadConfig({}).webhookRetryDelaysMs,
        log: logger,
        instanceId: instances.instanceId,
        // Never sleep the event loop on another process's SQLite lock: a busy write is retried on the next tick.
        lockWaitMs: 0,
      })
    : null;
  let keys: SigningKeys | undefined;
  let verifier: TokenVerifier | undefined;
  let exchange: CredentialExchange | undefined;
  let keyWatch: SigningKeyWatch | undefined;
  let spans: SpanExport | null = null;
  const list = new ServiceList([
    { name: 'database', stop: () => (ownsDb ? db.close() : undefined) },
    { name: 'redis', stop: () => redis?.close() },
    {
      // Started last (below) but stopped after access: no outage line while they write what is left.
      name: 'deferred writes',
      stopWithinMs: STOP_WRITE_LIMIT_MS,
      stop: (deadline) => stopDeferredWrites({ usage, bookkeeping, decisions, exposure, webhooks }, deadline, logger),
    },
    {
      name: 'access',
      start: async () => {
        try {
          await access.refresh();
        } catch (error) {
          throw new AppError('database_unavailable', 'the database does not answer', { cause: error });
        }
        access.start();
      },
      stop: () => access.stop(),
    },
    {
      name: 'clock sync',
      // Before the first request: a skewed clock refuses to mint from the start.
      start: async () => {
        await clockSync?.measure();
        clockSync?.start();
      },
      stop: () => clockSync?.stop(),
    },
    // Requests are finished: leave the registry first (bounded, loud on giving up). Started by the server once it listens.
    { name: 'instance registry', stopWithinMs: REMOVE_FOR_MS, stop: (deadline) => instances.stop(deadline) },
    {
      name: 'signing keys',
      start: async () => {
        // Never a fresh key file where keys have signed tokens: the database remembers their ids.
        keys = await openSigningKeys(db, config.signingKeyFile);
        // Expiry and a token's issue time are judged on the same clock the tokens are minted on.
        verifier = new TokenVerifier(keys, options.verifierCacheSize ?? config.server.verifierCacheSize, clock);
        exchange = new CredentialExchange(db, keys, undefined, bookkeeping, clockSync, new AssertionVerifier(assertionAudiences(config.server.tokenUrl)));
        keyWatch = new SigningKeyWatch(keys, verifier, bookkeeping, logger, clock);
        keyWatch.start();
      },
      stop: () => keyWatch?.stop(),
    },
    { name: 'credential exchange', start: () => exchange!.warmUp() },
    {
      name: 'deferred writes started',
      start: () => {
        usage?.start();
        decisions.start();
        exposure.start();
      },
    },
    {
      // OTEL_EXPORTER_OTLP_ENDPOINT: the OpenTelemetry SDK is loaded only then; unset, no span object is ever made.
      name: 'span export',
      start: async () => {
        if (config.server.otlpEndpoint !== null) spans = (await import('./tracing.js')).createSpanExport(config.server.otlpEndpoint);
      },
      stop: () => spans?.shutdown(),
    },
  ]);
  await list.start();
  const metrics =
    config.server.metricsPort !== null || options.metrics
      ? new Metrics({ db, access, verifier: verifier!, limits, redis, usage }, { perPartner: config.server.metricsPerPartner })
      : null;
  return {
    config,
    clock,
    clockSync,
    logger,
    db,
    keys: keys!,
    access,
    verifier: verifier!,
    exchange: exchange!,
    bookkeeping,
    registry: instances,
    redis,
    limits,
    usage,
    decisions,
    exposure,
    metrics,
    spans,
    webhooks,
    close: (deadline) => list.stop(deadline),
  };
}

/** The database handle's log lines: the SQLite file at the configured path gone, or replaced. */
function databaseFileLog(logger: Logger | undefined): (event: SqliteFileEvent) => void {
  return (event) => {
    if (event.kind === 'unavailable') {
      logger?.error(
        { path: event.path, reason: event.reason },
        'DATABASE FILE UNAVAILABLE: the SQLite file at the configured path was deleted, replaced or overwritten; answering 503 until a database is back at the path',
      );
    } else {
      logger?.warn({ path: event.path }, 'database file replaced: the SQLite file now at the configured path was opened in place of the previous one');
    }
  };
}

/**
 * The writes no answer waited for, side by side under one bound: each retries while the database is busy,
 * for STOP_WRITE_LIMIT_MS at most and never past `deadline`; webhook sends under way get 2 s and their
 * outcomes 5 s more alongside. What is left is logged loudly.
 */
async function stopDeferredWrites(
  writers: { usage: UsageCounter | null; bookkeeping: Bookkeeping; decisions: DecisionRecorder; exposure: ExposureCounter; webhooks: WebhookDeliverer | null },
  deadline: number,
  logger: Logger | undefined,
): Promise<void> {
  const { usage, bookkeeping, decisions, exposure, webhooks } = writers;
  const limitMs = Math.max(0, Math.min(STOP_WRITE_LIMIT_MS, deadline - performance.now()));
  const written = (writer: { stop(limitMs: number): Promise<boolean> }) => beforeDeadline(writer.stop(limitMs).catch(() => false), deadline, false);
  const [usageWritten, bookkeepingWritten, decisionsWritten, exposureWritten] = await Promise.all([
    usage ? written(usage) : true,
    written(bookkeeping),
    written(decisions),
    written(exposure),
    webhooks ? beforeDeadline(webhooks.stop().catch(() => {}), deadline, undefined) : undefined,
  ]);
  if (!bookkeepingWritten) logBookkeepingLost(logger, bookkeeping);
  if (usage && !usageWritten) logUsageLost(logger, usage);
  if (!decisionsWritten || !exposureWritten) logRecordsLost(logger, decisions.pending, exposure.pending);
}
