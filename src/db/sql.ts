import type { Dialect } from './dialect.js';
import type { SqliteFileEvent } from './sqlite-file.js';
import type { SqlTx, TransactionOptions } from './unit.js';

export type { SqliteFileEvent } from './sqlite-file.js';

/**
 * Plain SQL on the database, reads and writes, without the Prisma client: Prisma is the schema and migration
 * source of truth, but loading its query compiler (WebAssembly) costs a few hundred milliseconds per
 * process, more than a whole command should take. Parameters are written $1, $2, … in order, each used once.
 * One implementation per provider (src/db/sqlite.ts, src/db/postgresql.ts), opened by `openDatabase`.
 */
export interface SqlDatabase {
  readonly dialect: Dialect;
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

export interface SqlDatabaseOptions {
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

/** Timestamps come back as Date from pg and as ISO text from SQLite. */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}
