import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * This package's folder (package.json, prisma/), found above this module wherever the build put it: src/ in
 * the tests, dist/ as tsc writes it, dist/bundle/ as the binary runs it.
 */
export const PACKAGE_ROOT: string = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'prisma'))) return dir;
    if (dirname(dir) === dir) return dirname(here);
  }
})();
