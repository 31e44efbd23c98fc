import type { DatabaseConfig } from '../config.js';
import { openDatabase, openSqlDatabase, type Database, type SqlDatabase } from './client.js';
import { applyMigrations, needsSelfMigration } from './migrate.js';

/**
 * Opens the database for plain SQL (no Prisma client: fast), with its schema current: SQLite is migrated
 * on first use; a PostgreSQL database that is behind is an error.
 */
export async function connectSql(config: DatabaseConfig): Promise<SqlDatabase> {
  const db = await openSqlDatabase(config);
  let migrate: boolean;
  try {
    migrate = await needsSelfMigration(db);
  } catch (error) {
    await db.close().catch(() => {});
    throw error;
  }
  if (!migrate) return db;
  // The schema engine needs the file to itself while it migrates.
  await db.close();
  await applyMigrations(config);
  return openSqlDatabase(config);
}

/** Opens the database with the Prisma client, with its schema current. */
export async function connect(config: DatabaseConfig): Promise<Database> {
  return openDatabase(config, await connectSql(config));
}
