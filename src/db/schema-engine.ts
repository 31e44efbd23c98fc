import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';

// Prisma's migrate CLI downloads a native engine, which these machines cannot do; the public wasm build of
// the same schema engine (@prisma/schema-engine-wasm) runs offline through a driver adapter.

export interface MigrationDirectory {
  path: string;
  migrationFile: { path: string; content: { tag: 'ok'; value: string } };
}

export interface MigrationList {
  baseDir: string;
  lockfile: { path: string; content: string | null };
  shadowDbInitScript: string;
  migrationDirectories: MigrationDirectory[];
}

type DiffTarget =
  | { tag: 'empty' }
  | { tag: 'schemaDatamodel'; files: { path: string; content: string }[] }
  | { tag: 'schemaDatasource'; files: { path: string; content: string }[]; configDir: string };

export interface SchemaEngine {
  applyMigrations(input: { migrationsList: MigrationList; filters: SchemaFilter }): Promise<{
    appliedMigrationNames: string[];
  }>;
  diff(params: {
    from: DiffTarget;
    to: DiffTarget;
    script: boolean;
    exitCode: boolean | null;
    filters: SchemaFilter;
  }): Promise<{ exitCode: number; stdout: string | null }>;
  free(): void;
}

interface SchemaFilter {
  externalTables: string[];
  externalEnums: string[];
}

export const NO_FILTERS: SchemaFilter = { externalTables: [], externalEnums: [] };

interface WasmApi {
  Module: new (bytes: Uint8Array) => unknown;
  instantiate(module: unknown, imports: object): Promise<{ exports: { __wbindgen_start(): void } }>;
}

let glue: Promise<{ SchemaEngine: { new: (...args: unknown[]) => Promise<SchemaEngine> } }> | undefined;

async function loadGlue() {
  const gluePath = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm/schema_engine_bg');
  const module = await import(pathToFileURL(gluePath).href);
  const bytes = await readFile(gluePath.replace(/\.js$/, '.wasm'));
  // @types/node does not declare the WebAssembly global.
  const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
  const instance = await wasm.instantiate(new wasm.Module(bytes), { './schema_engine_bg.js': module });
  module.__wbg_set_wasm(instance.exports);
  instance.exports.__wbindgen_start();
  return module;
}

export async function openSchemaEngine(
  schemaPath: string,
  schemaText: string,
  adapterFactory: SqlMigrationAwareDriverAdapterFactory,
): Promise<SchemaEngine> {
  glue ??= loadGlue();
  const { SchemaEngine } = await glue;
  const { bindMigrationAwareSqlAdapterFactory } = await import('@prisma/driver-adapter-utils');
  return SchemaEngine.new(
    { datamodels: [[schemaPath, schemaText]] },
    () => {},
    bindMigrationAwareSqlAdapterFactory(adapterFactory),
  );
}
