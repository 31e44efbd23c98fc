import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { applyMigrations, migrationStatus } from '../../src/db/migrate.js';
import { nameKey } from '../../src/text.js';
import { backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

const NAME_KEY_MIGRATION = '20261124090000_partner_name_key';

/** Takes a migrated database back to before the name-key migration, as an older partnerctl left it. */
async function beforeNameKeys(db: Database): Promise<void> {
  await db.sql.transaction(
    async (tx) => {
      await tx.run('DROP INDEX "partners_name_key_key"');
      await tx.run('ALTER TABLE partners DROP COLUMN name_key');
      await tx.run('DELETE FROM _prisma_migrations WHERE migration_name = $1', [NAME_KEY_MIGRATION]);
    },
    { timeoutMs: 10_000 },
  );
}

async function insertOldPartner(db: Database, id: string, name: string): Promise<void> {
  const now = new Date();
  await db.sql.transaction((tx) => tx.run('INSERT INTO partners (id, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)', [id, name, 'active', now, now]), {
    timeoutMs: 10_000,
  });
}

describe('name keys', () => {
  it('fold case and Unicode form, nothing else', () => {
    expect(nameKey('Initech')).toBe(nameKey('initech'));
    expect(nameKey('INITECH')).toBe('initech');
    expect(nameKey('Cafe\u0301')).toBe(nameKey('CAFÉ'));
    expect(nameKey('Straße')).toBe(nameKey('STRASSE'));
    expect(nameKey('Initech Ltd')).not.toBe(nameKey('Initech  Ltd'));
    expect(nameKey('Initech')).not.toBe(nameKey('Initech2'));
  });
});

describe.each(BACKENDS)('partner names on %s', (provider) => {
  let backend: TestBackend;
  const cli = (...args: string[]) => runCli(args, backend.env);

  beforeAll(async () => {
    if (!backendAvailable(provider)) return;
    backend = await createBackend(provider, { migrated: true });
  });
  afterAll(async () => backend?.dispose());

  it.skipIf(!backendAvailable(provider))('are unique ignoring case and Unicode form: create-partner refuses with exit 4 naming the partner', async () => {
    const id = (await cli('create-partner', '--name', 'Initech', '--json')).json().partner_id as string;
    expect(id).toMatch(/^ptn_/);
    for (const name of ['initech', 'INITECH']) {
      const refused = await cli('create-partner', '--name', name);
      expect(refused.code).toBe(4);
      expect(refused.stderr).toContain('partner_exists');
      expect(refused.stderr).toContain(`'Initech' already exists (${id})`);
    }
    // --if-not-exists returns a partner only for its exact name, never one named otherwise.
    expect((await cli('create-partner', '--name', 'initech', '--if-not-exists')).code).toBe(4);
    expect((await cli('create-partner', '--name', 'Initech', '--if-not-exists')).code).toBe(0);
    const composed = await cli('create-partner', '--name', 'Café', '--json');
    expect(composed.code).toBe(0);
    const decomposed = await cli('create-partner', '--name', 'CAFE\u0301');
    expect(decomposed.code).toBe(4);
    expect(decomposed.stderr).toContain("'Café' already exists");
  });

  it.skipIf(!backendAvailable(provider))('a name that matches one partner ignoring case resolves to it; the exact name is not needed', async () => {
    const shown = await cli('show-partner', 'iNiTeCh', '--json');
    expect(shown.code).toBe(0);
    expect(JSON.stringify(shown.json())).toContain('"name":"Initech"');
    expect((await cli('disable-partner', 'INITECH', '--yes')).code).toBe(0);
    expect(JSON.stringify((await cli('show-partner', 'Initech', '--json')).json())).toContain('"status":"disabled"');
    expect((await cli('enable-partner', 'initech')).code).toBe(0);
    const missing = await cli('show-partner', 'initech-2');
    expect(missing.code).toBe(3);
  });

  it.skipIf(!backendAvailable(provider))('apply refuses a name that differs only in case from an existing one (exit 4), and such twins in one document', async () => {
    const file = join(backend.dir, 'twin.yaml');
    writeFileSync(file, 'partners:\n  - name: INITECH\n    companies: [acme]\n');
    for (const args of [['--dry-run'], []]) {
      const refused = await cli('apply', '-f', file, ...args);
      expect(refused.code, refused.stderr).toBe(4);
      expect(refused.stderr).toContain("a partner named 'Initech' already exists");
    }
    writeFileSync(file, 'partners:\n  - name: Globex\n  - name: globex\n');
    const twins = await cli('apply', '-f', file);
    expect(twins.code).toBe(2);
    expect(twins.stderr).toContain("partners[1].name: 'globex' is already given at partners[0]");
    expect((await cli('show-partner', 'Globex')).code).toBe(3);
    // The exact name still applies to the partner.
    writeFileSync(file, 'partners:\n  - name: Initech\n    companies: [acme]\n');
    expect((await cli('apply', '-f', file, '--yes')).code).toBe(0);
  });

  it.skipIf(!backendAvailable(provider))('migrating a database whose names collide fails naming every group and changes nothing; once renamed, it migrates', async () => {
    const other = await createBackend(provider);
    try {
      const config = resolveDatabase(other.url, {});
      await applyMigrations(config);
      let db = await openDatabase(config);
      try {
        await beforeNameKeys(db);
        await insertOldPartner(db, 'ptn_01M8000000000000000000000A', 'Initech');
        await insertOldPartner(db, 'ptn_01M8000000000000000000000B', 'initech');
        await insertOldPartner(db, 'ptn_01M8000000000000000000000C', 'Café');
        await insertOldPartner(db, 'ptn_01M8000000000000000000000D', 'CAFE\u0301');
        await insertOldPartner(db, 'ptn_01M8000000000000000000000E', 'Globex');
      } finally {
        await db.close();
      }
      const refused = await runCli(['db', 'migrate'], other.env);
      expect(refused.code, refused.stderr).toBe(4);
      expect(refused.stderr).toContain('partner_exists');
      expect(refused.stderr).toContain('"Initech" (ptn_01M8000000000000000000000A) and "initech" (ptn_01M8000000000000000000000B)');
      expect(refused.stderr).toContain('"Café" (ptn_01M8000000000000000000000C) and "CAFE\u0301" (ptn_01M8000000000000000000000D)');
      expect(refused.stderr).toContain('2 group(s)');
      expect(refused.stderr).not.toContain('Globex');
      expect(refused.stderr).toContain('nothing was changed');
      db = await openDatabase(config);
      try {
        expect((await migrationStatus(db)).pending).toEqual([NAME_KEY_MIGRATION]);
        await db.sql.transaction(
          async (tx) => {
            await tx.run("UPDATE partners SET name = 'Initech (old)' WHERE id = 'ptn_01M8000000000000000000000B'");
            await tx.run("UPDATE partners SET name = 'Cafe 2' WHERE id = 'ptn_01M8000000000000000000000D'");
          },
          { timeoutMs: 10_000 },
        );
      } finally {
        await db.close();
      }
      const migrated = await runCli(['db', 'migrate'], other.env);
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.stdout).toContain(NAME_KEY_MIGRATION);
      db = await openDatabase(config);
      try {
        const rows = await db.sql.query<{ name: string; name_key: string }>('SELECT name, name_key FROM partners ORDER BY id');
        expect(rows.map((row) => [row.name, row.name_key])).toEqual(rows.map((row) => [row.name, nameKey(row.name)]));
        expect(rows).toHaveLength(5);
      } finally {
        await db.close();
      }
      // The old partners are found ignoring case, and keep the rule.
      expect((await runCli(['show-partner', 'GLOBEX'], other.env)).code).toBe(0);
      expect((await runCli(['create-partner', '--name', 'globex'], other.env)).code).toBe(4);
    } finally {
      await other.dispose();
    }
  });
});
