import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { DatabaseConfig, Provider } from '../config.js';
import { AppError, firstLine } from '../errors.js';
import { nameKey } from '../text.js';
import { PACKAGE_ROOT } from '../package-root.js';
import { databaseUnavailable, openDatabase, type Database } from './client.js';
import { SQLITE_BUSY_TIMEOUT_MS } from './sqlite.js';
import { NO_FILTERS, openSchemaEngine, type MigrationList } from './schema-engine.js';

const PRISMA_DIR = join(PACKAGE_ROOT, 'prisma');

export function schemaPath(provider: Provider): string {
  return join(PRISMA_DIR, provider, 'schema.prisma');
}

function migrationsDir(provider: Provider): string {
  return join(PRISMA_DIR, provider, 'migrations');
}

/** The committed history, in Prisma's folder layout, as the schema engine wants it. */
export function committedMigrations(provider: Provider, through?: string): MigrationList {
  const baseDir = migrationsDir(provider);
  const names = readdirSync(baseDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .filter((name) => through === undefined || name <= through)
    .sort();
  return {
    baseDir,
    lockfile: { path: 'migration_lock.toml', content: readFileSync(join(baseDir, 'migration_lock.toml'), 'utf8') },
    shadowDbInitScript: '',
    migrationDirectories: names.map((name) => ({
      path: name,
      migrationFile: {
        path: 'migration.sql',
        content: { tag: 'ok', value: readFileSync(join(baseDir, name, 'migration.sql'), 'utf8') },
      },
    })),
  };
}

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  /** Applied to the database but unknown to this version of partnerctl (the database is newer). */
  unknown: string[];
  failed: string[];
}

export async function migrationStatus(db: Database): Promise<MigrationStatus> {
  const committed = committedMigrations(db.provider).migrationDirectories.map((dir) => dir.path);
  let rows: { migration_name: string; finished_at: unknown; rolled_back_at: unknown }[] = [];
  try {
    rows = await db.sql.query('SELECT migration_name, finished_at, rolled_back_at FROM _prisma_migrations ORDER BY migration_name');
  } catch (error) {
    if (!/no such table|does not exist/i.test(String((error as Error).message))) throw error;
  }
  const live = rows.filter((row) => row.rolled_back_at === null);
  const applied = live.filter((row) => row.finished_at !== null).map((row) => row.migration_name);
  const failed = live.filter((row) => row.finished_at === null).map((row) => row.migration_name);
  return {
    applied,
    pending: committed.filter((name) => !applied.includes(name) && !failed.includes(name)),
    unknown: applied.filter((name) => !committed.includes(name)),
    failed,
  };
}

/**
 * Applies what is pending, holding a cross-process lock so that two first runs cannot race, then chains the
 * audit events written before the audit chain existed. `through` stops at that migration (tests of upgrades).
 */
export async function applyMigrations(config: DatabaseConfig, options: { through?: string } = {}): Promise<string[]> {
  let release: () => Promise<void>;
  try {
    release = await takeMigrationLock(config);
  } catch (error) {
    throw databaseUnavailable(config, error);
  }
  let applied: string[] = [];
  try {
    let upToDate = false;
    await withDatabase(config, async (db) => {
      await refuseNameCollisions(db);
      const status = await migrationStatus(db);
      const through = options.through;
      upToDate = status.failed.length === 0 && status.pending.every((name) => through !== undefined && name > through);
    });
    // Nothing to apply: the schema engine (a WebAssembly module compiled on every start) is not started.
    if (!upToDate) {
      const adapters = await trackedAdapterFactory(config);
      const path = schemaPath(config.provider);
      const engine = await openSchemaEngine(path, readFileSync(path, 'utf8'), adapters.factory);
      try {
        const result = await engine.applyMigrations({
          migrationsList: committedMigrations(config.provider, options.through),
          filters: NO_FILTERS,
        });
        applied = result.appliedMigrationNames;
      } finally {
        engine.free();
        await adapters.disposeAll();
      }
    }
    await withDatabase(config, fillNameKeys);
    await chainAuditTrail(config);
    return applied;
  } catch (error) {
    if (error instanceof AppError) throw error;
    if (/database is locked|SQLITE_BUSY|busy|timed out|lock/i.test(String((error as Error)?.message ?? error))) {
      throw new AppError('database_unavailable', 'applying migrations failed: the database is in use by another process (a running server?)', {
        next: 'migrate_when_idle',
        cause: error,
      });
    }
    throw new AppError('database_unavailable', `applying migrations failed: ${firstLine(error).slice(0, 300)}`, {
      next: 'migration_status',
      cause: error,
    });
  } finally {
    await release();
  }
}

async function withDatabase(config: DatabaseConfig, work: (db: Database) => Promise<void>): Promise<void> {
  const db = await openDatabase(config);
  try {
    await work(db);
  } finally {
    await db.close();
  }
}

const NO_TABLE_OR_COLUMN = /no such (table|column)|does not exist/i;

/**
 * Partner names are unique ignoring case and Unicode form (partners.name_key, migration
 * 20261124090000_partner_name_key). Names that an older version let in and that the rule makes one stop the
 * migration before anything is applied, every group named: which partner keeps which name is the
 * operator's decision, not a guess made here.
 */
async function refuseNameCollisions(db: Database): Promise<void> {
  let rows: { id: string; name: string; name_key?: string | null }[];
  try {
    rows = await db.sql.query('SELECT id, name, name_key FROM partners ORDER BY id');
  } catch (error) {
    if (!NO_TABLE_OR_COLUMN.test(String((error as Error).message))) throw error;
    try {
      rows = await db.sql.query('SELECT id, name FROM partners ORDER BY id');
    } catch (inner) {
      if (NO_TABLE_OR_COLUMN.test(String((inner as Error).message))) return;
      throw inner;
    }
  }
  const byKey = new Map<string, { id: string; name: string }[]>();
  for (const row of rows) {
    const key = row.name_key ?? nameKey(row.name);
    byKey.set(key, [...(byKey.get(key) ?? []), row]);
  }
  const groups = [...byKey.values()].filter((group) => group.length > 1);
  if (groups.length === 0) return;
  const named = groups.map((group) => group.map((row) => `${JSON.stringify(row.name)} (${row.id})`).join(' and ')).join('; ');
  throw new AppError(
    'partner_exists',
    `cannot migrate: partner names are now unique ignoring case and Unicode form, and ${groups.length} group(s) of partners ` +
      `share a name that way: ${named}; nothing was changed`,
    {
      hint: "rename all but one partner of each group (UPDATE partners SET name = '<new name>' WHERE id = '<id>')",
      next: 'migrate_after_renames',
    },
  );
}

/** Gives every partner without one its name key (those created before the key existed). */
async function fillNameKeys(db: Database): Promise<void> {
  const rows = await db.sql.query<{ id: string; name: string }>('SELECT id, name FROM partners WHERE name_key IS NULL');
  if (rows.length === 0) return;
  await db.sql.transaction(
    async (tx) => {
      for (const row of rows) await tx.run('UPDATE partners SET name_key = $1 WHERE id = $2 AND name_key IS NULL', [nameKey(row.name), row.id]);
    },
    { timeoutMs: 60_000 },
  );
}

/**
 * Chains the audit events written before the chain existed, once (a no-op when there are none, or before the
 * migration that adds the chain). Runs right after the migrations, as the role that applied them: on
 * PostgreSQL only the audit table's owner may update its rows. Returns how many events it chained.
 */
export async function chainAuditTrail(config: DatabaseConfig): Promise<number> {
  const { chainLegacyEvents } = await import('./repositories/audit.js');
  const db = await openDatabase(config);
  try {
    const [table] = await db.sql.query<{ n: unknown }>(db.dialect.tableCountSql, ['audit_chain']);
    if (Number(table?.n ?? 0) === 0) return 0;
    return await db.sql.transaction((tx) => chainLegacyEvents(tx), { timeoutMs: 600_000 });
  } finally {
    await db.close();
  }
}

/**
 * Checked by every command before it touches the data. Returns true when the embedded SQLite default has
 * migrations to apply (it migrates itself on first use); a PostgreSQL database shared by several servers
 * is migrated once, on purpose, by an operator, so pending migrations there are an error.
 */
export async function needsSelfMigration(db: Database): Promise<boolean> {
  const status = await migrationStatus(db);
  if (status.failed.length > 0) {
    throw new AppError('schema_out_of_date', `migration ${status.failed[0]} failed earlier and was never finished`, {
      hint: 'inspect the database',
      next: 'migration_status',
    });
  }
  if (status.pending.length === 0) return false;
  if (db.dialect.migratesItself) return true;
  throw new AppError('schema_out_of_date', `the database has ${status.pending.length} pending migration(s)`, {
    hint: 'it is not applied automatically on PostgreSQL',
    next: 'migrate',
  });
}

/** The driver adapter Prisma's schema engine migrates through (the only user of Prisma's runtime pieces). */
export async function createAdapterFactory(config: DatabaseConfig): Promise<SqlMigrationAwareDriverAdapterFactory> {
  if (config.provider === 'sqlite') {
    mkdirSync(dirname(config.url), { recursive: true, mode: 0o700 });
    const { PrismaBetterSqlite3 } = await import('@prisma/adapter-better-sqlite3');
    return new PrismaBetterSqlite3({ url: config.url, timeout: SQLITE_BUSY_TIMEOUT_MS });
  }
  const { PrismaPg } = await import('@prisma/adapter-pg');
  return new PrismaPg({ connectionString: config.url, max: config.poolSize, connectionTimeoutMillis: 5_000 });
}

/**
 * The engine does not close its connections when freed, and on SQLite it keeps the file locked: keep hold
 * of every connection it opens and close them ourselves.
 */
export async function trackedAdapterFactory(config: DatabaseConfig) {
  const inner = await createAdapterFactory(config);
  const opened: SqlDriverAdapter[] = [];
  const track = async (connection: Promise<SqlDriverAdapter>) => {
    const adapter = await connection;
    opened.push(adapter);
    return adapter;
  };
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: inner.provider,
    adapterName: inner.adapterName,
    connect: () => track(inner.connect()),
    connectToShadowDb: () => track(inner.connectToShadowDb()),
  };
  return {
    factory,
    disposeAll: async () => {
      await Promise.allSettled(opened.map((adapter) => adapter.dispose()));
      // A pg adapter's pool outlives dispose() and would hold the process open for its idle timeout.
      await Promise.allSettled(
        opened.map((adapter) => (adapter as { underlyingDriver?: () => { end?: () => Promise<void> } }).underlyingDriver?.().end?.()),
      );
    },
  };
}

// better-sqlite3 waits for a busy lock synchronously, blocking the event loop: a second migration in the
// same process would wait on a lock the first can then never release. Migrations of one file in one
// process queue here first; the file lock only has to keep other processes out.
const inProcessMigrations = new Map<string, Promise<void>>();

/**
 * The lock between processes migrating one SQLite file: `path`, an empty SQLite file held with BEGIN
 * EXCLUSIVE, and removed by its holder before it lets go, so that nothing is left beside the database. A
 * process waiting on it then gets a file no longer at the path: after locking, each checks that the path
 * still names the file it locked (the same inode before opening and after locking; a name is never bound
 * to a file again once removed) and starts over if not. Returns the release.
 */
async function lockFile(path: string): Promise<() => void> {
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const inode = () => {
    try {
      return statSync(path).ino;
    } catch {
      return null;
    }
  };
  const deadline = performance.now() + 60_000;
  for (;;) {
    // Created (and closed) before SQLite opens it: closing another descriptor of a locked file would drop its locks.
    writeFileSync(path, '', { flag: 'a', mode: 0o600 });
    const before = inode();
    const lock = new BetterSqlite3(path, { timeout: Math.max(0, Math.round(deadline - performance.now())) });
    try {
      lock.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      lock.close();
      // The holder removed the file while this one waited on it (SQLite then fails with an I/O error): again.
      if (inode() !== before && performance.now() < deadline) continue;
      throw error;
    }
    if (before !== null && inode() === before) {
      return () => {
        rmSync(path, { force: true });
        lock.exec('ROLLBACK');
        lock.close();
      };
    }
    lock.exec('ROLLBACK');
    lock.close();
    if (performance.now() > deadline) throw new Error(`the migration lock ${path} was not taken within 60 s`);
  }
}

async function takeMigrationLock(config: DatabaseConfig): Promise<() => Promise<void>> {
  if (config.provider === 'sqlite') {
    const before = inProcessMigrations.get(config.url) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const queued = before.then(() => mine);
    inProcessMigrations.set(config.url, queued);
    const leave = () => {
      done();
      if (inProcessMigrations.get(config.url) === queued) inProcessMigrations.delete(config.url);
    };
    await before;
    let release: () => void;
    try {
      mkdirSync(dirname(config.url), { recursive: true, mode: 0o700 });
      release = await lockFile(`${config.url}.migrate-lock`);
    } catch (error) {
      leave();
      throw error;
    }
    return async () => {
      try {
        release();
      } finally {
        leave();
      }
    };
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: config.url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query("SELECT pg_advisory_lock(hashtext('partnerctl:migrate'))");
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return async () => {
    await client.query("SELECT pg_advisory_unlock(hashtext('partnerctl:migrate'))").catch(() => {});
    await client.end();
  };
}

