// Writes docs/cli.md, the command reference, from the command definitions of the built CLI (dist/).
// Run through `npm run docs:cli` (which builds first); test/cli/reference.test.ts fails when the file is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cliReference } from '../dist/cli/reference.js';

const target = fileURLToPath(new URL('../docs/cli.md', import.meta.url));
writeFileSync(target, cliReference());
console.log(`wrote ${target}`);
