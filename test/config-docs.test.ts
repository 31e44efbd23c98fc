import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configReference } from '../src/config/reference.js';
import { FIXED, VARIABLES } from '../src/config/table.js';

describe('docs/configuration.md', () => {
  const written = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');

  it('holds the tables the declarations give today (regenerated in memory and compared)', () => {
    expect(configReference(written) === written, "docs/configuration.md is stale: run 'npm run docs:config' and commit it").toBe(true);
  });

  it('documents every declared variable with its flag and default, and every fixed value', () => {
    for (const name of Object.keys(VARIABLES)) expect(written).toContain(`| \`${name}\``);
    for (const key of Object.keys(FIXED)) expect(written).toContain(`| \`${key}\` |`);
    expect(written).toContain('| `PORT` (`--port`) | serve | `8080` |');
    expect(written).toContain('| `PUBLIC_API_STALE_BUDGET` | serve | `120s` |');
    expect(written).toContain('| `stalenessBoundMs` | serve | 1 s |');
  });

  it('refuses a document without the markers instead of writing tables nowhere', () => {
    expect(() => configReference('# Configuration\n')).toThrow(/no <!-- config:variables/);
  });
});
