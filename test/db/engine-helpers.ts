import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory, SqlQuery } from '@prisma/driver-adapter-utils';
import type { DatabaseConfig, Provider } from '../../src/config.js';
import { committedMigrations, schemaPath, trackedAdapterFactory } from '../../src/db/migrate.js';
import { NO_FILTERS, openSchemaEngine, type SchemaEngine } from '../../src/db/schema-engine.js';

export const PARTIAL_INDEX = 'key_pairs_one_active_per_partner';

export function schemaFile(provider: Provider): { path: string; content: string } {
  const path = schemaPath(provider);
  return { path, content: readFileSync(path, 'utf8') };
}

/**
 * The schema engine introspects a partial index with `... WHERE name = "<index>"`, a double-quoted string
 * that better-sqlite3 (built with SQLITE_DQS=0) reads as a column name and rejects. The test rewrites that
 * one lookup to a single-quoted literal; nothing else of the engine's traffic is touched.
 */
function quoteIndexLookup(adapter: SqlDriverAdapter): SqlDriverAdapter {
  const lookup = /(sqlite_master WHERE type = 'index' AND name = )"((?:[^"]|"")*)"/;
  return new Proxy(adapter, {
    get(target, property) {
      if (property === 'queryRaw') {
        return (query: SqlQuery) =>
          target.queryRaw({
            ...query,
            sql: query.sql.replace(lookup, (_, head: string, name: string) => `${head}'${name.replace(/""/g, '"').replace(/'/g, "''")}'`),
          });
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export interface OpenEngine {
  engine: SchemaEngine;
  close(): Promise<void>;
}

/** A schema engine on the given database, with every connection it opens closed afterwards. */
export async function openEngine(config: DatabaseConfig): Promise<OpenEngine> {
  const adapters = await trackedAdapterFactory(config);
  const factory: SqlMigrationAwareDriverAdapterFactory =
    config.provider === 'sqlite'
      ? {
          provider: adapters.factory.provider,
          adapterName: adapters.factory.adapterName,
          connect: async () => quoteIndexLookup(await adapters.factory.connect()),
          connectToShadowDb: async () => quoteIndexLookup(await adapters.factory.connectToShadowDb()),
        }
      : adapters.factory;
  const { path, content } = schemaFile(config.provider);
  const engine = await openSchemaEngine(path, content, factory);
  return {
    engine,
    close: async () => {
      engine.free();
      await adapters.disposeAll();
    },
  };
}

/** The SQL that takes an empty database to the datamodel in schema.prisma. */
export async function sqlFromEmpty(engine: SchemaEngine, provider: Provider): Promise<string> {
  const file = schemaFile(provider);
  const result = await engine.diff({
    from: { tag: 'empty' },
    to: { tag: 'schemaDatamodel', files: [file] },
    script: true,
    exitCode: null,
    filters: NO_FILTERS,
  });
  return result.stdout ?? '';
}

/** Compares the live database with schema.prisma: exitCode 0 = same, 2 = different (the script says how). */
export async function diffLiveToDatamodel(engine: SchemaEngine, provider: Provider) {
  const file = schemaFile(provider);
  return engine.diff({
    from: { tag: 'schemaDatasource', files: [file], configDir: dirname(file.path) },
    to: { tag: 'schemaDatamodel', files: [file] },
    script: true,
    exitCode: true,
    filters: NO_FILTERS,
  });
}

/** SQL as a list of statements: comments dropped, white space collapsed. */
export function statements(sql: string): string[] {
  return sql
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n')
    .split(';')
    .map((statement) => statement.replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').trim())
    .filter((statement) => statement !== '');
}

export function initMigrationSql(provider: Provider): { name: string; sql: string } {
  const first = committedMigrations(provider).migrationDirectories[0];
  if (!first) throw new Error(`no committed migrations for ${provider}`);
  return { name: first.path, sql: first.migrationFile.content.value };
}

/** Every committed migration's SQL, oldest first. */
export function historySql(provider: Provider): string {
  return committedMigrations(provider).migrationDirectories.map((directory) => directory.migrationFile.content.value).join('\n;\n');
}

export function committedNames(provider: Provider): string[] {
  return committedMigrations(provider).migrationDirectories.map((directory) => directory.path);
}

/**
 * A history's statements with each change of a table folded into the `CREATE TABLE "t"` it changes, which is
 * what the engine writes for the same table from scratch: `ADD COLUMN …` (columns appended after the
 * existing ones, before the table's constraints), PostgreSQL's `ALTER COLUMN "c" SET DATA TYPE …` and
 * `… DROP NOT NULL`, and SQLite's redefinition (`CREATE TABLE "new_t"`, copy, drop, rename, between PRAGMAs)
 * replacing the table, with its indexes created again as they were (kept once).
 */
export function foldTableChanges(list: string[]): string[] {
  const result: string[] = [];
  const createOf = (table: string) => result.findIndex((candidate) => candidate.startsWith(`CREATE TABLE "${table}" (`));
  for (const statement of list) {
    const added = /^ALTER TABLE "([^"]+)" (ADD COLUMN .*)$/.exec(statement);
    const retyped = /^ALTER TABLE "([^"]+)" ALTER COLUMN "([^"]+)" SET DATA TYPE (.*)$/.exec(statement);
    const redefined = /^CREATE TABLE "new_([^"]+)" \((.*)$/.exec(statement);
    const nullable = /^ALTER TABLE "([^"]+)" ALTER COLUMN "([^"]+)" DROP NOT NULL$/.exec(statement);
    // PostgreSQL: a column added to the primary key (the constraint dropped, the column added, the key re-made).
    const rekeyed = /^ALTER TABLE "([^"]+)" DROP CONSTRAINT "([^"]+)", ADD COLUMN (.*), ADD CONSTRAINT "\2" (PRIMARY KEY \(.*\))$/.exec(statement);
    if (rekeyed && createOf(rekeyed[1]!) >= 0) {
      const index = createOf(rekeyed[1]!);
      const create = result[index]!;
      const constraint = create.indexOf(`, CONSTRAINT "${rekeyed[2]}" `);
      result[index] = `${create.slice(0, constraint)}, ${rekeyed[3]}, CONSTRAINT "${rekeyed[2]}" ${rekeyed[4]})`;
    } else if (added && createOf(added[1]!) >= 0) {
      const index = createOf(added[1]!);
      const columns = added[2]!.split(/, ADD COLUMN /).map((part) => part.replace(/^ADD COLUMN /, ''));
      const create = result[index]!;
      const constraint = create.indexOf(', CONSTRAINT ');
      const cut = constraint >= 0 ? constraint : create.lastIndexOf(')');
      result[index] = `${create.slice(0, cut)}, ${columns.join(', ')}${create.slice(cut)}`;
    } else if (retyped && createOf(retyped[1]!) >= 0) {
      const index = createOf(retyped[1]!);
      result[index] = result[index]!.replace(new RegExp(`"${retyped[2]}" [A-Z0-9()]+`), `"${retyped[2]}" ${retyped[3]}`);
    } else if (nullable && createOf(nullable[1]!) >= 0) {
      const index = createOf(nullable[1]!);
      result[index] = result[index]!.replace(new RegExp(`("${nullable[2]}" [A-Z0-9()]+) NOT NULL`), '$1');
    } else if (/^CREATE (UNIQUE )?INDEX /.test(statement) && result.includes(statement)) {
      // An index created again after its table's redefinition.
    } else if (redefined && createOf(redefined[1]!) >= 0) {
      result[createOf(redefined[1]!)] = `CREATE TABLE "${redefined[1]}" (${redefined[2]}`;
    } else if (!/^(PRAGMA |INSERT INTO "new_|DROP TABLE "|ALTER TABLE "new_[^"]+" RENAME TO )/.test(statement)) {
      result.push(statement);
    }
  }
  return result;
}
