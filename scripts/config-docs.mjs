// Writes docs/configuration.md's tables of variables and fixed tuning values from the declarations of the
// built configuration (dist/config/table.js). Run through `npm run docs:config` (which builds first);
// test/config-docs.test.ts fails when the file is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configReference } from '../dist/config/reference.js';

const target = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
writeFileSync(target, configReference(readFileSync(target, 'utf8')));
console.log(`wrote ${target}`);
