import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Pool } from 'pg';
import type { DatabaseConfig, Provider } from '../config.js';

/**
 * Plain SQL on the same database, without the Prisma client. Loading Prisma's query compiler (WebAssembly)
 * costs a few hundred milliseconds per process, so the commands an operator runs most (listing, status)
 * read through this instead. Parameters are written $1, $2, … in order, each used once.
 */
export interface SqlReader {
  readonly provider: Provider;
  /** PostgreSQL: the connection pool, shared with the Prisma client so that a process has one pool. */
  readonly pgPool?: Pool;
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

export const SQLITE_BUSY_TIMEOUT_MS = 15_000;

export async function openSqlReader(config: DatabaseConfig): Promise<SqlReader> {
  if (config.provider === 'sqlite') {
    mkdirSync(dirname(config.url), { recursive: true, mode: 0o700 });
    const { default: BetterSqlite3 } = await import('better-sqlite3');
    const connection = new BetterSqlite3(config.url, { timeout: SQLITE_BUSY_TIMEOUT_MS });
    // WAL lets a running server read while the CLI writes; it is a property of the file, set once.
    connection.pragma('journal_mode = WAL');
    return {
      provider: 'sqlite',
      query: async <Row>(sql: string, params: readonly unknown[] = []) =>
        connection.prepare(sql.replace(/\$\d+/g, '?')).all(...params.map(toSqliteValue)) as Row[],
      close: async () => {
        connection.close();
      },
    };
  }
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: config.url, max: config.poolSize, connectionTimeoutMillis: 5_000 });
  // An idle connection the server closed (restart, failover) is dropped from the pool; the next query
  // opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {});
  return {
    provider: 'postgresql',
    pgPool: pool,
    query: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await pool.query(sql, params as unknown[])).rows as Row[],
    close: () => pool.end(),
  };
}

function toSqliteValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

/** Timestamps come back as Date from pg and as ISO text from SQLite. */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}
