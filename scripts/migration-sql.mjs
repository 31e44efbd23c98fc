// Prints the SQL that takes an empty database to prisma/<provider>/schema.prisma (for a new migration, diff
// against the committed history by hand). Usage: node scripts/migration-sql.mjs sqlite|postgresql [url]
import { readFileSync } from 'node:fs';
import { openSchemaEngine, NO_FILTERS } from '../dist/db/schema-engine.js';
import { createAdapterFactory, schemaPath } from '../dist/db/migrate.js';

const provider = process.argv[2];
const url = process.argv[3] ?? (provider === 'sqlite' ? '/tmp/partnerctl-migration-sql.db' : 'postgresql://postgres@127.0.0.1:5432/postgres');
const path = schemaPath(provider);
const content = readFileSync(path, 'utf8');
const engine = await openSchemaEngine(path, content, await createAdapterFactory({ provider, url, poolSize: 1 }));
const result = await engine.diff({
  from: { tag: 'empty' },
  to: { tag: 'schemaDatamodel', files: [{ path, content }] },
  script: true,
  exitCode: null,
  filters: NO_FILTERS,
});
process.stdout.write(result.stdout ?? '');
