import { chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { resolveDatabase } from '../../src/config.js';
import type { Provider } from '../../src/config.js';
import { applyMigrations } from '../../src/db/migrate.js';

/**
 * Migrated templates: a test that wants a migrated database gets a copy (`openMigrated`,
 * test/support/backends.ts) instead of running every migration through Prisma's schema engine again (0.3 to
 * 2 s a database on two cores). Each test worker migrates one template per backend, on first use, with the
 * same `applyMigrations` the product runs; test/db/migrations.test.ts and every test that migrates an
 * empty database through the CLI keep applying the migrations from scratch. The global setups give the run
 * its folder and id, and remove what the workers made (`removeTemplates`, `removeOrphanTemplates`).
 */
export interface TemplateRun {
  /** Where the workers' SQLite templates go. */
  dir: string;
  /** Names this run's PostgreSQL templates: `partnerctl_tpl_<id>_<worker pid>`. */
  id: string;
  /** The tablespace the run's PostgreSQL databases are made in (`memoryTablespace`); null: the server's default. */
  tablespace: string | null;
}

// Module state lasts as long as the worker (isolate: false), so one template serves all of its files.
const made = new Map<Provider, Promise<string>>();

/** This worker's migrated template of `provider`: a SQLite file's path, or a PostgreSQL database's name. */
export function migratedTemplate(provider: Provider, run: TemplateRun, postgresAdminUrl: string | null): Promise<string> {
  let template = made.get(provider);
  if (template === undefined) {
    template = provider === 'sqlite' ? sqliteTemplate(run) : postgresqlTemplate(run, postgresAdminUrl!);
    made.set(provider, template);
    // A failed attempt is not kept: the next test tries again and reports its own error.
    template.catch(() => made.delete(provider));
  }
  return template;
}

async function sqliteTemplate(run: TemplateRun): Promise<string> {
  mkdirSync(run.dir, { recursive: true });
  const file = join(run.dir, `template-${process.pid}.db`);
  writeFileSync(file, '');
  await applyMigrations(resolveDatabase(`file:${file}`, {}));
  return file;
}

async function postgresqlTemplate(run: TemplateRun, adminUrl: string): Promise<string> {
  const name = `partnerctl_tpl_${run.id}_${process.pid}`;
  await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await createDatabase(adminUrl, run, name);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  // Every connection it opened is closed when applyMigrations returns: a template must have none.
  await applyMigrations(resolveDatabase(url.toString(), {}));
  return name;
}

/**
 * Makes an empty PostgreSQL database (from template1), or a copy of `template`, in the run's tablespace. The
 * files are copied as they are (FILE_COPY), not written block by block through the WAL (PostgreSQL 15's
 * default): for a database of a few megabytes that is about half the server's CPU per copy.
 */
export function createDatabase(adminUrl: string, run: TemplateRun, name: string, template?: string): Promise<void> {
  const from = template === undefined ? '' : ` TEMPLATE ${template}`;
  const where = run.tablespace === null ? '' : ` TABLESPACE ${run.tablespace}`;
  return adminQuery(adminUrl, `CREATE DATABASE ${name}${from} STRATEGY FILE_COPY${where}`);
}

const MEMORY_TABLESPACE = 'partnerctl_test_memory';
const MEMORY_FOLDER = '/dev/shm/partnerctl-test-tablespace';

/**
 * The tablespace for the run's PostgreSQL databases: a folder in memory (/dev/shm), when the server runs on
 * this machine and this process can give it a folder of its own (as root, or as the server's user); null
 * otherwise, and the databases go to the server's default tablespace as before (with one line saying why
 * when the server is on this machine but the folder or the tablespace could not be made).
 *
 * Why: a run makes and drops about two hundred databases, some three hundred files each. On a disk without a
 * journal (this project's machines), ext4 looks past every inode deleted in the last 30 s for each new file,
 * and that search was a tenth of the whole run's CPU (`perf record -a` over a run, 2026-11-28: the server's
 * `find_inode_bit`, `recently_deleted`, `find_get_block_common`). To the product the databases are the
 * same; only where the server keeps their files differs. Made once and kept for the next runs (one
 * tablespace, whatever the run); made again when its folder is gone (after a reboot).
 */
export async function memoryTablespace(adminUrl: string): Promise<string | null> {
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(adminUrl).hostname) || !existsSync('/dev/shm')) return null;
  const client = new pg.Client({ connectionString: adminUrl });
  try {
    await client.connect();
    // Two runs starting together: one makes it, the other finds it made.
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [MEMORY_TABLESPACE]);
    const { rows } = await client.query<{ location: string }>(
      'SELECT pg_tablespace_location(oid) AS location FROM pg_tablespace WHERE spcname = $1',
      [MEMORY_TABLESPACE],
    );
    const kept = () => readdirSync(MEMORY_FOLDER).some((name) => name.startsWith('PG_'));
    if (rows[0]?.location === MEMORY_FOLDER && existsSync(MEMORY_FOLDER) && kept()) return MEMORY_TABLESPACE;
    if (rows.length > 0) await client.query(`DROP TABLESPACE ${MEMORY_TABLESPACE}`);
    const { uid, gid } = statSync((await client.query<{ data_directory: string }>('SHOW data_directory')).rows[0]!.data_directory);
    rmSync(MEMORY_FOLDER, { recursive: true, force: true });
    mkdirSync(MEMORY_FOLDER, { mode: 0o700 });
    chownSync(MEMORY_FOLDER, uid, gid);
    await client.query(`CREATE TABLESPACE ${MEMORY_TABLESPACE} LOCATION '${MEMORY_FOLDER}'`);
    return MEMORY_TABLESPACE;
  } catch (error) {
    console.warn(`(PostgreSQL test databases stay on the server's disk: no tablespace in memory: ${(error as Error).message})`);
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A copy of a migrated SQLite template at `file`. */
export function copySqliteTemplate(template: string, file: string): void {
  copyFileSync(template, file);
}

/** What a run's workers made, removed by its global setup's teardown. */
export async function removeTemplates(run: TemplateRun, postgresAdminUrl: string | null): Promise<void> {
  rmSync(run.dir, { recursive: true, force: true });
  if (postgresAdminUrl !== null) await dropTemplates(postgresAdminUrl, (runPid, id) => id === run.id && runPid !== null);
}

/**
 * Templates left by runs that were killed before their teardown (their main process is gone), removed by the
 * next run's global setup so that they do not pile up on a shared server.
 */
export function removeOrphanTemplates(postgresAdminUrl: string): Promise<void> {
  return dropTemplates(postgresAdminUrl, (runPid) => runPid !== null && !alive(runPid));
}

/** Drops the PostgreSQL templates (`partnerctl_tpl_<run pid>_<hex>_<worker pid>`) that `which` picks. */
async function dropTemplates(adminUrl: string, which: (runPid: number | null, runId: string) => boolean): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'partnerctl\\_tpl\\_%'");
    for (const { datname } of rows) {
      const [, pid, hex] = /^partnerctl_tpl_(\d+)_([0-9a-f]+)_\d+$/.exec(datname) ?? [];
      if (!which(pid === undefined ? null : Number(pid), `${pid}_${hex}`)) continue;
      // Another run may drop it at the same moment: gone is gone.
      await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => {});
    }
  } finally {
    await client.end();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs SQL (one statement or a script) on its own short-lived connection. */
export async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
