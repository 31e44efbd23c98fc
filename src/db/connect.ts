import type { DatabaseConfig } from '../config.js';
import { openDatabase, type Database, type OpenOptions } from './client.js';
import { applyMigrations, needsSelfMigration } from './migrate.js';

/**
 * Opens the database with its schema current: SQLite is migrated
 * on first use; a PostgreSQL database that is behind is an error.
 */
export async function connect(config: DatabaseConfig, options: OpenOptions = {}): Promise<Database> {
  const db = await openDatabase(config, options);
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
  return openDatabase(config, options);
}
