import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { AppError } from './errors.js';

/**
 * The one place that knows the environment's variables. `src/cli/main.ts` and `src/http/server.ts` hand
 * `process.env` to the parsers here; everything else receives the frozen, typed result.
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

const blankAsUnset = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);

function cliEnvironment() {
  // zod (about a hundred modules) is loaded only when a variable needs more checking than 'a string'.
  const { z } = createRequire(import.meta.url)('zod') as typeof import('zod');
  return z.object({
    DATABASE_URL: z.preprocess(blankAsUnset, z.string().optional()),
    PARTNERCTL_ACTOR: z.preprocess(blankAsUnset, z.string().optional()),
    PARTNERCTL_SIGNING_KEY_FILE: z.preprocess(blankAsUnset, z.string().optional()),
    PARTNERCTL_DB_POOL_SIZE: z.preprocess(blankAsUnset, z.string().optional()),
    XDG_DATA_HOME: z.string().optional(),
    NO_COLOR: z.string().optional(),
    TERM: z.string().optional(),
    PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS: z.preprocess(
      blankAsUnset,
      z.coerce
        .number({ error: 'must be a whole number of milliseconds' })
        .int('must be a whole number of milliseconds')
        .min(0, 'must be 0 or more')
        .max(3_600_000, 'must be at most 3600000 (one hour)')
        .default(0),
    ),
  });
}

/** The variables that can only be strings: no schema is needed to read them. */
const PLAIN = ['DATABASE_URL', 'PARTNERCTL_ACTOR', 'PARTNERCTL_SIGNING_KEY_FILE', 'PARTNERCTL_DB_POOL_SIZE'] as const;

/** What the CLI takes from its environment, parsed once. */
export interface CliConfig {
  readonly version: string;
  /** The variables the database and key-file resolvers read (DATABASE_URL, XDG_DATA_HOME…). */
  readonly env: Environment;
  readonly defaultActor: string | undefined;
  /** NO_COLOR unset and TERM not 'dumb'. */
  readonly colourAllowed: boolean;
  /** Test hook: how long rotate-keys holds its transaction open (0 in production). */
  readonly testPauseInRotationMs: number;
}

/** Parses the CLI's environment with every problem collected into one error. */
export function loadCliConfig(env: Environment): CliConfig {
  let values: {
    DATABASE_URL?: string;
    PARTNERCTL_ACTOR?: string;
    PARTNERCTL_SIGNING_KEY_FILE?: string;
    PARTNERCTL_DB_POOL_SIZE?: string;
    XDG_DATA_HOME?: string;
    NO_COLOR?: string;
    TERM?: string;
    PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS: number;
  };
  if (blankAsUnset(env.PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS) === undefined) {
    // Every other variable is an optional string: the schema's result, without loading the schema.
    values = { XDG_DATA_HOME: env.XDG_DATA_HOME, NO_COLOR: env.NO_COLOR, TERM: env.TERM, PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS: 0 };
    for (const name of PLAIN) values[name] = blankAsUnset(env[name]) as string | undefined;
  } else {
    const parsed = cliEnvironment().safeParse(env);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
      throw new AppError('invalid_argument', problems.join('; '));
    }
    values = parsed.data;
  }
  return Object.freeze({
    version: VERSION,
    env: Object.freeze({
      DATABASE_URL: values.DATABASE_URL,
      PARTNERCTL_SIGNING_KEY_FILE: values.PARTNERCTL_SIGNING_KEY_FILE,
      PARTNERCTL_DB_POOL_SIZE: values.PARTNERCTL_DB_POOL_SIZE,
      XDG_DATA_HOME: values.XDG_DATA_HOME,
    }),
    defaultActor: values.PARTNERCTL_ACTOR,
    colourAllowed: values.NO_COLOR === undefined && values.TERM !== 'dumb',
    testPauseInRotationMs: values.PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS,
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

export function dataDirectory(env: Environment): string {
  const base = env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(base, 'partnerctl');
}

export const DEFAULT_DATABASE_FILE = 'partnerctl.db';

export function resolveDatabase(
  urlOption: string | undefined,
  env: Environment,
  defaultPoolSize = 10,
): DatabaseConfig {
  const raw = (urlOption ?? env.DATABASE_URL ?? '').trim();
  const poolSize = parsePoolSize(env.PARTNERCTL_DB_POOL_SIZE, defaultPoolSize);
  if (raw === '') {
    return { provider: 'sqlite', url: join(dataDirectory(env), DEFAULT_DATABASE_FILE), poolSize };
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

function parsePoolSize(value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const size = Number(value);
  if (!Number.isInteger(size) || size < 1 || size > 1000) {
    throw new AppError('invalid_argument', `PARTNERCTL_DB_POOL_SIZE must be a whole number from 1 to 1000, got '${value}'`);
  }
  return size;
}

/**
 * The signing-key file: PARTNERCTL_SIGNING_KEY_FILE, else beside the SQLite file. On PostgreSQL it must be
 * named: several servers and the operators' CLI on different hosts must share one file, and a key file
 * made up silently on each host would give tokens that the other hosts refuse.
 */
export function resolveSigningKeyFile(database: DatabaseConfig, env: Environment): string {
  if (env.PARTNERCTL_SIGNING_KEY_FILE) return resolve(env.PARTNERCTL_SIGNING_KEY_FILE);
  if (database.provider === 'postgresql') {
    throw new AppError('signing_key_unavailable', 'PARTNERCTL_SIGNING_KEY_FILE is not set', {
      hint: 'on PostgreSQL every serve instance and the CLI must name the same signing-key file',
    });
  }
  return join(dirname(database.url), 'signing-keys.json');
}

/** A URL safe to print: the password, if any, replaced. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}
