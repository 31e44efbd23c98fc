import { rmSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase, type DatabaseConfig } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { connect } from '../../src/db/connect.js';
import { applyMigrations, migrationStatus, needsSelfMigration } from '../../src/db/migrate.js';
import { AppError } from '../../src/errors.js';
import { adminQuery, backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';
import { expectAppError } from '../domain/fixtures.js';
import {
  committedNames,
  foldTableChanges,
  diffLiveToDatamodel,
  historySql,
  initMigrationSql,
  openEngine,
  PARTIAL_INDEX,
  sqlFromEmpty,
  statements,
} from './engine-helpers.js';

async function count(db: Database, sql: string): Promise<number> {
  const [row] = await db.sql.query<{ n: unknown }>(sql);
  return Number(row!.n);
}

const PARTIAL_INDEX_SQL = `CREATE UNIQUE INDEX "${PARTIAL_INDEX}" ON "key_pairs"("partner_id") WHERE "status" = 'active'`;
const REVISION_SEED_SQL = `INSERT INTO "revision" ("id", "value") VALUES (1, 0)`;

// Hand-written in the audit-chain and unit-of-work-guards migrations: where the chain starts (both), and on
// PostgreSQL the triggers that vouch for the principal, keep the trail append-only and hold every role but
// the owner to what a unit of work writes. Each appears exactly once.
const AUDIT_TAIL: Record<'sqlite' | 'postgresql', RegExp[]> = {
  sqlite: [/^INSERT INTO "audit_chain" \("id", "started_at", "legacy_through"\) SELECT 1, /],
  postgresql: [
    /^INSERT INTO "audit_chain" \("id", "started_at", "legacy_through"\) SELECT 1, /,
    /^CREATE FUNCTION "audit_events_vouch"\(\) RETURNS trigger LANGUAGE plpgsql AS E'BEGIN NEW\.principal := session_user\\073 /,
    /^CREATE TRIGGER "audit_events_vouch" BEFORE INSERT ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_vouch"\(\)$/,
    /^CREATE FUNCTION "audit_events_append_only"\(\) RETURNS trigger LANGUAGE plpgsql AS E'BEGIN IF pg_has_role\(current_user, /,
    /^CREATE TRIGGER "audit_events_append_only" BEFORE UPDATE OR DELETE ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_append_only"\(\)$/,
    /^CREATE TRIGGER "audit_events_no_truncate" BEFORE TRUNCATE ON "audit_events" FOR EACH STATEMENT EXECUTE FUNCTION "audit_events_append_only"\(\)$/,
    // The unit-of-work guards: the revision, the audit events and the outbox written only as a unit writes them.
    /^CREATE FUNCTION "partnerctl_in_this_transaction"\(xid\) RETURNS boolean LANGUAGE sql AS 'SELECT \$1::text = /,
    ...['revision_moves_by_one', 'revision_with_audit', 'audit_events_appended', 'webhook_events_vouched', 'webhook_deliveries_vouched'].map(
      (name) => new RegExp(`^CREATE FUNCTION "${name}"\\(\\) RETURNS trigger LANGUAGE plpgsql AS E'(BEGIN|DECLARE) `),
    ),
    /^CREATE TRIGGER "revision_moves_by_one" BEFORE UPDATE ON "revision" FOR EACH ROW EXECUTE FUNCTION "revision_moves_by_one"\(\)$/,
    /^CREATE CONSTRAINT TRIGGER "revision_with_audit" AFTER UPDATE ON "revision" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "revision_with_audit"\(\)$/,
    /^CREATE TRIGGER "audit_events_appended" BEFORE INSERT ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_appended"\(\)$/,
    /^CREATE TRIGGER "webhook_events_vouched" BEFORE INSERT ON "webhook_events" FOR EACH ROW EXECUTE FUNCTION "webhook_events_vouched"\(\)$/,
    /^CREATE TRIGGER "webhook_deliveries_vouched" BEFORE INSERT ON "webhook_deliveries" FOR EACH ROW EXECUTE FUNCTION "webhook_deliveries_vouched"\(\)$/,
  ],
};

function configOf(backend: TestBackend): DatabaseConfig {
  return resolveDatabase(backend.url, {});
}

describe('SQLite: the committed history produces exactly schema.prisma plus the partial index', () => {
  let backend: TestBackend;
  let config: DatabaseConfig;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    config = configOf(backend);
    expect(await applyMigrations(config)).toEqual(committedNames('sqlite'));
  });
  afterAll(async () => backend?.dispose());

  it('shows no difference between the migrated database and the datamodel', async () => {
    const { engine, close } = await openEngine(config);
    try {
      const result = await diffLiveToDatamodel(engine, 'sqlite');
      // Prisma's SQLite introspection leaves partial indexes out of the picture (the schema language cannot
      // hold them without a preview feature), so the hand-added index is not a difference to the engine...
      expect(statements(result.stdout ?? '')).toEqual([]);
      expect(result.exitCode).toBe(0);
    } finally {
      await close();
    }
  });

  it('holds the datamodel indexes, the partial index and nothing else', async () => {
    const { engine, close } = await openEngine({ ...config, url: join(backend.dir, 'scratch-for-diff.db') });
    let expected: string[];
    try {
      expected = statements(await sqlFromEmpty(engine, 'sqlite'))
        .map((statement) => /^CREATE (?:UNIQUE )?INDEX "([^"]+)"/.exec(statement)?.[1])
        .filter((name): name is string => name !== undefined);
    } finally {
      await close();
    }
    // ...so the test checks it, and that it is the only thing beyond the datamodel, itself.
    const file = new BetterSqlite3(config.url, { readonly: true });
    try {
      const indexes = file
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%'")
        .all() as { name: string; sql: string }[];
      expect(indexes.map((index) => index.name).sort()).toEqual([...expected, PARTIAL_INDEX].sort());
      expect(statements(indexes.find((index) => index.name === PARTIAL_INDEX)!.sql)).toEqual([PARTIAL_INDEX_SQL]);
      expect(file.prepare('SELECT id, value FROM revision').all()).toEqual([{ id: 1, value: 0 }]);
    } finally {
      file.close();
    }
  });

  it('does report a difference when there is one (the comparison is not vacuous)', async () => {
    const file = new BetterSqlite3(config.url);
    file.exec('DROP INDEX "partners_status_id_idx"; CREATE TABLE "stray" ("id" INTEGER PRIMARY KEY)');
    file.close();
    const { engine, close } = await openEngine(config);
    try {
      const result = await diffLiveToDatamodel(engine, 'sqlite');
      expect(result.exitCode).toBe(2);
      expect(result.stdout).toContain('"partners_status_id_idx"');
      expect(result.stdout).toContain('"stray"');
    } finally {
      await close();
    }
  });
});

interface CatalogSnapshot {
  columns: string[];
  indexes: string[];
  constraints: string[];
}

async function catalogOf(url: string): Promise<CatalogSnapshot> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const columns = await client.query<{ line: string }>(`
      SELECT concat_ws(' | ', table_name, column_name, data_type, is_nullable, column_default,
                       character_maximum_length, numeric_precision, datetime_precision) AS line
      FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name <> '_prisma_migrations'`);
    const indexes = await client.query<{ line: string }>(`
      SELECT indexdef AS line FROM pg_indexes
      WHERE schemaname = 'public' AND tablename <> '_prisma_migrations'`);
    // A constraint trigger is hand-written (the tail checked below), not the datamodel's.
    const constraints = await client.query<{ line: string }>(`
      SELECT concat_ws(' | ', rel.relname, con.conname, pg_get_constraintdef(con.oid)) AS line
      FROM pg_constraint con JOIN pg_class rel ON rel.oid = con.conrelid
      WHERE con.connamespace = 'public'::regnamespace AND rel.relname <> '_prisma_migrations'
        AND con.contype <> 't'`);
    const lines = (result: { rows: { line: string }[] }) => result.rows.map((row) => row.line).sort();
    return { columns: lines(columns), indexes: lines(indexes), constraints: lines(constraints) };
  } finally {
    await client.end();
  }
}


describe.skipIf(!backendAvailable('postgresql'))('PostgreSQL: the committed history produces exactly schema.prisma plus the partial index', () => {
  let migrated: TestBackend;
  let fromDatamodel: TestBackend;

  beforeAll(async () => {
    [migrated, fromDatamodel] = await Promise.all([createBackend('postgresql'), createBackend('postgresql')]);
  });
  afterAll(async () => {
    await migrated?.dispose();
    await fromDatamodel?.dispose();
  });

  // Introspecting PostgreSQL through the adapter fails ("Column type 'char' could not be deserialized"), so
  // the history is compared with the datamodel by their effect: one database built by the history, one by
  // the engine's own SQL for schema.prisma, and their catalogs side by side.
  it('builds the same catalog as the datamodel, plus the partial index', async () => {
    expect(await applyMigrations(configOf(migrated))).toEqual(committedNames('postgresql'));
    const { engine, close } = await openEngine(configOf(fromDatamodel));
    try {
      await adminQuery(fromDatamodel.url, await sqlFromEmpty(engine, 'postgresql'));
    } finally {
      await close();
    }
    const [history, datamodel] = await Promise.all([catalogOf(migrated.url), catalogOf(fromDatamodel.url)]);
    expect(history.columns).toEqual(datamodel.columns);
    expect(history.constraints).toEqual(datamodel.constraints);
    const extra = history.indexes.filter((index) => !datamodel.indexes.includes(index));
    expect(datamodel.indexes.filter((index) => !history.indexes.includes(index))).toEqual([]);
    expect(extra).toEqual([
      `CREATE UNIQUE INDEX ${PARTIAL_INDEX} ON public.key_pairs USING btree (partner_id) WHERE (status = 'active'::text)`,
    ]);
  });
});

describe.each(BACKENDS)('%s: the committed history is the engine SQL for schema.prisma plus a hand-written tail', (provider) => {
  it.skipIf(!backendAvailable(provider))('matches statement for statement (later migrations add their own statements)', async () => {
    const backend = await createBackend(provider);
    const { engine, close } = await openEngine(configOf(backend));
    try {
      const generated = statements(await sqlFromEmpty(engine, provider));
      expect(generated.length).toBeGreaterThan(5);
      // The init migration is the engine's SQL in its order; later ones append, so compare as sorted lists.
      expect(statements(initMigrationSql(provider).sql)).toEqual(
        expect.arrayContaining([PARTIAL_INDEX_SQL, REVISION_SEED_SQL]),
      );
      const history = foldTableChanges(statements(historySql(provider)));
      for (const pattern of AUDIT_TAIL[provider]) expect(history.filter((statement) => pattern.test(statement))).toHaveLength(1);
      const tail = (statement: string) => AUDIT_TAIL[provider].some((pattern) => pattern.test(statement));
      expect(history.filter((statement) => !tail(statement)).sort()).toEqual([...generated, PARTIAL_INDEX_SQL, REVISION_SEED_SQL].sort());
    } finally {
      await close();
      await backend.dispose();
    }
  });
});

describe.each(BACKENDS)('%s: applying the history and reporting its state', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    let backend: TestBackend;
    let config: DatabaseConfig;
    let db: Database;

    beforeAll(async () => {
      backend = await createBackend(provider);
      config = configOf(backend);
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    it('reports every committed migration as pending on an empty database', async () => {
      const empty = await openDatabase(config);
      try {
        expect(await migrationStatus(empty)).toEqual({ applied: [], pending: committedNames(provider), unknown: [], failed: [] });
      } finally {
        await empty.close();
      }
    });

    it('applies the history once; a second run applies nothing', async () => {
      expect(await applyMigrations(config)).toEqual(committedNames(provider));
      expect(await applyMigrations(config)).toEqual([]);
      db = await openDatabase(config);
      expect(await migrationStatus(db)).toEqual({ applied: committedNames(provider), pending: [], unknown: [], failed: [] });
      const rows = await db.sql.query<{ migration_name: string }>('SELECT migration_name FROM _prisma_migrations ORDER BY migration_name');
      expect(rows.map((row) => row.migration_name)).toEqual(committedNames(provider));
      expect((await db.sql.query<{ id: unknown; value: unknown }>('SELECT id, value FROM revision')).map((row) => [Number(row.id), Number(row.value)])).toEqual([[1, 0]]);
    });

    it('runs concurrent first migrations one after the other', async () => {
      const other = await createBackend(provider);
      try {
        const results = await Promise.all([applyMigrations(configOf(other)), applyMigrations(configOf(other))]);
        expect(results.flat().sort()).toEqual(committedNames(provider));
      } finally {
        await other.dispose();
      }
    });

    it('reports a migration unknown to this version, and a failed one', async () => {
      const now = provider === 'sqlite' ? 'CURRENT_TIMESTAMP' : 'now()';
      await db.sql.query(
        `INSERT INTO _prisma_migrations (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
         VALUES ('test-newer', '0', '29991231000000_from_the_future', ${now}, ${now}, 1)`,
      );
      expect(await migrationStatus(db)).toMatchObject({ pending: [], unknown: ['29991231000000_from_the_future'], failed: [] });
      expect(await needsSelfMigration(db)).toBe(false);

      await db.sql.query(
        `INSERT INTO _prisma_migrations (id, checksum, migration_name, started_at, applied_steps_count)
         VALUES ('test-failed', '0', '29991231000001_half_done', ${now}, 0)`,
      );
      expect((await migrationStatus(db)).failed).toEqual(['29991231000001_half_done']);
      await expectAppError(needsSelfMigration(db), 'schema_out_of_date');
      await db.sql.query("DELETE FROM _prisma_migrations WHERE id IN ('test-newer', 'test-failed')");
    });
  });
});

describe('connect()', () => {
  it('migrates a fresh SQLite file on first use', async () => {
    const backend = await createBackend('sqlite');
    try {
      const db = await connect(configOf(backend));
      try {
        expect(await migrationStatus(db)).toMatchObject({ applied: committedNames('sqlite'), pending: [] });
        expect(await count(db, 'SELECT COUNT(*) AS n FROM partners')).toBe(0);
        const [mode] = await db.sql.query<{ journal_mode: string }>('PRAGMA journal_mode');
        expect(mode?.journal_mode).toBe('wal');
      } finally {
        await db.close();
      }
      // A second connect finds nothing to do and leaves the history as it is.
      const again = await connect(configOf(backend));
      await again.close();
    } finally {
      await backend.dispose();
    }
  });

  it('migrates a fresh SQLite file in a folder that does not exist yet', async () => {
    const backend = await createBackend('sqlite');
    try {
      const db = await connect(resolveDatabase(join(backend.dir, 'a', 'b', 'partnerctl.db'), {}));
      await db.close();
    } finally {
      rmSync(backend.dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!backendAvailable('postgresql'))(
    'refuses a PostgreSQL database with pending migrations, and opens it once migrated',
    async () => {
      const backend = await createBackend('postgresql');
      try {
        const error = await expectAppError(connect(configOf(backend)), 'schema_out_of_date');
        expect(error.next).toBe('migrate');
        // Nothing was applied behind the operator's back.
        const db = await openDatabase(configOf(backend));
        expect((await migrationStatus(db)).applied).toEqual([]);
        await db.close();

        await applyMigrations(configOf(backend));
        const migrated = await connect(configOf(backend));
        expect(await count(migrated, 'SELECT COUNT(*) AS n FROM partners')).toBe(0);
        await migrated.close();
      } finally {
        await backend.dispose();
      }
    },
  );

  it('says database_unavailable when the PostgreSQL server is not there', async () => {
    const error = await expectAppError(
      connect(resolveDatabase('postgresql://nobody:secret-password@127.0.0.1:9/partnerctl', {})),
      'database_unavailable',
    );
    expect(error).toBeInstanceOf(AppError);
    expect(error.message).not.toContain('secret-password');
  });
});

describe.each(BACKENDS)('%s: the database itself allows at most one active key pair per partner', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    let backend: TestBackend;
    let db: Database;

    beforeAll(async () => {
      backend = await createBackend(provider);
      await applyMigrations(configOf(backend));
      db = await openDatabase(configOf(backend));
      for (const partner of ['ptn_one', 'ptn_two']) {
        await db.sql.query(
          `INSERT INTO partners (id, name, updated_at) VALUES ('${partner}', '${partner}-name', CURRENT_TIMESTAMP)`,
        );
      }
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    const insertPair = (id: string, partner: string, status: string) =>
      db.sql.query(
        `INSERT INTO key_pairs (id, partner_id, access_key, secret_hash, status) VALUES ('${id}', '${partner}', 'ak-${id}', 'hash', '${status}')`,
      );

    it('rejects a second active pair for the same partner, written with raw SQL', async () => {
      await insertPair('kp1', 'ptn_one', 'active');
      await expect(insertPair('kp2', 'ptn_one', 'active')).rejects.toThrow(/unique|constraint/i);
      expect(await count(db, "SELECT COUNT(*) AS n FROM key_pairs WHERE partner_id = 'ptn_one'")).toBe(1);
    });

    it('allows any number of superseded and revoked pairs beside the active one', async () => {
      await insertPair('kp3', 'ptn_one', 'superseded');
      await insertPair('kp4', 'ptn_one', 'superseded');
      await insertPair('kp5', 'ptn_one', 'revoked');
      expect(await count(db, "SELECT COUNT(*) AS n FROM key_pairs WHERE partner_id = 'ptn_one'")).toBe(4);
    });

    it('rejects turning a superseded pair active again while another is active', async () => {
      await expect(db.sql.query("UPDATE key_pairs SET status = 'active' WHERE id = 'kp3'")).rejects.toThrow(
        /unique|constraint/i,
      );
    });

    it('lets each partner have its own active pair', async () => {
      await insertPair('kp6', 'ptn_two', 'active');
      expect(await count(db, "SELECT COUNT(*) AS n FROM key_pairs WHERE status = 'active'")).toBe(2);
    });
  });
});
