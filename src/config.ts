import { readFileSync } from 'node:fs';
import { PACKAGE_ROOT } from './package-root.js';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { redactUrl } from './config/parsers.js';
import { FIXED, VARIABLES, type Name, type Values, type Variable } from './config/table.js';
import { AppError } from './errors.js';
import type { Rate } from './rates.js';

export { redactUrl };

/**
 * The one place that knows the environment's variables, the CLI's and the server's: declared once in
 * src/config/table.ts, parsed once by the CLI's entry point (src/cli/run.ts) from the terminal's environment;
 * everything else receives the frozen, typed result.
 */
export type Environment = Readonly<Record<string, string | undefined>>;

/** The version of this package, from its package.json. */
export const VERSION: string = (() => {
  try {
    const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof manifest.version === 'string' ? manifest.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();

/** The fixed tuning values of the table (src/config/table.ts), by name. */
export const TUNING: { readonly [Key in keyof typeof FIXED]: number } = Object.freeze(
  Object.fromEntries(Object.entries(FIXED).map(([key, fixed]) => [key, fixed.value])) as { [Key in keyof typeof FIXED]: number },
);

/** The variables every command reads (those read by `serve` alone are parsed only for it). */
type CliName = { [N in Name]: (typeof VARIABLES)[N]['readBy'] extends 'serve' ? never : N }[Name];
type CliValues = Pick<Values, CliName>;

/** What the database and signing-key resolvers read. */
export type DatabaseEnvironment = Readonly<Partial<Pick<Values, 'DATABASE_URL' | 'PARTNERCTL_SIGNING_KEY_FILE' | 'PARTNERCTL_DB_POOL_SIZE' | 'XDG_DATA_HOME' | 'XDG_CONFIG_HOME'>>>;

/** What `partnerctl serve` reads on top of the CLI's configuration. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** The recommendation engine's base URL; null when none is configured (data requests then get 503). */
  readonly upstream: URL | null;
  readonly upstreamTimeoutMs: number;
  /** How long a client may take to send a whole request (headers and body) before 408; also how long a connection may stay open without one. */
  readonly requestTimeoutMs: number;
  /** Open client connections at once, in all and from one address (an IPv6 /64); a trusted proxy is not held to the second. */
  readonly maxConnections: number;
  readonly maxConnectionsPerAddress: number;
  /** Exact origins allowed for browser (CORS) access; empty means CORS is off. */
  readonly corsOrigins: readonly string[];
  /** The token endpoint's public URL (PUBLIC_API_TOKEN_URL): what a client assertion's aud names; null: none accepted. */
  readonly tokenUrl: URL | null;
  /** Token exchanges allowed per access key per window; 0 turns the limit off. */
  readonly tokenRateLimitPerKey: number;
  /** Token exchanges allowed per client address per window; 0 turns the limit off. */
  readonly tokenRateLimitPerIp: number;
  readonly rateLimitWindowMs: number;
  /** Largest accepted body on data requests (the token endpoint has its own 16 KiB). */
  readonly bodyLimitBytes: number;
  readonly logLevel: string;
  /** Data-request limit of partners without their own (PUBLIC_API_DEFAULT_RATE_LIMIT); null: none. */
  readonly defaultRate: Rate | null;
  /** Their burst (PUBLIC_API_DEFAULT_BURST); null: the default rate's count. */
  readonly defaultBurst: number | null;
  /** Counters shared by every instance through this Redis (REDIS_URL); null: counters in memory. */
  readonly redisUrl: string | null;
  /** Count data requests per partner × company × hour into usage_hours (PUBLIC_API_USAGE, default on). */
  readonly usage: boolean;
  /** How long the gate's refusals and the exposure counts are kept (PUBLIC_API_DECISION_RETENTION, default 30d). */
  readonly decisionRetentionMs: number;
  /** Answers recorded per minute by one server in all (PUBLIC_API_RECORDS_PER_MINUTE); beyond, counted only. */
  readonly recordsPerMinute: number;
  /** The metrics listener's port (--metrics-port / PUBLIC_API_METRICS_PORT); null: no metrics. */
  readonly metricsPort: number | null;
  /** Its address (--metrics-host / PUBLIC_API_METRICS_HOST), loopback by default. */
  readonly metricsHost: string;
  /** Series per partner too (PUBLIC_API_METRICS_PER_PARTNER=1); off by default for cardinality. */
  readonly metricsPerPartner: boolean;
  /**
   * PostgreSQL: how long data requests are still decided from the last confirmed state while the database
   * does not answer (PUBLIC_API_STALE_BUDGET, default 120 s); 0: 503 past the staleness bound.
   */
  readonly staleBudgetMs: number;
  /** Peers whose X-Forwarded-For is believed (PUBLIC_API_TRUSTED_PROXIES), in proxy-addr's terms (`private` as `uniquelocal`); empty: none. */
  readonly trustedProxies: readonly string[];
  /** Where spans go over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT); null: no SDK loaded, no spans. */
  readonly otlpEndpoint: URL | null;
  /** GitHub's secret-scanning alerts at POST /secret-scanning/github (PUBLIC_API_SECRET_SCANNING=github); null: off. */
  readonly secretScanning: SecretScanningConfig | null;
  /** Past this without a confirmed poll, the gate checks the access revision itself (fixed, like those below). */
  readonly stalenessBoundMs: number;
  /** How often the access revision is polled (fixed). */
  readonly pollIntervalMs: number;
  /** PostgreSQL: opening a connection is given up after this (fixed). */
  readonly databaseConnectTimeoutMs: number;
  /** PostgreSQL: a query outside a transaction is given up after this (fixed). */
  readonly databaseQueryTimeoutMs: number;
  /** Verified tokens remembered (fixed). */
  readonly verifierCacheSize: number;
  /** How often usage and exposure counts are written (fixed). */
  readonly countsFlushMs: number;
  /** The gate's refusals recorded per partner and per address per minute (fixed). */
  readonly decisionCapPerMinute: number;
}

export interface SecretScanningConfig {
  /** Where GitHub's signing keys are listed (PUBLIC_API_SECRET_SCANNING_KEYS_URL). */
  readonly keysUrl: URL;
  /** What a genuine live credential reported gets (PUBLIC_API_SECRET_SCANNING_ACTION): contained, or only recorded. */
  readonly action: 'contain' | 'report';
  /** Alert requests per client address per PUBLIC_API_RATE_LIMIT_WINDOW_MS (PUBLIC_API_SECRET_SCANNING_RATE_LIMIT); 0: no limit. */
  readonly rateLimitPerIp: number;
}

/** `serve`'s flags, which win over the variables they name (the table's `flag`, camel-cased as commander names it). */
export interface ServerFlags {
  host?: string;
  port?: number | string;
  upstream?: string;
  metricsPort?: number | string;
  metricsHost?: string;
}

/** What partnerctl takes from its environment (and `serve` from its flags), parsed once, frozen. */
export interface Config {
  readonly version: string;
  /** The variables the database and key-file resolvers read (DATABASE_URL, XDG_DATA_HOME…). */
  readonly env: DatabaseEnvironment;
  readonly defaultActor: string | undefined;
  /** NO_COLOR unset and TERM not 'dumb'. */
  readonly colourAllowed: boolean;
  /** Delays before each webhook retry (PARTNERCTL_WEBHOOK_RETRY_DELAYS); after the last, a delivery is given up. */
  readonly webhookRetryDelaysMs: readonly number[];
  /** The server's settings, when loaded for `serve` (loadConfig's `serve`); null otherwise. */
  readonly server: ServerConfig | null;
}

const DECLARED = Object.entries(VARIABLES) as Array<[Name, Variable]>;

/** How a problem names its variable: the flag first where one can set it too. */
function label(name: Name, variable: Variable): string {
  return variable.flag === undefined ? name : `${variable.flag} / ${name}`;
}

/**
 * Reads the declared variables (the server's only for `serve`): a variable given is trimmed (blank is unset)
 * unless verbatim, an unset one takes its default; every problem, each naming its variable, in one
 * invalid_argument.
 */
function parseVariables(env: Environment, serve: false): CliValues;
function parseVariables(env: Environment, serve: true): Values;
function parseVariables(env: Environment, serve: boolean): CliValues | Values {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, variable] of DECLARED) {
    if (variable.readBy === 'serve' && !serve) continue;
    const given = variable.verbatim ? env[name] : env[name]?.trim() || undefined;
    const text = given ?? ('default' in variable ? variable.default : undefined);
    values[name] = text === undefined ? undefined : variable.parse(text, (message) => problems.push(`${label(name, variable)} ${message}`));
  }
  if (problems.length > 0) throw new AppError('invalid_argument', problems.join('; '));
  return values as Values;
}

function serverConfig(values: Values): ServerConfig {
  const metricsPort = values.PUBLIC_API_METRICS_PORT ?? null;
  if (metricsPort !== null && metricsPort !== 0 && metricsPort === values.PORT && values.PUBLIC_API_METRICS_HOST === values.HOST) {
    const { PUBLIC_API_METRICS_PORT, PORT } = VARIABLES;
    throw new AppError(
      'invalid_argument',
      `${label('PUBLIC_API_METRICS_PORT', PUBLIC_API_METRICS_PORT)} must differ from ${label('PORT', PORT)}: metrics are never served on the public port`,
    );
  }
  return Object.freeze({
    host: values.HOST,
    port: values.PORT,
    upstream: values.PUBLIC_API_UPSTREAM_URL ?? null,
    upstreamTimeoutMs: values.PUBLIC_API_UPSTREAM_TIMEOUT_MS,
    requestTimeoutMs: values.PUBLIC_API_REQUEST_TIMEOUT_MS,
    maxConnections: values.PUBLIC_API_MAX_CONNECTIONS,
    maxConnectionsPerAddress: values.PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS,
    corsOrigins: values.PUBLIC_API_CORS_ORIGINS ?? Object.freeze([]),
    tokenUrl: values.PUBLIC_API_TOKEN_URL ?? null,
    tokenRateLimitPerKey: values.PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY,
    tokenRateLimitPerIp: values.PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP,
    rateLimitWindowMs: values.PUBLIC_API_RATE_LIMIT_WINDOW_MS,
    bodyLimitBytes: values.PUBLIC_API_BODY_LIMIT_BYTES,
    logLevel: values.LOG_LEVEL,
    defaultRate: values.PUBLIC_API_DEFAULT_RATE_LIMIT ?? null,
    defaultBurst: values.PUBLIC_API_DEFAULT_BURST ?? null,
    redisUrl: values.REDIS_URL ?? null,
    usage: values.PUBLIC_API_USAGE,
    decisionRetentionMs: values.PUBLIC_API_DECISION_RETENTION,
    recordsPerMinute: values.PUBLIC_API_RECORDS_PER_MINUTE,
    metricsPort,
    metricsHost: values.PUBLIC_API_METRICS_HOST,
    metricsPerPartner: values.PUBLIC_API_METRICS_PER_PARTNER,
    staleBudgetMs: values.PUBLIC_API_STALE_BUDGET,
    trustedProxies: values.PUBLIC_API_TRUSTED_PROXIES ?? Object.freeze([]),
    otlpEndpoint: values.OTEL_EXPORTER_OTLP_ENDPOINT ?? null,
    secretScanning:
      values.PUBLIC_API_SECRET_SCANNING === 'github'
        ? Object.freeze({
            keysUrl: values.PUBLIC_API_SECRET_SCANNING_KEYS_URL,
            action: values.PUBLIC_API_SECRET_SCANNING_ACTION,
            rateLimitPerIp: values.PUBLIC_API_SECRET_SCANNING_RATE_LIMIT,
          })
        : null,
    stalenessBoundMs: TUNING.stalenessBoundMs,
    pollIntervalMs: TUNING.pollIntervalMs,
    databaseConnectTimeoutMs: TUNING.databaseConnectTimeoutMs,
    databaseQueryTimeoutMs: TUNING.databaseQueryTimeoutMs,
    verifierCacheSize: TUNING.verifierCacheSize,
    countsFlushMs: TUNING.countsFlushMs,
    decisionCapPerMinute: TUNING.decisionCapPerMinute,
  });
}

/**
 * Parses the environment once, every problem collected into one error. With `serve` (its flags), the
 * server's variables too, the flags winning over the variables they name; without, they are not looked at
 * (no other command reads them).
 */
export function loadConfig(env: Environment, serve?: ServerFlags): Config {
  if (serve === undefined) return cliConfig(parseVariables(env, false), null);
  const input: Record<string, string | undefined> = { ...env };
  for (const [name, variable] of DECLARED) {
    if (variable.readBy !== 'serve' || variable.flag === undefined) continue;
    const flag = serve[variable.flag.slice(2).replace(/-(\w)/g, (_, letter: string) => letter.toUpperCase()) as keyof ServerFlags];
    if (flag !== undefined) input[name] = String(flag);
  }
  const values = parseVariables(input, true);
  return cliConfig(values, serverConfig(values));
}

function cliConfig(values: CliValues, server: ServerConfig | null): Config {
  return Object.freeze({
    version: VERSION,
    env: Object.freeze({
      DATABASE_URL: values.DATABASE_URL,
      PARTNERCTL_SIGNING_KEY_FILE: values.PARTNERCTL_SIGNING_KEY_FILE,
      PARTNERCTL_DB_POOL_SIZE: values.PARTNERCTL_DB_POOL_SIZE,
      XDG_DATA_HOME: values.XDG_DATA_HOME,
      XDG_CONFIG_HOME: values.XDG_CONFIG_HOME,
    }),
    defaultActor: values.PARTNERCTL_ACTOR,
    colourAllowed: values.NO_COLOR === undefined && values.TERM !== 'dumb',
    webhookRetryDelaysMs: values.PARTNERCTL_WEBHOOK_RETRY_DELAYS,
    server,
  });
}

/** The server's settings with no variable set: the table's defaults (the API document quotes some). */
export const SERVER_DEFAULTS: ServerConfig = serverConfig(parseVariables({}, true));

export type Provider = 'sqlite' | 'postgresql';

export interface DatabaseConfig {
  provider: Provider;
  /** For SQLite the absolute file path; for PostgreSQL the connection string. */
  url: string;
  /** PostgreSQL connection pool size (per process). */
  poolSize: number;
}

function dataDirectory(env: DatabaseEnvironment): string {
  const base = env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(base, 'partnerctl');
}

const DEFAULT_DATABASE_FILE = 'partnerctl.db';

/** The embedded default database: the one SQLite file partnerctl creates without being asked to. */
export function defaultDatabasePath(env: DatabaseEnvironment): string {
  return join(dataDirectory(env), DEFAULT_DATABASE_FILE);
}

/** Where the per-user settings live (contexts): $XDG_CONFIG_HOME/partnerctl, or ~/.config/partnerctl. */
export function configDirectory(env: DatabaseEnvironment): string {
  const base = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'partnerctl');
}

export function resolveDatabase(urlOption: string | undefined, env: DatabaseEnvironment, defaultPoolSize = TUNING.servePoolSize): DatabaseConfig {
  const raw = (urlOption ?? env.DATABASE_URL ?? '').trim();
  const poolSize = env.PARTNERCTL_DB_POOL_SIZE ?? defaultPoolSize;
  if (raw === '') {
    return { provider: 'sqlite', url: defaultDatabasePath(env), poolSize };
  }
  if (/^postgres(ql)?:\/\//i.test(raw)) {
    return { provider: 'postgresql', url: raw, poolSize };
  }
  const path = raw.replace(/^file:/i, '').replace(/\?.*$/, '');
  if (path === '' || /^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) {
    throw new AppError('invalid_argument', `unsupported database URL '${redactUrl(raw)}'`, {
      hint: 'use file:/path/to/partnerctl.db, a plain file path, or postgresql://user@host/db',
    });
  }
  return { provider: 'sqlite', url: resolve(path), poolSize };
}
