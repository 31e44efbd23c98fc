import type { DatabaseConfig } from '../config.js';
import { openDatabase, type Database } from './client.js';
import { ensureSchemaCurrent } from './migrate.js';

/** Opens the database and makes sure its schema is current (migrating SQLite on first use). */
export async function connect(config: DatabaseConfig): Promise<Database> {
  const db = await openDatabase(config);
  try {
    await ensureSchemaCurrent(db);
  } catch (error) {
    await db.close().catch(() => {});
    throw error;
  }
  return db;
}
