import { OffsetClock, systemClock, type Clock } from '../clock.js';
import { measureClock } from './clock.js';
import type { DatabaseConfig, Provider } from '../config.js';
import { AppError } from '../errors.js';
import { dialectOf, type Dialect } from './dialect.js';
import { openPostgresql, type PostgresqlTimeouts } from './postgresql.js';
import type { SqlDatabase, SqlDatabaseOptions } from './sql.js';
import { openSqlite } from './sqlite.js';

/**
 * The database as commands and the server use it: plain SQL and transactions (no Prisma client at run
 * time; Prisma is the schema and migration source of truth, and the migrations run through its engine).
 */
export interface Database {
  /** The backend's name, for people and JSON answers; what differs between backends is asked of `dialect`. */
  readonly provider: Provider;
  readonly dialect: Dialect;
  readonly config: DatabaseConfig;
  readonly sql: SqlDatabase;
  /**
   * The one source of time for the domain: every rule that compares instants reads it (tests inject their
   * own). On PostgreSQL, unless injected, the database server's clock (an OffsetClock: its last reading plus
   * this host's monotonic time since).
   */
  readonly clock: Clock;
  close(): Promise<void>;
}

export interface OpenOptions extends SqlDatabaseOptions, PostgresqlTimeouts {
  clock?: Clock;
}

export async function openDatabase(config: DatabaseConfig, options: OpenOptions = {}): Promise<Database> {
  let sql: SqlDatabase;
  let clock = options.clock ?? systemClock;
  try {
    sql = config.provider === 'sqlite' ? await openSqlite(config.url, options) : await openPostgresql(config.url, config.poolSize, options);
    if (sql.dialect.hasServerClock) {
      // Instants written by one process are compared by others (a brake's cut-off with a token's issue time):
      // the server's clock is read here, then counted on from on this host's monotonic clock (`serve` reads it
      // again every second: ClockSync).
      if (options.clock === undefined) {
        const corrected = new OffsetClock();
        corrected.set((await measureClock(sql, corrected.wall, corrected.monotonic)).reading);
        clock = corrected;
      } else {
        await sql.query('SELECT 1');
      }
    }
  } catch (error) {
    throw databaseUnavailable(config, error);
  }
  return { provider: config.provider, dialect: sql.dialect, config, sql, clock, close: () => sql.close() };
}

export function databaseUnavailable(config: DatabaseConfig, error: unknown): AppError {
  const where = dialectOf(config.provider).describe(config.url);
  const reason = error instanceof Error ? error.message.split('\n').filter(Boolean).pop() : String(error);
  return new AppError('database_unavailable', `cannot open the ${config.provider} database at ${where}: ${reason}`, {
    next: 'check_database_url',
    cause: error,
  });
}
