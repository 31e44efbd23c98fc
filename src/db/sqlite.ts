import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Database as Connection, Statement } from 'better-sqlite3';
import { sqliteDialect } from './dialect.js';
import type { SqlDatabase, SqlDatabaseOptions } from './sql.js';
import { SqliteFile } from './sqlite-file.js';
import { withDeadline, type SqlTx, type TransactionOptions } from './unit.js';

export const SQLITE_BUSY_TIMEOUT_MS = 15_000;

/** The SQLite file at `path` (created when missing), on one connection whose transactions queue. */
export async function openSqlite(path: string, options: SqlDatabaseOptions = {}): Promise<SqlDatabase> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const open = (mustExist: boolean): Connection => {
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
  const statements = new Map<string, Statement>();
  const file = new SqliteFile(path, open, {
    watch: options.watchFile === true,
    onFileEvent: options.onFileEvent,
    onConnectionGone: () => statements.clear(),
  });
  const prepare = (sql: string) => {
    const connection = file.live();
    let statement = statements.get(sql);
    if (!statement) {
      statement = connection.prepare(sql.replace(/\$\d+/g, '?'));
      if (statements.size > 200) statements.clear();
      statements.set(sql, statement);
    }
    return statement;
  };
  const tx: SqlTx = {
    dialect: sqliteDialect,
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
    dialect: sqliteDialect,
    get epoch() {
      return file.epoch;
    },
    query: tx.query,
    verify: async () => file.verify(),
    transaction: <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
      const turn = queue.then(async () => {
        const connection = file.live();
        if (options.lockWaitMs !== undefined) {
          // better-sqlite3 waits for a lock by sleeping on the thread: bounded here, then back to the default.
          connection.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.lockWaitMs))}`);
          try {
            connection.exec('BEGIN IMMEDIATE');
          } finally {
            connection.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
          }
        } else {
          connection.exec('BEGIN IMMEDIATE');
        }
        try {
          const result = await work(withDeadline(tx, options.timeoutMs));
          connection.exec('COMMIT');
          return result;
        } catch (error) {
          if (connection.open && connection.inTransaction) connection.exec('ROLLBACK');
          throw error;
        }
      });
      queue = turn.catch(() => {});
      return turn;
    },
    close: async () => file.close(),
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
