import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cliReference } from '../../src/cli/reference.js';

describe('docs/cli.md', () => {
  it('is the command reference the definitions give today (regenerated in memory and compared)', () => {
    const written = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
    const fresh = cliReference();
    expect(written === fresh, "docs/cli.md is stale: run 'npm run docs:cli' and commit docs/cli.md").toBe(true);
  });

  it('documents every command: usage, description, arguments, options, notes and examples', () => {
    const reference = cliReference();
    expect(reference).toContain('## partnerctl rotate-keys\n');
    expect(reference).toContain('partnerctl rotate-keys [options] [partner]');
    expect(reference).toContain('| `--limit <n>` | page size, 1-1000 | `50` |');
    expect(reference).toContain('| `--by <company\\|hour\\|day>` |');
    expect(reference).toContain('| `[partner]` | partner id, unique name, access key or key-pair id');
    expect(reference).toContain('## partnerctl db migrate\n');
    expect(reference).toContain('partnerctl set-limits acme --rate 50/s --burst 100 --daily-quota 1000000');
    expect(reference).toContain('PARTNERCTL_SIGNING_KEY_FILE');
    expect(reference).not.toContain('__complete-partners');
  });
});
