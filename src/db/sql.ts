import { closeSync, fstatSync, mkdirSync, openSync, readSync } from 'node:fs';
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
  /**
   * Counts the times the connection was reopened on a replaced SQLite file (always 0 on PostgreSQL): what
   * was read before a change of it may describe another database.
   */
  readonly epoch: number;
  /**
   * Rejects unless the database is usable as opened: on a watched SQLite file, that the file at the path is
   * still the one open and still a database (reopening it when it was replaced). Nothing on PostgreSQL.
   */
  verify(): Promise<void>;
  close(): Promise<void>;
}

export const SQLITE_BUSY_TIMEOUT_MS = 15_000;
/** How often (at most) a query checks that the SQLite file at the configured path is still the one open. */
const SQLITE_FILE_CHECK_INTERVAL_MS = 200;
const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/** The SQLite file at `path` cannot be used: missing, replaced by something that is not a database, or unopenable. */
class DatabaseFileError extends Error {
  override readonly name = 'DatabaseFileError';
  readonly code = 'SQLITE_FILE_UNAVAILABLE';
}

/** The device and inode of the file at `path`, and whether it starts like a SQLite database. */
function inspectFile(path: string): { dev: number; ino: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new DatabaseFileError(code === 'ENOENT' ? `the database file ${path} is missing` : `the database file ${path} cannot be read (${code})`, {
      cause: error,
    });
  }
  try {
    const { dev, ino, size } = fstatSync(fd);
    const header = Buffer.alloc(SQLITE_HEADER.length);
    const read = size === 0 ? 0 : readSync(fd, header, 0, header.length, 0);
    // An empty file is what SQLite itself creates before its first write; anything else must be a database.
    if (size !== 0 && (read !== header.length || !header.equals(SQLITE_HEADER))) {
      throw new DatabaseFileError(`the database file ${path} is not a SQLite database (overwritten?)`);
    }
    return { dev, ino };
  } finally {
    closeSync(fd);
  }
}

export interface SqlReaderOptions {
  /**
   * SQLite: watch the file at the configured path (a long-running server): when it is deleted, replaced or
   * overwritten, queries fail until a database is back at the path, which is then reopened. Never creates
   * a file once open.
   */
  watchFile?: boolean;
  /**
   * Told once per change of state of the watched file: `unavailable` when it is no longer usable (deleted,
   * replaced by something that is not a database, unopenable; `reason` says which), `reopened` when a
   * database at the path was opened in place of the one that was open. For the server's log.
   */
  onFileEvent?: (event: SqliteFileEvent) => void;
}

export type SqliteFileEvent = { kind: 'unavailable'; path: string; reason: string } | { kind: 'reopened'; path: string };

export async function openSqlReader(config: DatabaseConfig, options: SqlReaderOptions = {}): Promise<SqlReader> {
  if (config.provider === 'sqlite') {
    const path = config.url;
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const { default: BetterSqlite3 } = await import('better-sqlite3');
    const open = (mustExist: boolean) => {
      const opened = new BetterSqlite3(path, { timeout: SQLITE_BUSY_TIMEOUT_MS, fileMustExist: mustExist });
      try {
        // WAL lets a running server read while the CLI writes; it is a property of the file, set once.
        opened.pragma('journal_mode = WAL');
        opened.pragma('foreign_keys = ON');
        // Reads the schema: a file that is not a database fails here rather than on the first request.
        opened.prepare('SELECT count(*) FROM sqlite_master').get();
      } catch (error) {
        opened.close();
        throw error;
      }
      return opened;
    };
    let connection: import('better-sqlite3').Database | null = open(false);
    let identity = options.watchFile ? inspectFile(path) : null;
    let failure: Error | null = null;
    let checkedAt = Date.now();
    let epoch = 0;
    const tell = (event: SqliteFileEvent) => {
      try {
        options.onFileEvent?.(event);
      } catch {
        // A listener's failure is not the database's.
      }
    };
    const statements = new Map<string, import('better-sqlite3').Statement>();
    /**
     * Whether the file at the path is still the one open (same device and inode, still a database); when it
     * is not, the connection is closed and the file at the path, if any, opened instead.
     */
    const checkFile = (force: boolean) => {
      if (!identity && !failure) return;
      const now = Date.now();
      if (!force && now - checkedAt < SQLITE_FILE_CHECK_INTERVAL_MS) {
        if (failure) throw failure;
        return;
      }
      // A transaction of this connection in progress finishes on the file it began on.
      if (connection?.inTransaction) return;
      checkedAt = now;
      try {
        const current = inspectFile(path);
        if (connection && !failure && identity && current.dev === identity.dev && current.ino === identity.ino) return;
        connection?.close();
        connection = null;
        statements.clear();
        try {
          connection = open(true);
        } catch (error) {
          throw new DatabaseFileError(`the database file ${path} cannot be opened: ${(error as Error).message}`, { cause: error });
        }
        identity = inspectFile(path);
        failure = null;
        epoch++;
        tell({ kind: 'reopened', path });
      } catch (error) {
        // Never keep reading a file that is no longer the database at the path.
        connection?.close();
        connection = null;
        statements.clear();
        const reason = (error as Error).message;
        if (failure?.message !== reason) tell({ kind: 'unavailable', path, reason });
        failure = error as Error;
        throw failure;
      }
    };
    const live = () => {
      checkFile(false);
      if (!connection) throw failure ?? new DatabaseFileError(`the database file ${path} is not open`);
      return connection;
    };
    const prepare = (sql: string) => {
      const db = live();
      let statement = statements.get(sql);
      if (!statement) {
        statement = db.prepare(sql.replace(/\$\d+/g, '?'));
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
      get epoch() {
        return epoch;
      },
      query: tx.query,
      verify: async () => checkFile(true),
      transaction: <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
        const turn = queue.then(async () => {
          const db = live();
          if (options.lockWaitMs !== undefined) {
            // better-sqlite3 waits for a lock by sleeping on the thread: bounded here, then back to the default.
            db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.lockWaitMs))}`);
            try {
              db.exec('BEGIN IMMEDIATE');
            } finally {
              db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
            }
          } else {
            db.exec('BEGIN IMMEDIATE');
          }
          try {
            const result = await work(withDeadline(tx, options.timeoutMs));
            db.exec('COMMIT');
            return result;
          } catch (error) {
            if (db.open && db.inTransaction) db.exec('ROLLBACK');
            throw error;
          }
        });
        queue = turn.catch(() => {});
        return turn;
      },
      close: async () => {
        connection?.close();
        connection = null;
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
    epoch: 0,
    verify: async () => {},
    query: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await pool.query(sql, params as unknown[]).catch(withStatement(sql))).rows as Row[],
    transaction: async <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        // The server enforces the deadline too, so a statement waiting on a lock does not outlive it.
        await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.timeoutMs))}`);
        if (options.lockWaitMs !== undefined) {
          await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(options.lockWaitMs))}`);
        }
        const tx: SqlTx = {
          provider: 'postgresql',
          query: async <Row>(sql: string, params: readonly unknown[] = []) =>
            (await client.query(sql, params as unknown[]).catch(withStatement(sql))).rows as Row[],
          run: async (sql, params = []) => (await client.query(sql, params as unknown[]).catch(withStatement(sql))).rowCount ?? 0,
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

/** Keeps the statement on a PostgreSQL error, so that a refused privilege can be named (src/db/roles.ts). */
function withStatement(sql: string): (error: unknown) => never {
  return (error) => {
    if (error && typeof error === 'object' && !('statement' in error)) Object.assign(error, { statement: sql });
    throw error;
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
