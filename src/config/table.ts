// Every variable partnerctl reads and every fixed tuning value of the server, each declared once: src/config.ts
// parses the environment from this table and docs/configuration.md's tables are generated from it
// (`npm run docs:config`).
import { DEFAULT_RETRY_DELAYS } from '../webhook-delays.js';
import * as parse from './parsers.js';
import type { Parser } from './parsers.js';

/** Who reads a variable: `serve` only (parsed only for it), or every command (the CLI's, `serve` too). */
export type ReadBy = 'CLI, serve' | 'CLI' | 'serve' | 'serve, `webhooks deliver`';

interface Declared<T> {
  readonly readBy: ReadBy;
  /** A flag that wins over the variable (`serve`'s camel-cased in ServerFlags), named with it in problems. */
  readonly flag?: string;
  readonly parse: Parser<T>;
  /** Markdown for docs/configuration.md. */
  readonly description: string;
  /** Taken as given: not trimmed, and blank counts as set (NO_COLOR= is a request for no colour). */
  readonly verbatim?: true;
}

/** A variable with a default, written as one would set it: parsed like a value given. */
export interface WithDefault<T> extends Declared<T> {
  readonly default: string;
}

/** A variable whose absence means something of its own: `unset` says what (Markdown, for the docs). */
export interface Optional<T> extends Declared<T> {
  readonly unset: string;
}

export type Variable = WithDefault<unknown> | Optional<unknown>;

/** The value a variable gives its reader: undefined only where there is no default. */
export type ValueOf<V> = V extends WithDefault<infer T> ? T : V extends Optional<infer T> ? T | undefined : never;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * The fixed tuning values: not variables, since the docs promise some of them ("revoked within 1 s") and the
 * others are sized against those; declared beside the variables so every default is in one table.
 */
export const FIXED = {
  stalenessBoundMs: {
    value: 1_000,
    readBy: 'serve',
    description: 'The staleness bound: past it without a confirmed poll, the gate checks the access revision itself before answering (waiting this long at most). See [the data-request gate](server.md#the-data-request-gate).',
  },
  pollIntervalMs: {
    value: 250,
    readBy: 'serve',
    description: 'How often the access revision is polled (on PostgreSQL the fallback beside NOTIFY).',
  },
  databaseConnectTimeoutMs: {
    value: 2_000,
    readBy: 'serve',
    description: "PostgreSQL: how long opening a connection may take before it is given up.",
  },
  databaseQueryTimeoutMs: {
    value: 2_000,
    readBy: 'serve',
    description: 'PostgreSQL: how long a query outside a transaction may take before it is given up.',
  },
  verifierCacheSize: {
    value: 100_000,
    readBy: 'serve',
    description: 'Verified tokens remembered until they expire (their signature is not checked again).',
  },
  countsFlushMs: {
    value: 10_000,
    readBy: 'serve',
    description: 'How often usage and exposure counts are written.',
  },
  decisionCapPerMinute: {
    value: 1_000,
    readBy: 'serve',
    description:
      "[Answers on record](decisions.md) kept per partner and per client address (an IPv6 client by its /64) per minute by one server; one client of a partner (a token, an address) at most a tenth of it, one key pair half.",
  },
  servePoolSize: {
    value: 10,
    readBy: 'serve',
    description: 'PostgreSQL connections per `serve` process, without `PARTNERCTL_DB_POOL_SIZE`.',
  },
  commandPoolSize: {
    value: 2,
    readBy: 'CLI',
    description: 'PostgreSQL connections per command, without `PARTNERCTL_DB_POOL_SIZE`.',
  },
} as const satisfies Record<string, { value: number; readBy: ReadBy; description: string }>;

/** Every variable, in the docs' order (problems are reported in this order too). */
export const VARIABLES = {
  DATABASE_URL: {
    readBy: 'CLI, serve',
    flag: '--database-url',
    parse: parse.text,
    unset:
      "the [context](operator-guide.md#contexts)'s (`--context`, else the current one), else SQLite at `$XDG_DATA_HOME/partnerctl/partnerctl.db`, or `~/.local/share/partnerctl/partnerctl.db`",
    description:
      '`file:/path/x.db` (or a plain path) for SQLite; `postgresql://…` or `postgres://…` for PostgreSQL. `--context NAME` wins over it (a flag beats the environment; stderr says so). See [the database](#the-database).',
  },
  XDG_DATA_HOME: {
    readBy: 'CLI, serve',
    parse: parse.text,
    verbatim: true,
    unset: '`~/.local/share`',
    description: 'Where the embedded default database lives (an absolute path; otherwise ignored).',
  },
  XDG_CONFIG_HOME: {
    readBy: 'CLI, serve',
    parse: parse.text,
    verbatim: true,
    unset: '`~/.config`',
    description: 'Where the [contexts](operator-guide.md#contexts) live, in `partnerctl/contexts.json` (an absolute path; otherwise ignored).',
  },
  PARTNERCTL_SIGNING_KEY_FILE: {
    readBy: 'CLI, serve',
    parse: parse.text,
    unset:
      '`signing-keys.json` beside the SQLite file; **required on PostgreSQL** (commands that sign or verify tokens refuse with `signing_key_unavailable`, exit 5, without it)',
    description: 'The token-signing keys, a JWK set. See [the signing-key file](#the-signing-key-file).',
  },
  PARTNERCTL_DB_POOL_SIZE: {
    readBy: 'CLI, serve',
    parse: parse.whole(1, 1000),
    unset: `${FIXED.servePoolSize.value} for \`serve\`, ${FIXED.commandPoolSize.value} for other commands`,
    description: 'PostgreSQL connections per process (1 to 1000).',
  },
  PARTNERCTL_ACTOR: {
    readBy: 'CLI',
    flag: '--actor',
    parse: parse.text,
    unset: 'the OS user',
    description: 'Who is acting, for the audit trail.',
  },
  NO_COLOR: {
    readBy: 'CLI',
    parse: parse.text,
    verbatim: true,
    unset: 'unset',
    description: 'Set (to anything, even blank): no colour (nor with `TERM=dumb`, nor when stdout is not a terminal).',
  },
  TERM: {
    readBy: 'CLI',
    parse: parse.text,
    verbatim: true,
    unset: 'unset',
    description: '`dumb`: no colour.',
  },
  HOST: {
    readBy: 'serve',
    flag: '--host',
    parse: parse.host,
    default: '127.0.0.1',
    description: 'Address to listen on.',
  },
  PORT: {
    readBy: 'serve',
    flag: '--port',
    parse: parse.whole(0, 65_535),
    default: '8080',
    description: 'Port; `0` picks a free one.',
  },
  PUBLIC_API_UPSTREAM_URL: {
    readBy: 'serve',
    flag: '--upstream',
    parse: parse.httpUrl,
    unset: 'none',
    description:
      'Base URL of the recommendation engine (http or https; a path prefix is kept, no credentials, query or fragment). Unset: data requests get 503 `upstream_unavailable`.',
  },
  PUBLIC_API_TOKEN_URL: {
    readBy: 'serve',
    parse: parse.httpUrl,
    unset: 'none: client assertions are refused (`assertion_audience`)',
    description:
      "The token endpoint's public URL as partners reach it (`https://api.example.com/auth/token`): a client assertion's `aud` must be it or its issuer URL (the same URL's origin, `https://api.example.com`). See [private_key_jwt](api.md#a-key-pair-whose-private-half-never-leaves-you-private_key_jwt).",
  },
  PUBLIC_API_UPSTREAM_TIMEOUT_MS: {
    readBy: 'serve',
    parse: parse.whole(1, 600_000),
    default: '10000',
    description: 'How long the engine may take to answer (headers and body) before 504 `upstream_timeout`.',
  },
  PUBLIC_API_REQUEST_TIMEOUT_MS: {
    readBy: 'serve',
    parse: parse.whole(100, 600_000),
    default: '30000',
    description:
      'How long a client may take to send its whole request (headers and body); after that it gets 408 `request_timeout` and is disconnected, so a trickling client cannot hold a connection open.',
  },
  PUBLIC_API_MAX_CONNECTIONS: {
    readBy: 'serve',
    parse: parse.whole(1, 1_000_000),
    default: '10000',
    description:
      "Open client connections the public port holds at once; a connection past it is closed at once, and every other is still answered. Keep it below the process's descriptor limit (`ulimit -n`), which the database, the engine's pool and the log need too.",
  },
  PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS: {
    readBy: 'serve',
    parse: parse.whole(1, 1_000_000),
    default: '500',
    description:
      "Open client connections from one address at once (an IPv6 client counted by its /64); a connection past it is closed at once. A trusted proxy (`PUBLIC_API_TRUSTED_PROXIES`) is not held to it. A connection that has sent no byte once `PUBLIC_API_REQUEST_TIMEOUT_MS` has passed is closed too.",
  },
  PUBLIC_API_BODY_LIMIT_BYTES: {
    readBy: 'serve',
    parse: parse.whole(1_024, 104_857_600),
    default: '1048576',
    description: 'Largest body on data requests (the token endpoint always allows 16 KiB).',
  },
  PUBLIC_API_CORS_ORIGINS: {
    readBy: 'serve',
    parse: parse.origins,
    unset: 'none',
    description: 'Comma-separated exact origins (`https://app.example.com`) allowed browser access. Unset: CORS is off. See [CORS](server.md#cors).',
  },
  PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: {
    readBy: 'serve',
    parse: parse.whole(0, 100_000_000),
    default: '30',
    description:
      "Token exchanges per access key per window; `0` turns the limit off. See [the token endpoint's throttles](limits-usage-metrics.md#the-token-endpoints-throttles).",
  },
  PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: {
    readBy: 'serve',
    parse: parse.whole(0, 100_000_000),
    default: '120',
    description: 'Token exchanges per client address per window; `0` turns the limit off.',
  },
  PUBLIC_API_RATE_LIMIT_WINDOW_MS: {
    readBy: 'serve',
    parse: parse.whole(1_000, 86_400_000),
    default: '60000',
    description: "The token endpoint's rate-limit window.",
  },
  PUBLIC_API_DEFAULT_RATE_LIMIT: {
    readBy: 'serve',
    parse: parse.rate,
    unset: 'none',
    description:
      'Data-request limit of partners without their own (`50/s`, `3000/m`, `100000/h`); unset: no limit for them. See [limits](limits-usage-metrics.md#per-partner-limits).',
  },
  PUBLIC_API_DEFAULT_BURST: {
    readBy: 'serve',
    parse: parse.whole(1, 1_000_000_000),
    unset: "the default rate's count",
    description: 'Requests allowed at once after a quiet spell, for partners without their own.',
  },
  REDIS_URL: {
    readBy: 'serve',
    parse: parse.redisUrl,
    unset: 'none',
    description:
      "`redis://` or `rediss://`: every counter (data-request limits, the token endpoint's throttles) is shared by all instances through this Redis. Unset: counters in each process's memory. See [Redis](limits-usage-metrics.md#one-instance-or-several-redis).",
  },
  PUBLIC_API_STALE_BUDGET: {
    readBy: 'serve',
    parse: parse.budget,
    default: '120s',
    description: `PostgreSQL: how long data requests are still decided from the state last confirmed while the database does not answer (\`500ms\`, \`30s\`, \`2m\`; at most \`60m\`); \`0\`: 503 once the ${FIXED.stalenessBoundMs.value / 1000} s staleness bound passes, as before. Token exchanges always answer 503 then. Ignored on SQLite. See [through a database outage](server.md#through-a-database-outage).`,
  },
  PUBLIC_API_USAGE: {
    readBy: 'serve',
    parse: parse.onOff,
    default: '1',
    description: '`0` stops counting [usage](limits-usage-metrics.md#usage).',
  },
  PUBLIC_API_RECORDS_PER_MINUTE: {
    readBy: 'serve',
    parse: parse.whole(100, 10_000_000),
    default: '10000',
    description:
      'Answers that are not a success (and answers in a [recording window](decisions.md)) one server records per minute in all; beyond, they are only counted. Answers of no partner (no token, an unreadable one) take at most half of it, so that a flood of them leaves room for the partners\' own.',
  },
  PUBLIC_API_DECISION_RETENTION: {
    readBy: 'serve',
    parse: parse.retention,
    default: '30d',
    description:
      "How long the gate's [refusals on record and the exposure counts](decisions.md) are kept (`30d`, `12h`: days or hours); each server prunes older rows at start and every hour.",
  },
  PUBLIC_API_METRICS_PORT: {
    readBy: 'serve',
    flag: '--metrics-port',
    parse: parse.whole(0, 65_535),
    unset: 'none (off)',
    description: 'Port of the [metrics](limits-usage-metrics.md#metrics) listener (`GET /metrics`); never the public port.',
  },
  PUBLIC_API_METRICS_HOST: {
    readBy: 'serve',
    flag: '--metrics-host',
    parse: parse.host,
    default: '127.0.0.1',
    description: 'Address of the metrics listener.',
  },
  PUBLIC_API_METRICS_PER_PARTNER: {
    readBy: 'serve',
    parse: parse.onOff,
    default: '0',
    description: '`1` adds series per partner (`partnerctl_partner_requests_total`); off by default for cardinality.',
  },
  PUBLIC_API_TRUSTED_PROXIES: {
    readBy: 'serve',
    parse: parse.trustedProxies,
    unset: 'none',
    description:
      'Comma-separated addresses and CIDRs (IPv4 and IPv6) and the words `loopback` (127/8, ::1) and `private` (10/8, 172.16/12, 192.168/16, fc00::/7) of the balancers in front of `serve`. When the TCP peer is one of them, the client address is the right-most `X-Forwarded-For` entry that is not itself trusted; otherwise it is the peer and `X-Forwarded-For` is ignored. See [client addresses](server.md#client-addresses).',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    readBy: 'serve',
    parse: parse.httpUrl,
    unset: 'none (no export)',
    description:
      'The standard OpenTelemetry variable: spans of data requests are exported over OTLP/HTTP (JSON) to `<endpoint>/v1/traces`. Unset: no SDK is loaded, only trace ids are passed on. See [traces](server.md#traces).',
  },
  PUBLIC_API_SECRET_SCANNING: {
    readBy: 'serve',
    parse: parse.choice(['github', 'off']),
    default: 'off',
    description:
      "`github`: receive GitHub's secret-scanning alerts at `POST /secret-scanning/github`; `off`: that path is 404. See [secret scanning](leaked-credentials.md#github-secret-scanning-contained-before-anyone-is-paged).",
  },
  PUBLIC_API_SECRET_SCANNING_ACTION: {
    readBy: 'serve',
    parse: parse.choice(['contain', 'report']),
    default: 'contain',
    description: "What a genuine live credential reported gets: `contain` (the brake for a secret's pair, `revoke-tokens` for a token) or `report` (recorded only).",
  },
  PUBLIC_API_SECRET_SCANNING_KEYS_URL: {
    readBy: 'serve',
    parse: parse.httpUrl,
    default: 'https://api.github.com/meta/public_keys/secret_scanning',
    description: "GitHub's signing-key list (`http://` accepted, for a local key server in tests).",
  },
  PUBLIC_API_SECRET_SCANNING_RATE_LIMIT: {
    readBy: 'serve',
    parse: parse.whole(0, 100_000_000),
    default: '60',
    description: 'Alert requests per client address per `PUBLIC_API_RATE_LIMIT_WINDOW_MS`; `0` turns the limit off.',
  },
  PARTNERCTL_WEBHOOK_RETRY_DELAYS: {
    readBy: 'serve, `webhooks deliver`',
    parse: parse.delays,
    default: DEFAULT_RETRY_DELAYS,
    description:
      'Delays before each [webhook](webhooks.md#delivery-guarantees) retry (a comma list of `ms`, `s`, `m`, `h`, `d` durations, at most 100); after the last, the delivery is given up. The default retries for about 25.7 hours.',
  },
  LOG_LEVEL: {
    readBy: 'serve',
    parse: parse.choice(LOG_LEVELS),
    default: 'info',
    description: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`; request lines are `info`. See [logs](server.md#logs).',
  },
} as const satisfies Record<string, Variable>;

export type Name = keyof typeof VARIABLES;
export type Values = { readonly [N in Name]: ValueOf<(typeof VARIABLES)[N]> };
