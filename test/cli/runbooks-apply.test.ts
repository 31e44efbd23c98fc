import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { BIN, runCli, runShell } from '../support/cli.js';

describe.each(BACKENDS)('apply -f and export on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const cli = (...args: string[]) => runCli(args, backend.env);
    const file = (name: string, text: string) => {
      const path = join(backend.dir, name);
      writeFileSync(path, text);
      return path;
    };
    const auditCount = async () => (await cli('audit', '--limit', '1000', '--json')).json().events.length as number;
    const bin = () => `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`;

    beforeAll(async () => {
      // Migrated: apply --dry-run, a read-only command, never migrates.
      backend = await createBackend(provider, { migrated: true });
    });
    afterAll(() => backend.dispose());

    const first = `
partners:
  - name: Acme Pricing
    companies: [company-1, company-2]
  - name: Beta Rates
    status: disabled
    companies:
      - company-2
      - "007"
  - name: Gamma   # no companies key: its mappings are not managed
`;

    it('prints a plan without changing anything on --dry-run, then applies it in one go; re-applying changes nothing', async () => {
      const path = file('desired.yaml', first);
      const dry = await cli('apply', '-f', path, '--dry-run', '--json');
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.json()).toMatchObject({
        applied: false,
        plan: { changes: 7, partners_created: 3, partners_disabled: 0, companies_mapped: 4, companies_unmapped: 0 },
      });
      expect((await cli('list-partners', '--json')).json().partners).toEqual([]);

      const text = await cli('apply', '-f', path, '--dry-run');
      expect(text.stdout).toContain('+ Acme Pricing: create (active), map 2 companies');
      expect(text.stdout).toContain('+ Beta Rates: create (disabled), map 2 companies');
      expect(text.stdout).toMatch(/Plan: 3 partners created, 0 enabled, 0 disabled; 4 companies mapped, 0 unmapped \(7 changes\)/);
      expect(text.stdout).toContain('Dry run: nothing was changed.');

      const applied = await cli('apply', '-f', path, '--json');
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.json()).toMatchObject({ applied: true, plan: { changes: 7 } });
      const partners = (await cli('list-partners', '--json')).json().partners;
      const rows = partners.map((p: { name: string; status: string; company_count: number }) => [p.name, p.status, p.company_count]);
      expect(rows.sort()).toEqual([
        ['Acme Pricing', 'active', 2],
        ['Beta Rates', 'disabled', 2],
        ['Gamma', 'active', 0],
      ]);

      const events = await auditCount();
      const again = await cli('apply', '-f', path, '--json');
      expect(again.code).toBe(0);
      expect(again.json()).toEqual({
        applied: false,
        changed: false,
        plan: { changes: 0, partners_created: 0, partners_enabled: 0, partners_disabled: 0, companies_mapped: 0, companies_unmapped: 0, keys_issued: 0, networks_set: 0, limits_set: 0, credentials_set: 0, partners: [] },
      });
      expect(await auditCount()).toBe(events);
      expect((await cli('apply', '-f', path)).stdout).toContain('Nothing to change');
    });

    it('reads JSON too, from stdin; leaves unlisted mappings alone without --prune and removes them with it', async () => {
      await cli('map-company', 'Acme Pricing', '--company', 'extra-1');
      const doc = JSON.stringify({ partners: [{ name: 'Acme Pricing', companies: ['company-1', 'company-3'] }, { name: 'Beta Rates', status: 'active' }] });
      const kept = await runCli(['apply', '-f', '-', '--json'], backend.env, { input: doc });
      expect(kept.code, kept.stderr).toBe(0);
      expect(kept.json().plan).toMatchObject({ changes: 2, companies_mapped: 1, companies_unmapped: 0, partners_enabled: 1 });
      // Unmapping without a terminal needs --yes (a dry run does not).
      const unconfirmed = await runCli(['apply', '-f', '-', '--prune', '--json'], backend.env, { input: doc });
      expect(unconfirmed.code).toBe(2);
      expect(unconfirmed.json().error.code).toBe('confirmation_required');
      expect(unconfirmed.json().error.message).toContain('Apply 2 changes (2 companies unmapped)');
      const dry = await runCli(['apply', '-f', '-', '--prune', '--dry-run', '--json'], backend.env, { input: doc });
      expect(dry.code, dry.stderr).toBe(0);
      expect((await cli('show-partner', 'Acme Pricing', '--json')).json().company_count).toBe(4);
      const pruned = await runCli(['apply', '-f', '-', '--prune', '--yes', '--json'], backend.env, { input: doc });
      expect(pruned.json().plan).toMatchObject({ changes: 2, companies_unmapped: 2 });
      expect(pruned.json().plan.partners[0].companies_unmapped.sort()).toEqual(['company-2', 'extra-1']);
      const listed = (await cli('list-companies', 'Acme Pricing', '--json')).json().companies.map((c: { company_id: string }) => c.company_id);
      expect(listed).toEqual(['company-1', 'company-3']);
      // A partner the document names without companies keeps its mappings even with --prune; nothing is deleted.
      expect((await cli('show-partner', 'Beta Rates', '--json')).json().company_count).toBe(2);
      expect((await cli('list-partners', '--json')).json().partners).toHaveLength(3);
    });

    it('refuses an invalid document whole, naming the path of every problem, and writes nothing', async () => {
      const events = await auditCount();
      const bad = file(
        'bad.yaml',
        `partners:
  - name: New One
    companies: [ok-1, "has space"]
  - name: New One
  - name: Third
    status: paused
    colour: red
  - companies: [x]
`,
      );
      const refused = await cli('apply', '-f', bad);
      expect(refused.code).toBe(2);
      const line = refused.stderr.trim();
      expect(line.split('\n')).toHaveLength(1);
      expect(line).toContain('partners[0].companies[1]: invalid company id');
      expect(line).toContain("partners[1].name: 'New One' is already given at partners[0]");
      expect(line).toMatch(/partners\[2\]\.status/);
      expect(line).toContain("partners[2]: unknown key 'colour'");
      expect(line).toMatch(/partners\[3\]\.name/);
      expect(line).toContain('nothing was changed');
      expect((await cli('apply', '-f', file('notyaml.yaml', 'partners: [\n'))).stderr).toMatch(/invalid_argument: .*not valid YAML.*nothing was changed/);
      // A syntax error quotes its line; an unknown key suggests the nearest known one.
      const syntax = await cli('apply', '-f', file('syntax.yaml', 'partners:\n  - name: Fine\n  - name: [broken\n  - name: Later\n'));
      expect(syntax.code).toBe(2);
      expect(syntax.stderr).toMatch(/not valid YAML: .*at line 4, column 3: " {2}- name: Later"; nothing was changed/);
      const misspelt = await cli('apply', '-f', file('misspelt.yaml', 'partners:\n  - name: Fine\n    compnies: [a]\n    stauts: active\n'));
      expect(misspelt.code).toBe(2);
      expect(misspelt.stderr).toContain("partners[0]: unknown key 'compnies': did you mean 'companies'?");
      expect(misspelt.stderr).toContain("partners[0]: unknown key 'stauts': did you mean 'status'?");
      expect((await cli('apply', '-f', file('top.yaml', 'partner:\n  - name: Fine\n'))).stderr).toContain("unknown key 'partner': did you mean 'partners'?");
      expect((await cli('apply', '-f', file('notjson.json', '{"partners": ['))).stderr).toMatch(/not valid JSON/);
      expect((await cli('apply', '-f', join(backend.dir, 'nope.yaml'))).code).toBe(2);
      expect((await cli('apply')).stderr).toMatch(/missing -f/);
      expect(await auditCount()).toBe(events);
      expect((await cli('list-partners', '--json')).json().partners).toHaveLength(3);
    });

    it('round-trips: export | apply -f - --dry-run shows no change (YAML and JSON, awkward ids and names)', async () => {
      await cli('create-partner', '--name', 'Odd: "quoted" #name');
      await cli('map-company', 'Odd: "quoted" #name', '--company', 'true', '--company', '12', '--company', 'a:b', '--company', '#x', '--company', "it's");
      const yaml = await runShell(`${bin()} export | ${bin()} apply -f - --dry-run --json`, backend.env);
      expect(yaml.code, yaml.stderr).toBe(0);
      expect(JSON.parse(yaml.stdout)).toMatchObject({ applied: false, plan: { changes: 0 } });
      const json = await runShell(`${bin()} export --json | ${bin()} apply -f - --dry-run --prune --json`, backend.env);
      expect(JSON.parse(json.stdout)).toMatchObject({ applied: false, plan: { changes: 0 } });
      const one = (await cli('export', '--partner', 'Beta Rates', '--json')).json();
      expect(one).toEqual({ partners: [{ name: 'Beta Rates', status: 'active', companies: ['007', 'company-2'] }] });
      expect((await cli('export', '--partner', 'No Such')).code).toBe(3);
    });

    it('issues keys only with --issue-keys-to: secrets into a new 0600 file, never to stdout; refuses an existing file', async () => {
      const doc = file('keys.yaml', 'partners:\n  - name: Acme Pricing\n  - name: Keyed New\n    companies: [k-1]\n');
      const plain = await cli('apply', '-f', doc, '--json');
      expect(plain.json().plan.keys_issued).toBe(0);
      const keysFile = join(backend.dir, 'secrets.json');
      const issued = await cli('apply', '-f', doc, '--issue-keys-to', keysFile, '--json');
      expect(issued.code, issued.stderr).toBe(0);
      expect(issued.json().plan).toMatchObject({ keys_issued: 2, changes: 2 });
      expect(statSync(keysFile).mode & 0o777).toBe(0o600);
      const keys = JSON.parse(readFileSync(keysFile, 'utf8')).keys as { name: string; secret_key: string; access_key: string }[];
      expect(keys.map((key) => key.name).sort()).toEqual(['Acme Pricing', 'Keyed New']);
      for (const key of keys) {
        expect(key.secret_key).toMatch(/^pctl_sk_/);
        expect(issued.stdout + issued.stderr).not.toContain(key.secret_key);
      }
      // The partners have keys now: a re-run has nothing to issue, exits 0 and leaves the file alone.
      const written = readFileSync(keysFile, 'utf8');
      const rerun = await cli('apply', '-f', doc, '--issue-keys-to', keysFile, '--json');
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(rerun.json()).toMatchObject({ plan: { keys_issued: 0, changes: 0 }, applied: false, keys_file: null });
      expect(readFileSync(keysFile, 'utf8')).toBe(written);
      const other = join(backend.dir, 'secrets-2.json');
      expect((await cli('apply', '-f', doc, '--issue-keys-to', other, '--json')).json().plan.keys_issued).toBe(0);
      expect(existsSync(other)).toBe(false);
      // With something to issue, an existing file is never written over: exit 2, and nothing of the plan is applied.
      const more = file('more-keys.yaml', 'partners:\n  - name: Keyed Later\n    companies: [k-2]\n');
      const refused = await cli('apply', '-f', more, '--issue-keys-to', keysFile);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--issue-keys-to .*exists/);
      expect(readFileSync(keysFile, 'utf8')).toBe(written);
      expect((await cli('show-partner', 'Keyed Later')).code).toBe(3);
      expect((await cli('apply', '-f', doc, '--issue-keys-to', join(backend.dir, 'dry.json'), '--dry-run')).code).toBe(0);
      expect(existsSync(join(backend.dir, 'dry.json'))).toBe(false);
    });
  });
});
