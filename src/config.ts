import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import type { z } from 'zod';
import { parseRate, type Rate } from './rates.js';
import { AppError, isAppError } from './errors.js';
import { DEFAULT_RETRY_DELAYS, DEFAULT_RETRY_DELAYS_MS, parseRetryDelays } from './webhook-delays.js';

/**
 * The one place that knows the environment's variables, the CLI's and the server's: one schema, parsed once
 * by the CLI's entry point (src/cli/run.ts) from the terminal's environment; everything else receives the
 * frozen, typed result.
 */
export type Environment = Readonly<Record<string, string | undefined>>;

/** The version of this package, from its package.json (dist/config.js sits one folder below it). */
export const VERSION: string = (() => {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof manifest.version === 'string' ? manifest.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();

export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  upstreamTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  tokenRateLimitPerKey: 30,
  tokenRateLimitPerIp: 120,
  secretScanningKeysUrl: 'https://api.github.com/meta/public_keys/secret_scanning',
  secretScanningRateLimit: 60,
  rateLimitWindowMs: 60_000,
  bodyLimitBytes: 1_048_576,
  logLevel: 'info',
  metricsHost: '127.0.0.1',
  decisionRetentionMs: 30 * 86_400_000,
  staleBudgetMs: 120_000,
} as const;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const ON = ['1', 'on', 'true', 'yes'];
const OFF = ['0', 'off', 'false', 'no'];

/** How a problem names its variable: the flag first where one can set it too. */
const LABELS: Record<string, string> = {
  HOST: '--host / HOST',
  PORT: '--port / PORT',
  PUBLIC_API_UPSTREAM_URL: '--upstream / PUBLIC_API_UPSTREAM_URL',
  PUBLIC_API_METRICS_PORT: '--metrics-port / PUBLIC_API_METRICS_PORT',
  PUBLIC_API_METRICS_HOST: '--metrics-host / PUBLIC_API_METRICS_HOST',
};

type Zod = typeof z;

/** Unset, empty and blank are the same; values are trimmed. */
function unset(value: unknown): unknown {
  return typeof value !== 'string' ? value : value.trim() === '' ? undefined : value.trim();
}

/**
 * The CLI's variables that are strings and nothing more: `text` trimmed (blank is unset), `raw` as given.
 * The schema below builds their parsers from this table, and a command whose environment sets none of the
 * CLI's other variables reads them through the same table without loading zod (about a hundred modules,
 * ~55 ms of CPU: a third of a whole command).
 */
const PLAIN_CLI_VARIABLES = {
  DATABASE_URL: 'text',
  PARTNERCTL_ACTOR: 'text',
  PARTNERCTL_SIGNING_KEY_FILE: 'text',
  XDG_DATA_HOME: 'raw',
  XDG_CONFIG_HOME: 'raw',
  NO_COLOR: 'raw',
  TERM: 'raw',
} as const;

/**
 * Every variable partnerctl reads, the CLI's and the server's: one zod schema. `cli` holds what every command
 * reads; `server` what `partnerctl serve` reads on top (its flags override the variables they name).
 */
function environmentSchema(z: Zod) {
  const text = z.preprocess(unset, z.string().optional());
  const raw = z.string().optional();
  const whole = (min: number, max: number) => {
    const problem = (input: unknown) => `must be a whole number from ${min} to ${max}, got '${String(input).slice(0, 40)}'`;
    return z.preprocess(
      unset,
      z
        .string()
        .regex(/^\d+$/, { error: (issue) => problem(issue.input) })
        .transform(Number)
        .pipe(z.number().int().min(min, { error: (issue) => problem(issue.input) }).max(max, { error: (issue) => problem(issue.input) }))
        .optional(),
    );
  };
  const onOff = z.preprocess(
    unset,
    z
      .string()
      .toLowerCase()
      .pipe(z.enum([...ON, ...OFF] as [string, ...string[]], { error: (issue) => `must be 1 or 0 (on or off), got '${String(issue.input).slice(0, 40)}'` }))
      .transform((value) => ON.includes(value))
      .optional(),
  );
  const host = z.preprocess(unset, z.string().regex(/^[A-Za-z0-9.:[\]-]+$/, { error: (issue) => `is not a host name or address: '${String(issue.input).slice(0, 80)}'` }).optional());
  const upstream = z.preprocess(
    unset,
    z
      .string()
      .transform((raw, ctx) => {
        let url: URL;
        try {
          url = new URL(raw);
        } catch {
          ctx.addIssue({ code: 'custom', message: `is not a URL: '${raw.slice(0, 200)}'` });
          return z.NEVER;
        }
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
          ctx.addIssue({ code: 'custom', message: `must be an http:// or https:// URL, got '${raw.slice(0, 200)}'` });
        } else if (url.username || url.password || url.search || url.hash) {
          ctx.addIssue({ code: 'custom', message: 'must not carry credentials, a query or a fragment' });
        }
        return url;
      })
      .optional(),
  );
  const origins = z.preprocess(
    unset,
    z
      .string()
      .transform((raw, ctx) => {
        const out: string[] = [];
        for (const entry of raw.split(',').map((part) => part.trim()).filter(Boolean)) {
          let origin: string | undefined;
          try {
            origin = new URL(entry).origin;
          } catch {
            origin = undefined;
          }
          if (origin === undefined || origin === 'null' || origin !== entry) {
            ctx.addIssue({ code: 'custom', message: `entries must be exact origins such as https://app.example.com, got '${entry.slice(0, 200)}'` });
          } else {
            out.push(origin);
          }
        }
        return out;
      })
      .optional(),
  );
  const trustedProxies = z.preprocess(
    unset,
    z
      .string()
      .transform((raw, ctx) => {
        // proxy-addr (Fastify's trustProxy reads lists with it) is loaded only when the variable is set; its
        // `uniquelocal` is what this variable calls `private` (10/8, 172.16/12, 192.168/16, fc00::/7).
        const { compile } = createRequire(import.meta.url)('@fastify/proxy-addr') as typeof import('@fastify/proxy-addr');
        const entries: string[] = [];
        for (const entry of raw.split(',').map((part) => part.trim()).filter(Boolean)) {
          const word = entry.toLowerCase();
          const value = word === 'private' ? 'uniquelocal' : word === 'loopback' ? 'loopback' : entry;
          try {
            compile([value]);
            entries.push(value);
          } catch {
            ctx.addIssue({ code: 'custom', message: `entries must be addresses, CIDRs, loopback or private, got '${entry.slice(0, 80)}'` });
          }
        }
        return entries;
      })
      .optional(),
  );
  const rate = z.preprocess(
    unset,
    z
      .string()
      .transform((raw, ctx) => {
        try {
          return parseRate(raw, '');
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: isAppError(error) ? error.message.trim() : 'is not a rate' });
          return z.NEVER;
        }
      })
      .optional(),
  );
  const redisUrl = z.preprocess(
    unset,
    z
      .string()
      .regex(/^rediss?:\/\/[^\s]+$/, { error: (issue) => `must be a redis:// or rediss:// URL, got '${redactUrl(String(issue.input)).replace(/:[^:@/]*@/, ':***@')}'` })
      .optional(),
  );
  const logLevel = z.preprocess(
    unset,
    z
      .string()
      .toLowerCase()
      .pipe(z.enum(LOG_LEVELS, { error: (issue) => `must be one of ${LOG_LEVELS.join(', ')}, got '${String(issue.input).slice(0, 40)}'` }))
      .optional(),
  );
  const delays = z.preprocess(
    unset,
    z
      .string()
      // Unset: the default list, parsed like a value given.
      .prefault(DEFAULT_RETRY_DELAYS)
      .transform((raw, ctx) => {
        const parsed = parseRetryDelays(raw);
        if (typeof parsed === 'string') {
          ctx.addIssue({ code: 'custom', message: parsed });
          return z.NEVER;
        }
        return parsed;
      }),
  );
  // Days or hours (30d, 12h): how long the gate's refusals and the exposure counts are kept.
  const retention = z.preprocess(
    unset,
    z
      .string()
      .regex(/^[1-9]\d{0,4}[dh]$/, { error: (issue) => `must be a number of days or hours such as 30d or 12h, got '${String(issue.input).slice(0, 40)}'` })
      .transform((raw) => Number(raw.slice(0, -1)) * (raw.endsWith('d') ? 86_400_000 : 3_600_000))
      .optional(),
  );
  // 120s, 2m, 500ms, or 0 (no budget): at most an hour.
  const budget = z.preprocess(
    unset,
    z
      .string()
      .regex(/^(0|\d{1,7}(ms|s|m))$/, { error: (issue) => `must be a duration such as 120s, 2m or 0, got '${String(issue.input).slice(0, 40)}'` })
      .transform((raw) => {
        const match = /^(\d+)(ms|s|m)?$/.exec(raw)!;
        return Number(match[1]) * (match[2] === 'm' ? 60_000 : match[2] === 's' ? 1_000 : 1);
      })
      .pipe(z.number().max(3_600_000, { error: 'must be at most 1h' }))
      .optional(),
  );
  const choice = <T extends string>(values: readonly [T, ...T[]]) =>
    z.preprocess(
      unset,
      z
        .string()
        .toLowerCase()
        .pipe(z.enum(values, { error: (issue) => `must be one of ${values.join(', ')}, got '${String(issue.input).slice(0, 40)}'` }))
        .optional(),
    );
  const plain = { text, raw } as const;
  const cli = {
    ...(Object.fromEntries(Object.entries(PLAIN_CLI_VARIABLES).map(([name, kind]) => [name, plain[kind]])) as {
      [Name in keyof typeof PLAIN_CLI_VARIABLES]: (typeof plain)[(typeof PLAIN_CLI_VARIABLES)[Name]];
    }),
    PARTNERCTL_DB_POOL_SIZE: whole(1, 1000),
    PARTNERCTL_WEBHOOK_RETRY_DELAYS: delays,
  };
  const server = {
    HOST: host,
    PORT: whole(0, 65_535),
    PUBLIC_API_UPSTREAM_URL: upstream,
    PUBLIC_API_UPSTREAM_TIMEOUT_MS: whole(1, 600_000),
    PUBLIC_API_REQUEST_TIMEOUT_MS: whole(100, 600_000),
    PUBLIC_API_CORS_ORIGINS: origins,
    PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: whole(0, 100_000_000),
    PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: whole(0, 100_000_000),
    PUBLIC_API_RATE_LIMIT_WINDOW_MS: whole(1_000, 86_400_000),
    PUBLIC_API_BODY_LIMIT_BYTES: whole(1_024, 104_857_600),
    LOG_LEVEL: logLevel,
    PUBLIC_API_DEFAULT_RATE_LIMIT: rate,
    PUBLIC_API_DEFAULT_BURST: whole(1, 1_000_000_000),
    REDIS_URL: redisUrl,
    PUBLIC_API_USAGE: onOff,
    PUBLIC_API_DECISION_RETENTION: retention,
    PUBLIC_API_METRICS_PORT: whole(0, 65_535),
    PUBLIC_API_METRICS_HOST: host,
    PUBLIC_API_METRICS_PER_PARTNER: onOff,
    PUBLIC_API_TRUSTED_PROXIES: trustedProxies,
    // The standard OpenTelemetry variable: spans are exported over OTLP/HTTP to <endpoint>/v1/traces.
    OTEL_EXPORTER_OTLP_ENDPOINT: upstream,
    PUBLIC_API_SECRET_SCANNING: choice(['github', 'off']),
    PUBLIC_API_SECRET_SCANNING_KEYS_URL: upstream,
    PUBLIC_API_SECRET_SCANNING_ACTION: choice(['contain', 'report']),
    PUBLIC_API_SECRET_SCANNING_RATE_LIMIT: whole(0, 100_000_000),
    PUBLIC_API_STALE_BUDGET: budget,
  };
  return { cli: z.object(cli), all: z.object({ ...cli, ...server }) };
}

type Schemas = ReturnType<typeof environmentSchema>;
/** The CLI's variables as the schema gives them: trimmed, blank as unset, numbers and lists parsed. */
type CliVariables = z.output<Schemas['cli']>;
/** Every variable, the server's too (`partnerctl serve`). */
type ServerVariables = z.output<Schemas['all']>;

/** What the database and signing-key resolvers read. */
export type DatabaseEnvironment = Readonly<Partial<Pick<CliVariables, 'DATABASE_URL' | 'PARTNERCTL_SIGNING_KEY_FILE' | 'PARTNERCTL_DB_POOL_SIZE' | 'XDG_DATA_HOME' | 'XDG_CONFIG_HOME'>>>;

/** What `partnerctl serve` reads on top of the CLI's configuration. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** The recommendation engine's base URL; null when none is configured (data requests then get 503). */
  readonly upstream: URL | null;
  readonly upstreamTimeoutMs: number;
  /** How long a client may take to send a whole request (headers and body) before 408. */
  readonly requestTimeoutMs: number;
  /** Exact origins allowed for browser (CORS) access; empty means CORS is off. */
  readonly corsOrigins: readonly string[];
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
  /** The metrics listener's port (--metrics-port / PUBLIC_API_METRICS_PORT); null: no metrics. */
  readonly metricsPort: number | null;
  /** Its address (--metrics-host / PUBLIC_API_METRICS_HOST), loopback by default. */
  readonly metricsHost: string;
  /** Series per partner too (PUBLIC_API_METRICS_PER_PARTNER=1); off by default for cardinality. */
  readonly metricsPerPartner: boolean;
  /**
   * PostgreSQL: how long data requests are still decided from the last confirmed state while the database
   * does not answer (PUBLIC_API_STALE_BUDGET, default 120 s); 0: 503 past the 1 s staleness bound.
   */
  readonly staleBudgetMs: number;
  /** Peers whose X-Forwarded-For is believed (PUBLIC_API_TRUSTED_PROXIES), in proxy-addr's terms (`private` as `uniquelocal`); empty: none. */
  readonly trustedProxies: readonly string[];
  /** Where spans go over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT); null: no SDK loaded, no spans. */
  readonly otlpEndpoint: URL | null;
  /** GitHub's secret-scanning alerts at POST /secret-scanning/github (PUBLIC_API_SECRET_SCANNING=github); null: off. */
  readonly secretScanning: SecretScanningConfig | null;
}

export interface SecretScanningConfig {
  /** Where GitHub's signing keys are listed (PUBLIC_API_SECRET_SCANNING_KEYS_URL). */
  readonly keysUrl: URL;
  /** What a genuine live credential reported gets (PUBLIC_API_SECRET_SCANNING_ACTION): contained, or only recorded. */
  readonly action: 'contain' | 'report';
  /** Alert requests per client address per PUBLIC_API_RATE_LIMIT_WINDOW_MS (PUBLIC_API_SECRET_SCANNING_RATE_LIMIT); 0: no limit. */
  readonly rateLimitPerIp: number;
}

/** `serve`'s flags, which win over the variables they name. */
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

/** Parses with one schema; every problem, each naming its variable (and flag), in one invalid_argument. */
function parse<Schema extends z.ZodType>(schema: Schema, input: Environment): z.output<Schema> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? '');
      return `${LABELS[name] ?? name} ${issue.message}`;
    });
    throw new AppError('invalid_argument', problems.join('; '));
  }
  return parsed.data;
}

/**
 * The CLI's variables read through PLAIN_CLI_VARIABLES alone, when the environment sets none of the others
 * (their values are then the schema's own defaults); undefined when one is set: the schema parses it.
 */
function plainCliVariables(env: Environment): CliVariables | undefined {
  if (unset(env.PARTNERCTL_DB_POOL_SIZE) !== undefined || unset(env.PARTNERCTL_WEBHOOK_RETRY_DELAYS) !== undefined) return undefined;
  const values: Record<string, unknown> = { PARTNERCTL_DB_POOL_SIZE: undefined, PARTNERCTL_WEBHOOK_RETRY_DELAYS: [...DEFAULT_RETRY_DELAYS_MS] };
  for (const [name, kind] of Object.entries(PLAIN_CLI_VARIABLES)) values[name] = kind === 'text' ? unset(env[name]) : env[name];
  // Built from the table the schema's parsers are built from, with the schema's own defaults (a test holds
  // the two ways to the same answer for any environment).
  return values as CliVariables;
}

function serverConfig(values: ServerVariables): ServerConfig {
  const host = values.HOST ?? SERVER_DEFAULTS.host;
  const port = values.PORT ?? SERVER_DEFAULTS.port;
  const metricsHost = values.PUBLIC_API_METRICS_HOST ?? SERVER_DEFAULTS.metricsHost;
  const metricsPort = values.PUBLIC_API_METRICS_PORT ?? null;
  if (metricsPort !== null && metricsPort !== 0 && metricsPort === port && metricsHost === host) {
    throw new AppError('invalid_argument', `${LABELS.PUBLIC_API_METRICS_PORT} must differ from ${LABELS.PORT}: metrics are never served on the public port`);
  }
  return Object.freeze({
    host,
    port,
    upstream: values.PUBLIC_API_UPSTREAM_URL ?? null,
    upstreamTimeoutMs: values.PUBLIC_API_UPSTREAM_TIMEOUT_MS ?? SERVER_DEFAULTS.upstreamTimeoutMs,
    requestTimeoutMs: values.PUBLIC_API_REQUEST_TIMEOUT_MS ?? SERVER_DEFAULTS.requestTimeoutMs,
    corsOrigins: Object.freeze(values.PUBLIC_API_CORS_ORIGINS ?? []),
    tokenRateLimitPerKey: values.PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY ?? SERVER_DEFAULTS.tokenRateLimitPerKey,
    tokenRateLimitPerIp: values.PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP ?? SERVER_DEFAULTS.tokenRateLimitPerIp,
    rateLimitWindowMs: values.PUBLIC_API_RATE_LIMIT_WINDOW_MS ?? SERVER_DEFAULTS.rateLimitWindowMs,
    bodyLimitBytes: values.PUBLIC_API_BODY_LIMIT_BYTES ?? SERVER_DEFAULTS.bodyLimitBytes,
    logLevel: values.LOG_LEVEL ?? SERVER_DEFAULTS.logLevel,
    defaultRate: values.PUBLIC_API_DEFAULT_RATE_LIMIT ?? null,
    defaultBurst: values.PUBLIC_API_DEFAULT_BURST ?? null,
    redisUrl: values.REDIS_URL ?? null,
    usage: values.PUBLIC_API_USAGE ?? true,
    decisionRetentionMs: values.PUBLIC_API_DECISION_RETENTION ?? SERVER_DEFAULTS.decisionRetentionMs,
    metricsPort,
    metricsHost,
    metricsPerPartner: values.PUBLIC_API_METRICS_PER_PARTNER ?? false,
    staleBudgetMs: values.PUBLIC_API_STALE_BUDGET ?? SERVER_DEFAULTS.staleBudgetMs,
    trustedProxies: Object.freeze(values.PUBLIC_API_TRUSTED_PROXIES ?? []),
    otlpEndpoint: values.OTEL_EXPORTER_OTLP_ENDPOINT ?? null,
    secretScanning:
      values.PUBLIC_API_SECRET_SCANNING === 'github'
        ? Object.freeze({
            keysUrl: values.PUBLIC_API_SECRET_SCANNING_KEYS_URL ?? new URL(SERVER_DEFAULTS.secretScanningKeysUrl),
            action: values.PUBLIC_API_SECRET_SCANNING_ACTION ?? 'contain',
            rateLimitPerIp: values.PUBLIC_API_SECRET_SCANNING_RATE_LIMIT ?? SERVER_DEFAULTS.secretScanningRateLimit,
          })
        : null,
  });
}

/**
 * Parses the environment once, every problem collected into one error. With `serve` (its flags), the
 * server's variables too, the flags winning over the variables they name; without, they are not looked at
 * (no other command reads them).
 */
export function loadConfig(env: Environment, serve?: ServerFlags): Config {
  if (serve === undefined) {
    const plain = plainCliVariables(env);
    if (plain !== undefined) return cliConfig(plain, null);
  }
  // zod is loaded when a variable needs more than the plain table (never by --help or bad usage).
  const { z } = createRequire(import.meta.url)('zod') as typeof import('zod');
  const schemas = environmentSchema(z);
  if (serve === undefined) return cliConfig(parse(schemas.cli, env), null);
  const input: Record<string, string | undefined> = { ...env };
  const flags: Array<[keyof ServerFlags, string]> = [
    ['host', 'HOST'],
    ['port', 'PORT'],
    ['upstream', 'PUBLIC_API_UPSTREAM_URL'],
    ['metricsPort', 'PUBLIC_API_METRICS_PORT'],
    ['metricsHost', 'PUBLIC_API_METRICS_HOST'],
  ];
  for (const [flag, name] of flags) if (serve[flag] !== undefined) input[name] = String(serve[flag]);
  const values = parse(schemas.all, input);
  return cliConfig(values, serverConfig(values));
}

function cliConfig(values: CliVariables, server: ServerConfig | null): Config {
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
    webhookRetryDelaysMs: Object.freeze(values.PARTNERCTL_WEBHOOK_RETRY_DELAYS),
    server,
  });
}

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

export function resolveDatabase(urlOption: string | undefined, env: DatabaseEnvironment, defaultPoolSize = 10): DatabaseConfig {
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

/**
 * The signing-key file: PARTNERCTL_SIGNING_KEY_FILE, else beside the SQLite file. On PostgreSQL it must be
 * named: several servers and the operators' CLI on different hosts must share one file, and a key file
 * made up silently on each host would give tokens that the other hosts refuse.
 */
export function resolveSigningKeyFile(database: DatabaseConfig, env: DatabaseEnvironment): string {
  if (env.PARTNERCTL_SIGNING_KEY_FILE) return resolve(env.PARTNERCTL_SIGNING_KEY_FILE);
  if (database.provider === 'postgresql') {
    throw new AppError('signing_key_unavailable', 'PARTNERCTL_SIGNING_KEY_FILE is not set', {
      hint: 'on PostgreSQL every serve instance and the CLI must name the same signing-key file',
    });
  }
  return join(dirname(database.url), 'signing-keys.json');
}

/** A URL safe to print: the password, if any, replaced (in the authority or as a query parameter). */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@').replace(/([?&]password=)[^&]*/gi, '$1***');
}
