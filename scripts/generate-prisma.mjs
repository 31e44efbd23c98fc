// Generates both Prisma clients (SQLite and PostgreSQL) offline. `prisma generate` insists that a native
// schema-engine binary exists but never runs it for generation, so any executable file satisfies it.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const prismaCli = createRequire(import.meta.url).resolve('prisma/build/index.js');
for (const provider of ['sqlite', 'postgresql']) {
  const result = spawnSync(process.execPath, [prismaCli, 'generate', '--schema', `prisma/${provider}/schema.prisma`], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
      CHECKPOINT_DISABLE: '1',
    },
  });
  if (result.status !== 0) {
    console.error(`prisma generate failed for ${provider}`);
    process.exit(result.status ?? 1);
  }
}
