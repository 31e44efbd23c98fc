import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Pool } from 'pg';
import type { DatabaseConfig, Provider } from '../config.js';
import { withDeadline, type SqlTx, type TransactionOptions } from './unit.js';

/**
 * Plain SQL on the database, without the Prisma client: Prisma is the schema and migration source of
 * truth, but loading its query compiler (WebAssembly) costs a few hundred milliseconds per process, more
 * than a whole command should take. Parameters are written $1, $2, … in order, each used once.
 */
export interface SqlReader {
  readonly provider: Provider;
  /** PostgreSQL: the connection pool (one per process). */
  readonly pgPool?: Pool;
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws. On SQLite the
   * transaction starts with the write lock (BEGIN IMMEDIATE), and transactions of one connection queue.
   */
  transaction<T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions): Promise<T>;
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
    connection.pragma('foreign_keys = ON');
    const statements = new Map<string, import('better-sqlite3').Statement>();
    const prepare = (sql: string) => {
      let statement = statements.get(sql);
      if (!statement) {
        statement = connection.prepare(sql.replace(/\$\d+/g, '?'));
        if (statements.size > 200) statements.clear();
        statements.set(sql, statement);
      }
      return statement;
    };
    const tx: SqlTx = {
      provider: 'sqlite',
      query: async <Row>(sql: string, params: readonly unknown[] = []) => {
        const statement = prepare(sql);
        const values = params.map(toSqliteValue);
        if (statement.reader) return statement.all(...values) as Row[];
        statement.run(...values);
        return [];
      },
      run: async (sql, params = []) => prepare(sql).run(...params.map(toSqliteValue)).changes,
    };
    let queue: Promise<unknown> = Promise.resolve();
    return {
      provider: 'sqlite',
      query: tx.query,
      transaction: <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
        const turn = queue.then(async () => {
          connection.exec('BEGIN IMMEDIATE');
          try {
            const result = await work(withDeadline(tx, options.timeoutMs));
            connection.exec('COMMIT');
            return result;
          } catch (error) {
            if (connection.inTransaction) connection.exec('ROLLBACK');
            throw error;
          }
        });
        queue = turn.catch(() => {});
        return turn;
      },
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
    query: async <Row>(sql: string, params: readonly unknown[] = []) => (await pool.query(sql, params as unknown[])).rows as Row[],
    transaction: async <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        // The server enforces the deadline too, so a statement waiting on a lock does not outlive it.
        await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.timeoutMs))}`);
        const tx: SqlTx = {
          provider: 'postgresql',
          query: async <Row>(sql: string, params: readonly unknown[] = []) => (await client.query(sql, params as unknown[])).rows as Row[],
          run: async (sql, params = []) => (await client.query(sql, params as unknown[])).rowCount ?? 0,
        };
        const result = await work(withDeadline(tx, options.timeoutMs));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw error;
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

/**
 * SQLite has no date or boolean type: dates are stored as ISO text in the form Prisma writes
 * (`…T12:00:00.000+00:00`), so that text comparison orders them whoever wrote them.
 */
function toSqliteValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace('Z', '+00:00');
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

/** Timestamps come back as Date from pg and as ISO text from SQLite. */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}
