import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { dialectOf, postgresqlDialect, sqliteDialect } from '../../src/db/dialect.js';
import { backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';

describe('dialects', () => {
  it('name a database for people: the file path as given, the URL without its password', () => {
    expect(sqliteDialect.describe('/var/lib/partnerctl/partnerctl.db')).toBe('/var/lib/partnerctl/partnerctl.db');
    expect(postgresqlDialect.describe('postgresql://ops:s3cret@db.internal:5432/partnerctl')).toBe('postgresql://ops:***@db.internal:5432/partnerctl');
  });

  it('is the one of the configured provider', () => {
    expect(dialectOf(resolveDatabase('/tmp/x.db', {}).provider)).toBe(sqliteDialect);
    expect(dialectOf(resolveDatabase('postgresql://h/db', {}).provider)).toBe(postgresqlDialect);
  });
});

for (const provider of BACKENDS) {
  describe.skipIf(!backendAvailable(provider))(`the ${provider} dialect's SQL, run by its database`, () => {
    let backend: TestBackend | undefined;
    let db: Database;
    const at = new Date('2026-03-14T12:34:56.789Z');

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openDatabase(resolveDatabase(backend.url, {}));
      const timestamp = provider === 'postgresql' ? 'TIMESTAMP(3)' : 'DATETIME';
      await db.sql.transaction(
        async (tx) => {
          await tx.run(`CREATE TABLE stamps (at ${timestamp} NOT NULL)`);
          await tx.run('INSERT INTO stamps (at) VALUES ($1)', [at]);
          await tx.run('CREATE TABLE names (id TEXT NOT NULL)');
          await tx.run("INSERT INTO names (id) VALUES ('a'), ('b'), ('c')");
        },
        { timeoutMs: 10_000 },
      );
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    it('is the handle dialect', () => {
      expect(db.dialect).toBe(dialectOf(provider));
    });

    it('picks the lesser and the greater of values', async () => {
      const { least, greatest } = db.dialect;
      const [row] = await db.sql.query<{ lo: unknown; hi: unknown }>(`SELECT ${least}(3, 1, 2) AS lo, ${greatest}(3, 1, 2) AS hi`);
      expect([Number(row?.lo), Number(row?.hi)]).toEqual([1, 3]);
    });

    it('reads a timestamp back as the text the audit chain hashes, and truncates it to its day', async () => {
      const [row] = await db.sql.query<{ at: string; day: string }>(
        `SELECT ${db.dialect.atTextSql()} AS at, ${db.dialect.atTextSql(db.dialect.startOfDaySql('at'))} AS day FROM stamps`,
      );
      expect(row?.at).toBe(db.dialect.atText(at));
      expect(row?.day.startsWith(`${db.dialect.atText(at).slice(0, 10)}T00:00:00.000`)).toBe(true);
    });

    it('passes many texts as one parameter, as rows or as a set to test against', async () => {
      const texts = ['c', "it's", 'a', 'über'];
      const rows = await db.sql.query<{ value: string }>(`SELECT value FROM ${db.dialect.textListRowsSql('$1')}`, [db.dialect.textList(texts)]);
      expect(rows.map((row) => row.value).sort()).toEqual([...texts].sort());
      const found = await db.sql.query<{ id: string }>(`SELECT id FROM names WHERE ${db.dialect.inTextListSql('id', '$1')} ORDER BY id`, [db.dialect.textList(texts)]);
      expect(found.map((row) => row.id)).toEqual(['a', 'c']);
    });

    it('counts the tables of a name', async () => {
      const count = async (name: string) => Number((await db.sql.query<{ n: unknown }>(db.dialect.tableCountSql, [name]))[0]?.n);
      expect([await count('names'), await count('no_such_table')]).toEqual([1, 0]);
    });
  });
}
