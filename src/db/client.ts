import { OffsetClock, systemClock, type Clock } from '../clock.js';
import { measureClockOffset } from './clock.js';
import type { DatabaseConfig, Provider } from '../config.js';
import { redactUrl } from '../config.js';
import { AppError } from '../errors.js';
import { openPostgresql, type PostgresqlTimeouts } from './postgresql.js';
import type { SqlDatabase, SqlDatabaseOptions } from './sql.js';
import { openSqlite } from './sqlite.js';

/**
 * The database as commands and the server use it: plain SQL and transactions (no Prisma client at run
 * time; Prisma is the schema and migration source of truth, and the migrations run through its engine).
 */
export interface Database {
  readonly provider: Provider;
  readonly config: DatabaseConfig;
  readonly sql: SqlDatabase;
  /**
   * The one source of time for the domain: every rule that compares instants reads it (tests inject their
   * own). On PostgreSQL, unless injected, the database server's clock (an OffsetClock over this host's).
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
    if (config.provider === 'postgresql') {
      // Instants written by one process are compared by others (a brake's cut-off with a token's issue time):
      // on PostgreSQL every process reads the database server's clock, through its own corrected by the
      // offset measured here (`serve` measures it again every second: ClockSync). SQLite is one host, one clock.
      if (options.clock === undefined) {
        const corrected = new OffsetClock(systemClock);
        corrected.offsetMs = (await measureClockOffset(sql, systemClock)).offsetMs;
        clock = corrected;
      } else {
        await sql.query('SELECT 1');
      }
    }
  } catch (error) {
    throw databaseUnavailable(config, error);
  }
  return { provider: config.provider, config, sql, clock, close: () => sql.close() };
}

export function databaseUnavailable(config: DatabaseConfig, error: unknown): AppError {
  const where = config.provider === 'sqlite' ? config.url : redactUrl(config.url);
  const reason = error instanceof Error ? error.message.split('\n').filter(Boolean).pop() : String(error);
  return new AppError('database_unavailable', `cannot open the ${config.provider} database at ${where}: ${reason}`, {
    next: 'check_database_url',
    cause: error,
  });
}
