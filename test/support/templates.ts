import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
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
  await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  // Every connection it opened is closed when applyMigrations returns: a template must have none.
  await applyMigrations(resolveDatabase(url.toString(), {}));
  return name;
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
