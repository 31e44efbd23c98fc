import type { DatabaseConfig } from '../config.js';
import { openDatabase, type Database } from './client.js';
import { applyMigrations, needsSelfMigration } from './migrate.js';

/** Opens the database and makes sure its schema is current (migrating SQLite on first use). */
export async function connect(config: DatabaseConfig): Promise<Database> {
  const db = await openDatabase(config);
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
  return openDatabase(config);
}
