// Bundles the built CLI (dist/cli/main.js, from tsc) into dist/bundle/, which bin/partnerctl runs: a few
// files instead of ~600 modules read, resolved and compiled one by one at every start (most of a start's
// CPU before: BENCHMARKS.md). Run by `npm run build` after tsc. The lazy imports stay lazy (chunks of their
// own). Left outside, loaded from node_modules as before: the native addons (better-sqlite3, argon2, and
// pg's optional pg-native) and Prisma's packages (the schema engine's WebAssembly is found by its path).
import { rmSync } from 'node:fs';
import { rolldown } from 'rolldown';

const OUT = 'dist/bundle';
rmSync(OUT, { recursive: true, force: true });
const bundle = await rolldown({
  input: { partnerctl: 'dist/cli/main.js' },
  platform: 'node',
  external: [/^node:/, 'better-sqlite3', 'argon2', 'pg-native', /^@prisma\//],
  // A module both imported lazily and eagerly stays in the eager chunk: expected, not worth a line at each build.
  checks: { ineffectiveDynamicImport: false },
  logLevel: 'warn',
});
await bundle.write({ dir: OUT, format: 'esm', entryFileNames: '[name].js', chunkFileNames: '[name]-[hash].js' });
await bundle.close();
