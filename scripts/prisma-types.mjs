// The row types' source: the Prisma client generated from prisma/sqlite/schema.prisma (the PostgreSQL schema
// holds the same models: test/db/schema-parity.test.ts), offline, then compiled to declarations only in
// src/db/generated/types/. The repositories import them as types; nothing loads the client at run time, and
// no generated JavaScript reaches dist/. Run by `npm run build` (prebuild).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const client = join(root, 'src/db/generated/sqlite');
const types = join(root, 'src/db/generated/types');

function run(script, args, env = process.env) {
  const result = spawnSync(process.execPath, [script, ...args], { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] });
  if (result.status !== 0) {
    process.stderr.write(`prisma-types: ${args.join(' ')} failed (exit ${result.status ?? result.signal})\n`);
    process.exit(1);
  }
}

// Generated once per schema: the types are kept with a stamp of what made them (the schema, this script and
// the prisma and typescript versions), and a build with the same stamp skips both steps (`npm test` builds
// again right after `npm ci` built: 1.6 s of its run).
const stampFile = join(types, '.made-from');
const stamp = createHash('sha256')
  .update(readFileSync(join(root, 'prisma/sqlite/schema.prisma')))
  .update(readFileSync(fileURLToPath(import.meta.url)))
  .update(require('prisma/package.json').version)
  .update(require('typescript/package.json').version)
  .digest('hex');
if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) process.exit(0);

rmSync(client, { recursive: true, force: true });
rmSync(types, { recursive: true, force: true });
// `prisma generate` insists on a schema-engine binary being present (it would download one), but does not
// run it to generate: any existing executable will do, so nothing is downloaded.
run(require.resolve('prisma/build/index.js'), ['generate', '--schema', 'prisma/sqlite/schema.prisma', '--no-hints'], {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
  CHECKPOINT_DISABLE: '1',
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
});
run(join(dirname(require.resolve('typescript/package.json')), 'bin/tsc'), [
  '--ignoreConfig',
  '--declaration',
  '--emitDeclarationOnly',
  '--skipLibCheck',
  '--module', 'nodenext',
  '--moduleResolution', 'nodenext',
  '--target', 'es2022',
  '--types', 'node',
  '--outDir', types,
  join(client, 'models.ts'),
]);
// Only the declarations stay: no source of the client is left to import.
rmSync(client, { recursive: true, force: true });
writeFileSync(stampFile, stamp);
