import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { resolveDatabase, type Provider } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { adminQuery, copySqliteTemplate, createDatabase, migratedTemplate } from './templates.js';

export { adminQuery };

/**
 * The backends a parametrised suite runs against: SQLite always, PostgreSQL when the server answered in
 * global setup (otherwise its suites are reported as skipped, with the reason printed once).
 */
export const BACKENDS: readonly Provider[] = ['sqlite', 'postgresql'];

export function backendAvailable(provider: Provider): boolean {
  return provider === 'sqlite' || inject('postgresAdminUrl') !== null;
}

export interface TestBackend {
  provider: Provider;
  /** DATABASE_URL for this backend's fresh database. */
  url: string;
  /** A folder of its own, for key files and the like. */
  dir: string;
  /** Environment for spawning the CLI or the server against it. */
  env: NodeJS.ProcessEnv;
  dispose(): Promise<void>;
}

/**
 * The test runner's environment without what would change the product's behaviour under test: its
 * variables (a runner's REDIS_URL, DATABASE_URL, PUBLIC_API_*, PARTNERCTL_*, OTEL_*) and the terminal's
 * size. Each test sets what it needs.
 */
export function runnerEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(PUBLIC_API_|PARTNERCTL_|OTEL_)|^(REDIS_URL|DATABASE_URL|COLUMNS|LINES)$/.test(name)),
  );
}

/**
 * A fresh database of the given kind: empty (not migrated: what `db migrate` and the first command see on a
 * new database), or with `migrated`, a copy of the run's migrated template (what `db migrate` makes, without
 * running the migrations again: a test whose subject is not the migration starts here).
 */
export async function createBackend(provider: Provider, options: { migrated?: boolean } = {}): Promise<TestBackend> {
  const dir = mkdtempSync(join(tmpdir(), 'partnerctl-test-'));
  const baseEnv = {
    ...runnerEnv(),
    XDG_DATA_HOME: join(dir, 'xdg'),
    // Contexts of the person running the tests are never read.
    XDG_CONFIG_HOME: join(dir, 'config'),
    PARTNERCTL_SIGNING_KEY_FILE: join(dir, 'signing-keys.json'),
    PARTNERCTL_ACTOR: 'test-runner',
    NO_COLOR: '1',
  };
  if (provider === 'sqlite') {
    // An empty file is an empty SQLite database: commands migrate it on first use (a path with no file at
    // all is refused, except by db migrate).
    const file = join(dir, 'partnerctl.db');
    if (options.migrated) copySqliteTemplate(await migratedTemplate('sqlite', inject('templateRun'), null), file);
    else writeFileSync(file, '');
    const url = `file:${file}`;
    return {
      provider,
      url,
      dir,
      env: { ...baseEnv, DATABASE_URL: url },
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const adminUrl = inject('postgresAdminUrl');
  if (!adminUrl) throw new Error('PostgreSQL is not reachable; guard the suite with backendAvailable()');
  const name = `partnerctl_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const run = inject('templateRun');
  await createDatabase(adminUrl, run, name, options.migrated ? await migratedTemplate('postgresql', run, adminUrl) : undefined);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    provider,
    url: url.toString(),
    dir,
    env: { ...baseEnv, DATABASE_URL: url.toString() },
    dispose: async () => {
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A database with the committed migrations applied, opened through the app's own factory. A database still
 * empty (as createBackend made it) becomes a copy of the run's migrated template first (test/support/
 * templates.ts); `applyMigrations` then finds nothing pending.
 */
export async function openMigrated(backend: TestBackend): Promise<Database> {
  await fillFromTemplate(backend);
  const config = resolveDatabase(backend.url, {});
  await applyMigrations(config);
  return openDatabase(config);
}

async function fillFromTemplate(backend: TestBackend): Promise<void> {
  if (backend.provider === 'sqlite') {
    const file = backend.url.slice('file:'.length);
    if (statSync(file, { throwIfNoEntry: false })?.size === 0) copySqliteTemplate(await migratedTemplate('sqlite', inject('templateRun'), null), file);
    return;
  }
  const adminUrl = inject('postgresAdminUrl');
  if (adminUrl === null) return;
  const name = new URL(backend.url).pathname.slice(1);
  const client = new pg.Client({ connectionString: backend.url });
  await client.connect();
  let tables: number;
  try {
    tables = Number((await client.query("SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0].n);
  } finally {
    await client.end();
  }
  if (tables > 0) return;
  const run = inject('templateRun');
  const template = await migratedTemplate('postgresql', run, adminUrl);
  await adminQuery(adminUrl, `DROP DATABASE ${name} WITH (FORCE)`);
  await createDatabase(adminUrl, run, name, template);
}
