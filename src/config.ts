import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { AppError } from './errors.js';

export type Provider = 'sqlite' | 'postgresql';

export interface DatabaseConfig {
  provider: Provider;
  /** For SQLite the absolute file path; for PostgreSQL the connection string. */
  url: string;
  /** PostgreSQL connection pool size (per process). */
  poolSize: number;
}

export function dataDirectory(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(base, 'partnerctl');
}

export const DEFAULT_DATABASE_FILE = 'partnerctl.db';

export function resolveDatabase(
  urlOption: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
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
export function resolveSigningKeyFile(database: DatabaseConfig, env: NodeJS.ProcessEnv = process.env): string {
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
