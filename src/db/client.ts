import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { Pool } from 'pg';
import type { DatabaseConfig, Provider } from '../config.js';
import { redactUrl } from '../config.js';
import { AppError } from '../errors.js';
import type { PrismaClient } from './generated/sqlite/client.js';
import { openSqlReader, SQLITE_BUSY_TIMEOUT_MS, type SqlReader } from './sql.js';

// Both generated clients have the same models; the SQLite one's types stand for both.
export type Db = PrismaClient;
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** A database opened for plain SQL only: fast to open, enough for listing and migration status. */
export interface SqlDatabase {
  readonly provider: Provider;
  readonly config: DatabaseConfig;
  readonly sql: SqlReader;
  close(): Promise<void>;
}

/** The whole thing: plain SQL plus the Prisma client that every mutation goes through. */
export interface Database extends SqlDatabase {
  readonly prisma: Db;
}

export async function openSqlDatabase(config: DatabaseConfig): Promise<SqlDatabase> {
  let sql: SqlReader;
  try {
    sql = await openSqlReader(config);
    if (config.provider === 'postgresql') await sql.query('SELECT 1');
  } catch (error) {
    throw databaseUnavailable(config, error);
  }
  return { provider: config.provider, config, sql, close: () => sql.close() };
}

export async function createAdapterFactory(
  config: DatabaseConfig,
  pgPool?: Pool,
): Promise<SqlMigrationAwareDriverAdapterFactory> {
  if (config.provider === 'sqlite') {
    mkdirSync(dirname(config.url), { recursive: true, mode: 0o700 });
    const { PrismaBetterSqlite3 } = await import('@prisma/adapter-better-sqlite3');
    return new PrismaBetterSqlite3({ url: config.url, timeout: SQLITE_BUSY_TIMEOUT_MS });
  }
  const { PrismaPg } = await import('@prisma/adapter-pg');
  if (pgPool) return new PrismaPg(pgPool);
  return new PrismaPg({
    connectionString: config.url,
    max: config.poolSize,
    connectionTimeoutMillis: 5_000,
  });
}

/** Adds the Prisma client to a database opened for plain SQL (or opens one); they share the pg pool. */
export async function openDatabase(config: DatabaseConfig, opened?: SqlDatabase): Promise<Database> {
  const plain = opened ?? (await openSqlDatabase(config));
  const adapter = await createAdapterFactory(config, plain.sql.pgPool);
  const { PrismaClient } =
    config.provider === 'sqlite'
      ? await import('./generated/sqlite/client.js')
      : ((await import('./generated/postgresql/client.js')) as unknown as typeof import('./generated/sqlite/client.js'));
  const prisma = new PrismaClient({ adapter: adapter as never }) as Db;
  try {
    if (config.provider === 'sqlite') await prisma.$queryRawUnsafe('PRAGMA foreign_keys = ON');
  } catch (error) {
    await prisma.$disconnect().catch(() => {});
    await plain.close().catch(() => {});
    throw databaseUnavailable(config, error);
  }
  return {
    ...plain,
    prisma,
    // Prisma first: the pool it borrowed is ended by the plain side.
    close: async () => {
      await prisma.$disconnect().catch(() => {});
      await plain.close();
    },
  };
}

export function databaseUnavailable(config: DatabaseConfig, error: unknown): AppError {
  const where = config.provider === 'sqlite' ? config.url : redactUrl(config.url);
  const reason = error instanceof Error ? error.message.split('\n').filter(Boolean).pop() : String(error);
  return new AppError('database_unavailable', `cannot open the ${config.provider} database at ${where}: ${reason}`, {
    hint: 'check DATABASE_URL / --database-url, and that the database server is running',
    cause: error,
  });
}
