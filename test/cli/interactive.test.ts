import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { onTerminal, runCli } from '../support/cli.js';

describe.skipIf(process.platform !== 'linux')('partnerctl on a terminal', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
  });
  afterAll(() => backend.dispose());

  it('asks for a missing --name', async () => {
    const { code, screen } = await onTerminal(['create-partner'], backend.env, [[/Partner name/, 'Typed At Terminal\r']]);
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/Created partner Typed At Terminal/);
    const listed = (await runCli(['list-partners', '--json'], backend.env)).json();
    expect(listed.partners.map((partner: { name: string }) => partner.name)).toContain('Typed At Terminal');
  });

  it('picks a missing partner from a searchable list', async () => {
    await runCli(['create-partner', '--name', 'Zebra Pricing'], backend.env);
    const { code, screen } = await onTerminal(['map-company', '--company', 'c-7'], backend.env, [
      [/Partner/, 'Zebra'],
      // It says that typing filters, and shows each partner's status.
      [/Partner \(type to filter by name\) Zebra\s*\n.*Zebra Pricing \(ptn_\w+, active\)/, '\r'],
    ]);
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/Mapped company c-7 to Zebra Pricing/);
  });

  it('asks before a destructive command, and changes nothing when told no', async () => {
    await runCli(['map-company', 'Zebra Pricing', '--company', 'c-8'], backend.env);
    const refused = await onTerminal(['unmap-company', 'Zebra Pricing', '--company', 'c-8'], backend.env, [[/Unmap company/, 'n\r']]);
    expect(refused.code, refused.screen).toBe(130);
    expect(refused.screen).toMatch(/partnerctl: cancelled: nothing changed/);
    const shown = (await runCli(['show-partner', 'Zebra Pricing', '--json'], backend.env)).json();
    expect(shown.companies.map((company: { company_id: string }) => company.company_id)).toContain('c-8');

    const confirmed = await onTerminal(['unmap-company', 'Zebra Pricing', '--company', 'c-8'], backend.env, [[/Unmap company/, 'y\r']]);
    expect(confirmed.code, confirmed.screen).toBe(0);
    expect(confirmed.screen).toMatch(/Unmapped company c-8/);
  });

  it('asks before an apply that disables partners or unmaps companies, stating the counts; a dry run never asks', async () => {
    await runCli(['create-partner', '--name', 'Apply Target'], backend.env);
    await runCli(['map-company', 'Apply Target', '--company', 'ap-1', '--company', 'ap-2', '--company', 'ap-3'], backend.env);
    const { writeFileSync } = await import('node:fs');
    const path = `${backend.dir}/cut.yaml`;
    writeFileSync(path, 'partners:\n  - name: Apply Target\n    status: disabled\n    companies: [ap-1]\n');
    const refused = await onTerminal(['apply', '-f', path, '--prune'], backend.env, [[/\?/, 'n\r']]);
    expect(refused.code, refused.screen).toBe(130);
    // (The terminal wraps the long question, possibly inside a word.)
    expect(refused.screen.replace(/\r?\n/g, '')).toMatch(/Apply 3 changes \(1 partner disabled, 2 companies unmapped\)/);
    expect((await runCli(['show-partner', 'Apply Target', '--json'], backend.env)).json()).toMatchObject({ status: 'active', company_count: 3 });
    const dry = await onTerminal(['apply', '-f', path, '--prune', '--dry-run'], backend.env, []);
    expect(dry.code, dry.screen).toBe(0);
    expect(dry.screen).not.toMatch(/\?/);
    const confirmed = await onTerminal(['apply', '-f', path, '--prune'], backend.env, [[/Apply 3 changes/, 'y\r']]);
    expect(confirmed.code, confirmed.screen).toBe(0);
    expect((await runCli(['show-partner', 'Apply Target', '--json'], backend.env)).json()).toMatchObject({ status: 'disabled', company_count: 1 });
  });

  it('asks for the value to look up without echoing it (a secret stays off the screen)', async () => {
    await runCli(['create-partner', '--name', 'Leaky Pricing'], backend.env);
    const { secret_key: secret, key_pair_id: pair } = (await runCli(['issue-keys', 'Leaky Pricing', '--json'], backend.env)).json();
    const { code, screen } = await onTerminal(['lookup'], backend.env, [[/Leaked value/, `${secret}\r`]]);
    expect(code, screen).toBe(0);
    expect(screen).toContain(pair);
    expect(screen).toMatch(/Contain: partnerctl rotate-keys ptn_\w+ --key-pair kp_\w+ --revoke-issued-tokens --secret-to replacement-of-kp_\w+\.json --yes/);
    expect(screen).not.toContain(secret.slice(8 + 26));
  });

  it('never prompts with --no-input, even on a terminal', async () => {
    const { code, screen } = await onTerminal(['create-partner', '--no-input'], backend.env, []);
    expect(code).toBe(2);
    expect(screen).toMatch(/missing_argument: missing --name/);
  });
});
