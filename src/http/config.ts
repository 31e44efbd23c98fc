import type { Environment } from '../config.js';
import { parseRate, type Rate } from '../domain/limits.js';
import { AppError, isAppError } from '../errors.js';

export const BASE_PATH = '/public/v1';

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
  /** The metrics listener's port (--metrics-port / PUBLIC_API_METRICS_PORT); null: no metrics. */
  readonly metricsPort: number | null;
  /** Its address (--metrics-host / PUBLIC_API_METRICS_HOST), loopback by default. */
  readonly metricsHost: string;
  /** Series per partner too (PUBLIC_API_METRICS_PER_PARTNER=1); off by default for cardinality. */
  readonly metricsPerPartner: boolean;
}

export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  upstreamTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  tokenRateLimitPerKey: 30,
  tokenRateLimitPerIp: 120,
  rateLimitWindowMs: 60_000,
  bodyLimitBytes: 1_048_576,
  logLevel: 'info',
  metricsHost: '127.0.0.1',
} as const;

export const TOKEN_BODY_LIMIT_BYTES = 16 * 1024;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface ServerOptions {
  host?: string;
  port?: number | string;
  upstream?: string;
  metricsPort?: number | string;
  metricsHost?: string;
}

/**
 * Reads flags (which win) and environment once. Every problem is collected and reported together, so an
 * operator fixes a bad deployment in one pass.
 */
export function parseServerConfig(options: ServerOptions, env: Environment): ServerConfig {
  const problems: string[] = [];
  const pick = (flag: string | number | undefined, name: string): string | undefined => {
    if (flag !== undefined) return String(flag);
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const onOff = (raw: string | undefined, label: string, fallback: boolean): boolean => {
    if (raw === undefined) return fallback;
    const value = raw.toLowerCase();
    if (['1', 'on', 'true', 'yes'].includes(value)) return true;
    if (['0', 'off', 'false', 'no'].includes(value)) return false;
    problems.push(`${label} must be 1 or 0 (on or off), got '${raw.slice(0, 40)}'`);
    return fallback;
  };
  const wholeNumber = (raw: string | undefined, label: string, fallback: number, min: number, max: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      problems.push(`${label} must be a whole number from ${min} to ${max}, got '${raw}'`);
      return fallback;
    }
    return value;
  };

  const host = pick(options.host, 'HOST') ?? SERVER_DEFAULTS.host;
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(host)) problems.push(`--host / HOST is not a host name or address: '${host}'`);

  const port = wholeNumber(pick(options.port, 'PORT'), '--port / PORT', SERVER_DEFAULTS.port, 0, 65_535);

  let upstream: URL | null = null;
  const upstreamRaw = pick(options.upstream, 'PUBLIC_API_UPSTREAM_URL');
  if (upstreamRaw !== undefined) {
    try {
      upstream = new URL(upstreamRaw);
      if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:') {
        problems.push(`--upstream / PUBLIC_API_UPSTREAM_URL must be an http:// or https:// URL, got '${upstreamRaw}'`);
      } else if (upstream.username || upstream.password || upstream.search || upstream.hash) {
        problems.push('--upstream / PUBLIC_API_UPSTREAM_URL must not carry credentials, a query or a fragment');
      }
    } catch {
      problems.push(`--upstream / PUBLIC_API_UPSTREAM_URL is not a URL: '${upstreamRaw}'`);
    }
  }

  const corsOrigins: string[] = [];
  const corsRaw = pick(undefined, 'PUBLIC_API_CORS_ORIGINS');
  if (corsRaw !== undefined) {
    for (const entry of corsRaw.split(',').map((part) => part.trim()).filter(Boolean)) {
      let origin: string | undefined;
      try {
        origin = new URL(entry).origin;
      } catch {
        origin = undefined;
      }
      if (origin === undefined || origin === 'null' || origin !== entry) {
        problems.push(`PUBLIC_API_CORS_ORIGINS entries must be exact origins such as https://app.example.com, got '${entry}'`);
      } else {
        corsOrigins.push(origin);
      }
    }
  }

  const config: { -readonly [K in keyof ServerConfig]: ServerConfig[K] } = {
    host,
    port,
    upstream: problems.length === 0 ? upstream : null,
    upstreamTimeoutMs: wholeNumber(
      pick(undefined, 'PUBLIC_API_UPSTREAM_TIMEOUT_MS'),
      'PUBLIC_API_UPSTREAM_TIMEOUT_MS',
      SERVER_DEFAULTS.upstreamTimeoutMs,
      1,
      600_000,
    ),
    requestTimeoutMs: wholeNumber(
      pick(undefined, 'PUBLIC_API_REQUEST_TIMEOUT_MS'),
      'PUBLIC_API_REQUEST_TIMEOUT_MS',
      SERVER_DEFAULTS.requestTimeoutMs,
      100,
      600_000,
    ),
    corsOrigins,
    tokenRateLimitPerKey: wholeNumber(
      pick(undefined, 'PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY'),
      'PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY',
      SERVER_DEFAULTS.tokenRateLimitPerKey,
      0,
      100_000_000,
    ),
    tokenRateLimitPerIp: wholeNumber(
      pick(undefined, 'PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP'),
      'PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP',
      SERVER_DEFAULTS.tokenRateLimitPerIp,
      0,
      100_000_000,
    ),
    rateLimitWindowMs: wholeNumber(
      pick(undefined, 'PUBLIC_API_RATE_LIMIT_WINDOW_MS'),
      'PUBLIC_API_RATE_LIMIT_WINDOW_MS',
      SERVER_DEFAULTS.rateLimitWindowMs,
      1_000,
      86_400_000,
    ),
    bodyLimitBytes: wholeNumber(
      pick(undefined, 'PUBLIC_API_BODY_LIMIT_BYTES'),
      'PUBLIC_API_BODY_LIMIT_BYTES',
      SERVER_DEFAULTS.bodyLimitBytes,
      1_024,
      104_857_600,
    ),
    logLevel: (pick(undefined, 'LOG_LEVEL') ?? SERVER_DEFAULTS.logLevel).toLowerCase(),
    defaultRate: null,
    defaultBurst: wholeNumber(pick(undefined, 'PUBLIC_API_DEFAULT_BURST'), 'PUBLIC_API_DEFAULT_BURST', 0, 1, 1_000_000_000) || null,
    redisUrl: pick(undefined, 'REDIS_URL') ?? null,
    usage: onOff(pick(undefined, 'PUBLIC_API_USAGE'), 'PUBLIC_API_USAGE', true),
    metricsPort: null,
    metricsHost: pick(options.metricsHost, 'PUBLIC_API_METRICS_HOST') ?? SERVER_DEFAULTS.metricsHost,
    metricsPerPartner: onOff(pick(undefined, 'PUBLIC_API_METRICS_PER_PARTNER'), 'PUBLIC_API_METRICS_PER_PARTNER', false),
  };
  const metricsPortRaw = pick(options.metricsPort, 'PUBLIC_API_METRICS_PORT');
  if (metricsPortRaw !== undefined) {
    config.metricsPort = wholeNumber(metricsPortRaw, '--metrics-port / PUBLIC_API_METRICS_PORT', 0, 0, 65_535);
    if (config.metricsPort !== 0 && config.metricsPort === port && config.metricsHost === host) {
      problems.push('--metrics-port / PUBLIC_API_METRICS_PORT must differ from --port / PORT: metrics are never served on the public port');
    }
  }
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(config.metricsHost)) problems.push(`--metrics-host / PUBLIC_API_METRICS_HOST is not a host name or address: '${config.metricsHost}'`);
  const defaultRateRaw = pick(undefined, 'PUBLIC_API_DEFAULT_RATE_LIMIT');
  if (defaultRateRaw !== undefined) {
    try {
      config.defaultRate = parseRate(defaultRateRaw, 'PUBLIC_API_DEFAULT_RATE_LIMIT');
    } catch (error) {
      if (!isAppError(error)) throw error;
      problems.push(error.message);
    }
  }
  if (!LOG_LEVELS.includes(config.logLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${config.logLevel}'`);
  }
  if (config.redisUrl !== null && !/^rediss?:\/\/[^\s]+$/.test(config.redisUrl)) {
    problems.push(`REDIS_URL must be a redis:// or rediss:// URL, got '${config.redisUrl.replace(/:[^:@/]*@/, ':***@')}'`);
  }
  if (problems.length > 0) {
    throw new AppError('invalid_argument', problems.join('; '));
  }
  return Object.freeze({ ...config, corsOrigins: Object.freeze(corsOrigins) });
}
